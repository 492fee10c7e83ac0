"""The do-no-harm rule of multi-class offsets (dmocli/operating_point/class_offsets_guard.py) on generated data
with known truth: does it keep the searched offsets where they help and the arg-max where it is as good?

K classes, x | y = k ~ N(SEP * e_k, I_K), class rates pi_k = ratio ** (-k / (K - 1)) normalised (the largest
class `ratio` times the smallest). Two models, both exact (no fitting noise, so the truth is known):

- "prior" (a model trained unweighted, calibrated): z = SEP * x + log pi, whose arg-max is the accuracy-optimal
  decision and starves the small classes of a macro figure: offsets should help;
- "balanced" (a class-weighted model): z = SEP * x, whose arg-max is the balanced (macro recall) optimum and is
  at or near the best macro F1: offsets searched on few rows should only fit noise.

Each draw takes N held-out rows (where dmo searches the offsets: the out-of-fold logits) and scores on 50,000
fresh rows: macro F1 of the arg-max, the full search (--problem ofbs), and the guarded choice; and for
--problem frop --target 0.8 the share of classes whose fresh recall meets 0.8 and the macro precision, for the
arg-max, the full search and the guarded choice.

    nice -n 10 python bench/class_offsets_guard.py --draws 20   # writes bench/results/class_offsets_guard.json

`--binding` asks instead where a floor met on the held-out rows holds on fresh rows (issue 38's (b)): the balanced
model at separations 2, 2.5 and 3, for --problem frop --target 0.8, each class of each draw sorted by its held-out
recall at the searched offsets: below the floor (out of reach), binding (within 0.03 above it: the search spent the
rest on precision) or slack; and the share of each whose fresh recall meets the floor.

    nice -n 10 python bench/class_offsets_guard.py --binding   # writes bench/results/class_offsets_binding.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from dmocli.operating_point.class_offsets import ClassProblem, counts, decide, search_offsets  # noqa: E402
from dmocli.operating_point.class_offsets_guard import guarded_offsets  # noqa: E402

CLASSES = 5
SEP = 1.5
FRESH = 50_000
FLOOR = 0.8


def draw(
    rng: np.random.Generator, n: int, rates: np.ndarray, model: str, sep: float = SEP
) -> tuple[np.ndarray, np.ndarray]:
    """(logits, labels) of n rows."""
    y = rng.choice(rates.size, size=n, p=rates)
    x = rng.normal(size=(n, rates.size)) + sep * np.eye(rates.size)[y]
    return sep * x + (np.log(rates) if model == "prior" else 0.0), y


def macro(z: np.ndarray, y: np.ndarray, offsets: np.ndarray | None) -> tuple[float, np.ndarray, float]:
    """(macro F1, per-class recall, macro precision) of the decision."""
    tp, predicted, support = counts(decide(z, offsets), y, z.shape[1])
    precision = np.divide(tp, predicted, out=np.zeros(tp.shape), where=predicted > 0)
    recall = tp / support
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(tp.shape), where=precision + recall > 0)
    return float(f1.mean()), recall, float(precision.mean())


def one_cell(model: str, ratio: float, n: int, draws: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rates = ratio ** (-np.arange(CLASSES) / (CLASSES - 1))
    rates /= rates.sum()
    fresh_z, fresh_y = draw(rng, FRESH, rates, model)
    ofbs = ClassProblem("ofbs", (None,) * CLASSES)
    frop = ClassProblem("frop", (FLOOR,) * CLASSES)
    rows = []
    for _ in range(draws):
        z, y = draw(rng, n, rates, model)
        if np.bincount(y, minlength=CLASSES).min() < 2:
            continue
        searched = search_offsets(z, y, ofbs)
        guarded, choice = guarded_offsets(z, y, ofbs)
        floor_searched = search_offsets(z, y, frop)
        floor_guarded, floor_choice = guarded_offsets(z, y, frop)
        row = {
            "model": model,
            "ratio": ratio,
            "n": n,
            "f1_argmax": macro(fresh_z, fresh_y, None)[0],
            "f1_search": macro(fresh_z, fresh_y, searched.offsets)[0],
            "f1_guarded": macro(fresh_z, fresh_y, guarded.offsets)[0],
            "kept_offsets": choice is not None and choice.chosen == "offsets",
        }
        for name, offsets in (("argmax", None), ("search", floor_searched.offsets), ("guarded", floor_guarded.offsets)):
            _, recall, precision = macro(fresh_z, fresh_y, offsets)
            row[f"meet_{name}"] = int((recall >= FLOOR).sum())
            row[f"precision_{name}"] = precision
        row["floor_chosen"] = None if floor_choice is None else floor_choice.chosen
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    cells = dict.fromkeys((r["model"], r["ratio"], r["n"]) for r in rows)
    for model, ratio, n in cells:
        mine = [r for r in rows if (r["model"], r["ratio"], r["n"]) == (model, ratio, n)]
        mean = {key: float(np.mean([r[key] for r in mine])) for key in mine[0] if key.startswith(("f1_", "precision_"))}
        best = [max(r["f1_argmax"], r["f1_search"]) for r in mine]
        out.append(
            {
                "model": model,
                "ratio": ratio,
                "n": n,
                "draws": len(mine),
                **mean,
                "offsets_kept": f"{sum(r['kept_offsets'] for r in mine)}/{len(mine)}",
                "guarded_picked_better": f"{sum(abs(r['f1_guarded'] - b) < 1e-12 for r, b in zip(mine, best))}"
                f"/{len(mine)}",
                "search_beats_argmax": f"{sum(r['f1_search'] > r['f1_argmax'] for r in mine)}/{len(mine)}",
                **{
                    f"meet_{name}": f"{sum(r[f'meet_{name}'] for r in mine)}/{CLASSES * len(mine)}"
                    for name in ("argmax", "search", "guarded")
                },
            }
        )
    return out


BINDING_MARGIN = 0.03  # a held-out recall this close above the floor: the search spent the rest on precision


def binding_cell(sep: float, ratio: float, n: int, draws: int, seed: int) -> dict:
    """Per class of `draws` held-out samples: its held-out recall at the offsets searched for the recall floor,
    and whether its recall on FRESH rows meets the floor; counted by kind (out of reach, binding, slack)."""
    rng = np.random.default_rng(seed)
    rates = ratio ** (-np.arange(CLASSES) / (CLASSES - 1))
    rates /= rates.sum()
    fresh_z, fresh_y = draw(rng, FRESH, rates, "balanced", sep)
    frop = ClassProblem("frop", (FLOOR,) * CLASSES)
    kinds = {kind: [0, 0] for kind in ("out_of_reach", "binding", "slack")}
    argmax_met = classes = 0
    argmax_fresh = macro(fresh_z, fresh_y, None)[1]
    for _ in range(draws):
        z, y = draw(rng, n, rates, "balanced", sep)
        if np.bincount(y, minlength=CLASSES).min() < 2:
            continue
        offsets = search_offsets(z, y, frop).offsets
        held, fresh = macro(z, y, offsets)[1], macro(fresh_z, fresh_y, offsets)[1]
        for held_recall, fresh_recall in zip(held, fresh):
            kind = "slack" if held_recall >= FLOOR + BINDING_MARGIN else "binding"
            kind = "out_of_reach" if held_recall < FLOOR else kind
            kinds[kind][0] += int(fresh_recall >= FLOOR)
            kinds[kind][1] += 1
        argmax_met += int((argmax_fresh >= FLOOR).sum())
        classes += CLASSES
    met = sum(kind[0] for kind in kinds.values())
    return {
        "sep": sep,
        "ratio": ratio,
        "n": n,
        "argmax_meets": f"{argmax_met}/{classes}",
        "search_meets": f"{met}/{classes}",
        **{f"{kind}_meets": f"{a}/{b}" for kind, (a, b) in kinds.items()},
    }


def binding(draws: int) -> None:
    table = []
    for seed, (sep, ratio, n) in enumerate(
        ((sep, ratio, n) for sep in (2.0, 2.5, 3.0) for ratio in (10.0, 50.0) for n in (500, 5000)), 100
    ):
        table.append(binding_cell(sep, ratio, n, draws, seed))
        print(f"sep {sep:g} ratio {ratio:g} n {n} done", file=sys.stderr, flush=True)
    print_table(table, list(table[0]))
    print(write_results("class_offsets_binding", {"draws": draws, "floor": FLOOR, "table": table}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--binding", action="store_true", help="where a floor met on held-out rows holds on fresh")
    args = parser.parse_args()
    if args.binding:
        binding(args.draws)
        return
    rows: list[dict] = []
    seed = 0
    for model in ("prior", "balanced"):
        for ratio in (1.0, 10.0, 50.0):
            for n in (500, 5000):
                seed += 1
                rows += one_cell(model, ratio, n, args.draws, seed)
                print(f"{model} ratio {ratio:g} n {n} done", file=sys.stderr, flush=True)
    table = summary(rows)
    print_table(
        table,
        [
            "model",
            "ratio",
            "n",
            "draws",
            "f1_argmax",
            "f1_search",
            "f1_guarded",
            "offsets_kept",
            "guarded_picked_better",
            "search_beats_argmax",
            "meet_argmax",
            "meet_search",
            "meet_guarded",
            "precision_argmax",
            "precision_search",
            "precision_guarded",
        ],
    )
    print(write_results("class_offsets_guard", {"args": vars(args), "rows": rows, "summary": table}))


if __name__ == "__main__":
    main()
