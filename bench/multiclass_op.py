"""Multi-class operating points (issue 38): per-class recall floors and macro F1 by class offsets searched on
out-of-fold logits, against the arg-max of the class-weighted model; and the class probabilities' calibration.

Each resplit pools a set's train, val and test files, deals them into a stratified 60/40 train/test split (seeded),
and trains wce (linear, every class weighted alike) as `dmo train` does by default: 5 stratified folds, each
fold's model scoring the fold it did not see (the out-of-fold logits), the saved model the 5 fold models' logits
averaged (--cv-transfer ensemble). On the test split:

(a) arg-max of the model's logits (what dmo did before issue 38);
(b) offsets searched on the out-of-fold logits for --problem frop --target A (every class's recall >= A);
(c) the same with --confidence 0.95 (Bonferroni over the classes, Clopper-Pearson per class);

((b) keeps the closest offsets where a floor is out of reach on the out-of-fold logits, as --allow-infeasible
does; (c) answers only where every floor is certified there, as dmo train exits 3 otherwise)

for A in 0.8 and 0.9: the share of class-resplits whose test recall meets A, and the test macro precision; (c)
counts only the resplits it answers (certified on the out-of-fold logits). Macro F1: arg-max against the offsets
of --problem ofbs. Calibration: ECE of the predicted class's probability and the worst gap between a class's mean
probability and its test rate, softmax against the temperature-and-bias map fitted on the out-of-fold logits.

Sets: letter and optdigits of ../shared/data (satimage there has two classes: no multi-class case), and a
long-tailed variant of each: class k (in label order) keeps a share TAIL_RATIO ** (-k / (K - 1)) of its rows, so
the largest class has TAIL_RATIO times the rows of the smallest.

    nice -n 10 python bench/multiclass_op.py --resplits 10   # writes bench/results/multiclass_op.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, print_table, write_results  # noqa: E402

from dmocli import TrainOptions, train  # noqa: E402
from dmocli.operating_point.class_offsets import ClassProblem, decide, search_offsets  # noqa: E402
from dmocli.operating_point.class_offsets_guard import guarded_offsets  # noqa: E402
from dmocli.operating_point.multiclass_calibration import fit_temperature_bias, multiclass_calibration_figures, softmax  # noqa: E402
from dmocli.prep.dataset import stratified_folds  # noqa: E402

SETS = ("optdigits", "letter")
FLOORS = (0.8, 0.9)
TAIL_RATIO = 20.0
FOLDS = 5
TEST_SHARE = 0.4


def pooled(data: Path, name: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(data / name / f"{part}.parquet") for part in ("train", "val", "test")])


def long_tailed(table: pa.Table, seed: int) -> pa.Table:
    """Class k (label order) keeps TAIL_RATIO ** (-k / (K - 1)) of its rows, drawn with `seed`."""
    rng = np.random.default_rng(seed)
    labels = table.column("label").to_numpy()
    classes = np.unique(labels)
    keep = []
    for k, value in enumerate(classes):
        rows = np.flatnonzero(labels == value)
        share = TAIL_RATIO ** (-k / (len(classes) - 1))
        keep.append(rng.choice(rows, size=max(10, round(share * rows.size)), replace=False))
    return table.take(pa.array(np.sort(np.concatenate(keep))))


def stratified(labels: np.ndarray, share: float, seed: int) -> np.ndarray:
    """A boolean mask of `share` of each class's rows."""
    rng = np.random.default_rng(seed)
    chosen = np.zeros(labels.size, dtype=bool)
    for value in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == value))
        chosen[rows[: round(share * rows.size)]] = True
    return chosen


def scores(train_table: pa.Table, test_table: pa.Table, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out-of-fold logits of the train rows, their labels as codes, the fold models' mean logits on test)."""
    labels = train_table.column("label").to_numpy()
    folds = stratified_folds(labels, FOLDS, seed=seed)  # dmo train's own folds
    oof, test = None, None
    codes = None
    for fold in range(FOLDS):
        held = folds == fold
        model, _ = train(
            train_table.filter(pa.array(~held)), TrainOptions(problem="multiclass", cv=0, seed=seed, device="cpu")
        )
        classes = model.labels.classes
        codes = np.searchsorted(np.asarray(classes), labels)
        fold_logits, _ = model.logits(train_table.filter(pa.array(held)))
        test_logits, _ = model.logits(test_table)
        oof = np.zeros((labels.size, len(classes))) if oof is None else oof
        oof[held] = fold_logits
        test = test_logits / FOLDS if test is None else test + test_logits / FOLDS
    return oof, codes, test


def per_class_recall(predicted: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    tp = np.bincount(y[predicted == y], minlength=k)
    made = np.bincount(predicted, minlength=k)
    return tp / np.bincount(y, minlength=k), np.divide(tp, made, out=np.zeros(k), where=made > 0)


def macro_f1(predicted: np.ndarray, y: np.ndarray, k: int) -> float:
    recall, precision = per_class_recall(predicted, y, k)
    return float(
        np.mean(np.divide(2 * precision * recall, precision + recall, out=np.zeros(k), where=precision + recall > 0))
    )


def worst_rate_gap(proba: np.ndarray, y: np.ndarray) -> float:
    figures = multiclass_calibration_figures(proba, y, proba.argmax(axis=1))
    mean, rate = np.asarray(figures["mean_probability"]), np.asarray(figures["class_rate"])
    return float(np.max(np.abs(mean - rate) / rate))


def one_resplit(name: str, table: pa.Table, seed: int) -> list[dict]:
    labels = table.column("label").to_numpy()
    test_mask = stratified(labels, TEST_SHARE, 1000 + seed)
    started = time.perf_counter()
    oof, y_oof, test_logits = scores(table.filter(pa.array(~test_mask)), table.filter(pa.array(test_mask)), seed)
    classes = np.unique(labels)
    y_test = np.searchsorted(classes, labels[test_mask])
    k = classes.size
    rows = []
    argmax = decide(test_logits, None)
    for floor in FLOORS:
        problem = ClassProblem("frop", (floor,) * k)
        for method, confidence in (
            ("(a) arg-max", None),
            ("(b) offsets on OOF", None),
            ("(c) --confidence 0.95", 0.95),
        ):
            answered, choice = True, None
            if method.startswith("(a)"):
                predicted = argmax
            else:
                point, choice = guarded_offsets(oof, y_oof, problem, confidence)
                answered = bool(point.feasible) or confidence is None  # (b) keeps the closest offsets
                predicted = decide(test_logits, point.offsets)
            recall, precision = per_class_recall(predicted, y_test, k)
            rows.append(
                {
                    "set": name,
                    "resplit": seed,
                    "floor": floor,
                    "method": method,
                    "answered": answered,
                    "classes": k,
                    "classes_meeting": int((recall >= floor).sum()),
                    "macro_precision": float(precision.mean()),
                    "chosen": None if method.startswith("(a)") or choice is None else choice.chosen,
                }
            )
    ofbs, ofbs_choice = guarded_offsets(oof, y_oof, ClassProblem("ofbs", (None,) * k))
    searched = search_offsets(oof, y_oof, ClassProblem("ofbs", (None,) * k))
    calibration = fit_temperature_bias(oof, y_oof, "cv")
    raw, mapped = softmax(test_logits), calibration.probabilities(test_logits)
    rows.append(
        {
            "set": name,
            "resplit": seed,
            "method": "macro F1 and calibration",
            "macro_f1_argmax": macro_f1(argmax, y_test, k),
            "macro_f1_offsets": macro_f1(decide(test_logits, ofbs.offsets), y_test, k),
            "macro_f1_search": macro_f1(decide(test_logits, searched.offsets), y_test, k),
            "ofbs_chosen": ofbs_choice.chosen if ofbs_choice else None,
            "ece_softmax": multiclass_calibration_figures(raw, y_test, raw.argmax(axis=1))["ece"],
            "ece_calibrated": multiclass_calibration_figures(mapped, y_test, mapped.argmax(axis=1))["ece"],
            "rate_gap_softmax": worst_rate_gap(raw, y_test),
            "rate_gap_calibrated": worst_rate_gap(mapped, y_test),
            "seconds": time.perf_counter() - started,
        }
    )
    return rows


def summary(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    floors, other = [], []
    sets = list(dict.fromkeys(r["set"] for r in rows))
    for name in sets:
        for floor in FLOORS:
            for method in ("(a) arg-max", "(b) offsets on OOF", "(c) --confidence 0.95"):
                mine = [r for r in rows if r["set"] == name and r.get("floor") == floor and r["method"] == method]
                answered = [r for r in mine if r["answered"]]
                meeting = sum(r["classes_meeting"] for r in answered)
                total = sum(r["classes"] for r in answered)
                floors.append(
                    {
                        "set": name,
                        "floor": floor,
                        "method": method,
                        "answered": f"{len(answered)}/{len(mine)}",
                        "class_resplits_meeting": f"{meeting}/{total}",
                        "share_meeting": meeting / total if total else None,
                        "macro_precision": float(np.mean([r["macro_precision"] for r in answered]))
                        if answered
                        else None,
                        "full_search_kept": f"{sum(r['chosen'] == 'offsets' for r in mine)}/{len(mine)}",
                    }
                )
        mine = [r for r in rows if r["set"] == name and r["method"] == "macro F1 and calibration"]
        other.append(
            {
                "set": name,
                "resplits": len(mine),
                **{
                    key: float(np.mean([r[key] for r in mine]))
                    for key in (
                        "macro_f1_argmax",
                        "macro_f1_offsets",
                        "macro_f1_search",
                        "ece_softmax",
                        "ece_calibrated",
                        "rate_gap_softmax",
                        "rate_gap_calibrated",
                    )
                },
                "offsets_f1_at_least_argmax": f"{sum(r['macro_f1_offsets'] >= r['macro_f1_argmax'] for r in mine)}"
                f"/{len(mine)}",
                "argmax_kept": f"{sum(r['ofbs_chosen'] == 'arg-max' for r in mine)}/{len(mine)}",
            }
        )
    return floors, other


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resplits", type=int, default=10)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--variants", nargs="+", choices=("full", "long-tailed"), default=["full", "long-tailed"])
    parser.add_argument("--name", default="multiclass_op", help="the results file: bench/results/NAME.json")
    parser.add_argument(
        "--merge", nargs="+", type=Path, help="result files of runs split by --sets/--variants: report their rows"
    )
    args = parser.parse_args()
    if args.merge:  # runs split across processes, one summary
        report([row for path in args.merge for row in json.loads(path.read_text())["rows"]], args)
        return
    import torch

    torch.set_num_threads(1)
    rows: list[dict] = []
    for name in args.sets:
        table = pooled(args.data, name)
        for variant in [name if v == "full" else f"{name} long-tailed" for v in args.variants]:
            for seed in range(args.resplits):
                data = long_tailed(table, seed) if variant != name else table
                rows += one_resplit(variant, data, seed)
                print(f"{variant} resplit {seed} done ({rows[-1]['seconds']:.0f} s)", file=sys.stderr, flush=True)
                report(rows, args)  # after each resplit: a run stopped short leaves the finished ones behind


def report(rows: list[dict], args: argparse.Namespace) -> None:
    floors, other = summary(rows)
    print_table(
        floors,
        [
            "set",
            "floor",
            "method",
            "answered",
            "class_resplits_meeting",
            "share_meeting",
            "macro_precision",
            "full_search_kept",
        ],
    )
    print_table(
        other,
        [
            "set",
            "resplits",
            "macro_f1_argmax",
            "macro_f1_offsets",
            "macro_f1_search",
            "offsets_f1_at_least_argmax",
            "argmax_kept",
            "ece_softmax",
            "ece_calibrated",
            "rate_gap_softmax",
            "rate_gap_calibrated",
        ],
    )
    print(
        write_results(
            args.name,
            {
                "args": vars(args) | {"data": str(args.data), "merge": [str(p) for p in args.merge or []]},
                "rows": rows,
                "floors": floors,
                "macro_f1_calibration": other,
            },
        )
    )


if __name__ == "__main__":
    main()
