"""Does `--model auto --confidence C` keep its promise? Coverage of the kept model's certificate, with known truth.

`--model auto` keeps the better of two certified candidates (linear, gbdt). Keeping the better of two bounds is
itself a look at the data: a candidate whose bound came out high by chance is the one kept. So each candidate is
certified at 1 - (1 - C)/2 and, by the union bound, the kept one's certificate holds with probability at least C.
This bench measures it: on generated data whose law is known (a linear signal plus one interaction, so neither
kind dominates and the choice is close), each draw trains

- `auto`: `--model auto --confidence C` (each candidate at 1 - (1 - C)/2);
- `naive`: `--model linear` and `--model gbdt`, each at `--confidence C`, the better certified objective kept (the
  selection the union bound pays for, left unpaid);
- `gbdt`, `linear`: each alone at C (no selection);

all with `--new-rows inf` (the certificate is about the population value), FPOR precision >= 0.8, and checks each
kept threshold's precision on 100,000 fresh rows of the same law (the population value, to about +/- 0.005).
Coverage: the share of draws where that precision is >= the target (a refused run certifies nothing and is not
counted). Printed with its binomial standard error; written to bench/results/model_auto_coverage.json.

    nice -n 10 python bench/model_auto_coverage.py --draws 100
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

TARGET = 0.8
FEATURES = 8


def law(rows: int, seed: int) -> pa.Table:
    """The known law: a linear signal in four features and an interaction of two more, about 12 % positives."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, FEATURES)).astype(np.float32)
    logit = 3.0 * X[:, 0] + 2.0 * X[:, 1] - 1.5 * X[:, 2] + 1.0 * X[:, 3] + 2.0 * X[:, 4] * X[:, 5] - 5.5
    y = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return pa.table({**{f"x{j}": X[:, j] for j in range(FEATURES)}, "label": y})


def certified(data: pa.Table, fresh: pa.Table, y_fresh: np.ndarray, *, model: str, confidence: float, seed: int):
    """One certified training: (kept kind, certified objective, population precision) or None where refused."""
    from dmocli import TrainOptions, train
    from dmocli.errors import DmoError

    opts = TrainOptions(problem="fpor", target=TARGET, model=model, confidence=confidence, seed=seed, device="cpu")
    opts.new_rows = math.inf
    try:
        trained, report = train(data, opts)
    except DmoError:  # the target is not certified: nothing promised
        return None
    flagged = trained.logits(fresh)[0] >= report["threshold"]
    precision = float(y_fresh[flagged].mean()) if flagged.any() else 1.0
    kept = report.get("model_selection", {}).get("chosen", model)
    return kept, float(report["operating_point"]["objective"]), precision


def one_draw(task: tuple[int, int, float]) -> dict[str, Any]:
    seed, rows, confidence = task
    os.environ["OMP_NUM_THREADS"] = "1"
    data, fresh = law(rows, seed), law(100_000, 10_000_000 + seed)
    y_fresh = fresh.column("label").to_numpy()
    fresh = fresh.drop(["label"])
    out: dict[str, Any] = {"seed": seed}
    out["auto"] = certified(data, fresh, y_fresh, model="auto", confidence=confidence, seed=seed)
    alone = {kind: certified(data, fresh, y_fresh, model=kind, confidence=confidence, seed=seed) for kind in
             ("linear", "gbdt")}  # fmt: skip
    out.update(alone)
    answered = [result for result in alone.values() if result is not None]
    out["naive"] = max(answered, key=lambda result: result[1]) if answered else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--rows", type=int, default=3000, help="rows of DATA per draw (about 360 positives)")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--name", default="model_auto_coverage")
    args = parser.parse_args()
    tasks = [(seed, args.rows, args.confidence) for seed in range(args.draws)]
    with ProcessPoolExecutor(args.workers) as pool:
        draws = list(pool.map(one_draw, tasks))
    table = []
    for method in ("auto", "naive", "gbdt", "linear"):
        answered = [d[method] for d in draws if d[method] is not None]
        held = [precision >= TARGET for _, _, precision in answered]
        coverage = float(np.mean(held)) if held else None
        se = math.sqrt(coverage * (1 - coverage) / len(held)) if held else None
        kinds = {kind: sum(1 for k, _, _ in answered if k == kind) for kind in ("linear", "gbdt")}
        table.append({"method": method, "draws": len(draws), "certified": len(answered), "coverage": coverage,
                      "se": se, "mean_objective": float(np.mean([o for _, o, _ in answered])) if answered else None,
                      "kept_linear": kinds["linear"], "kept_gbdt": kinds["gbdt"]})  # fmt: skip
    print(f"FPOR precision >= {TARGET}, --confidence {args.confidence} (auto: each candidate at "
          f"{1 - (1 - args.confidence) / 2:g}), --new-rows inf, {args.rows} rows per draw; coverage = share of "
          "certified draws whose precision on 100,000 fresh rows is >= the target")  # fmt: skip
    print_table(table, ["method", "draws", "certified", "coverage", "se", "mean_objective", "kept_linear",
                        "kept_gbdt"])  # fmt: skip
    path = write_results(args.name, {"confidence": args.confidence, "rows": args.rows, "target": TARGET,
                                     "table": table, "draws": draws})  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
