"""`--cv auto` against `--cv 5`: training time, test objective and test feasibility, on generated data at several
counts of positives and on shared sets pooled and resplit (issue 37 item 5; docs/training.md#cv-auto).

Generated: 10 Gaussian features, 10 % positives shifted by 2.5 standard deviations in total (AUC about 0.96), at
200, 2,000, 6,000 and 20,000 positives (2,000 to 200,000 rows), each size drawn RESPLITS times (seed r; gbdt 3), trained
at FPOR 0.8, FROP 0.8 and OFBS with the linear model (and gbdt at 20,000 positives, FROP only), and scored on one
fixed test draw of 200,000 rows. 6,000 positives sit just above the count FPOR/FROP 0.8 need for one split
(5,970) and below OFBS's (8,695): the split there is the least precise auto ever uses. Shared sets (ada,
satimage, the two with the most positives): train, val and test pooled, then split 80/20 stratified with seed r
for r < SHARED_RESPLITS. Both modes train in this process through `dmocli.train` on the same table with the same
seed; the time is the call's wall time (read, preprocess, fit(s), threshold), the median over resplits. The
objective is the test recall (FPOR), precision (FROP) or F1 (OFBS) at the saved threshold; feasibility is the
share of resplits whose test precision (FPOR) or recall (FROP) reaches the target. `diff` is the mean paired
difference auto - cv5 of the objective and `se` its standard error over resplits.

    nice -n 10 python bench/cv_auto.py [--resplits 10] [--shared-resplits 10] [--data /work/shared/data]
    nice -n 10 python bench/cv_auto.py --positives 200000 --resplits 2 --shared-resplits 0 --no-gbdt --name cv_auto_2m
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, print_table, write_results  # noqa: E402

import dmocli  # noqa: E402
from dmocli.options import TrainOptions  # noqa: E402

PROBLEMS = {"fpor": ("precision", "recall"), "frop": ("recall", "precision"), "ofbs": (None, "f_beta")}
TARGET = 0.8
POSITIVES = (200, 2_000, 6_000, 20_000)
RATE, FEATURES, SHIFT, TEST_ROWS = 0.1, 10, 2.5, 200_000
SHARED_SETS = ("ada", "satimage")
MODES = (5, "auto")
GBDT_RESPLITS = 3  # a gbdt --cv 5 run at 200,000 rows takes 15-25 s on two shared cores


def generated(rows: int, seed: int) -> pa.Table:
    """Positives at RATE whose features are shifted by SHIFT / sqrt(FEATURES) on every coordinate."""
    rng = np.random.default_rng(seed)
    y = (rng.random(rows) < RATE).astype(np.int64)
    X = rng.normal(size=(rows, FEATURES)).astype(np.float32) + np.float32(SHIFT / np.sqrt(FEATURES)) * y[:, None]
    return pa.table({**{f"x{i}": X[:, i] for i in range(FEATURES)}, "label": y})


def resplit(pooled: pa.Table, seed: int) -> tuple[pa.Table, pa.Table]:
    """An 80/20 stratified (train, test) split of `pooled` by `seed`."""
    rng = np.random.default_rng(seed)
    y = pooled.column("label").to_numpy()
    test = np.zeros(len(y), dtype=bool)
    for cls in np.unique(y):
        rows = np.flatnonzero(y == cls)
        test[rng.choice(rows, size=round(0.2 * len(rows)), replace=False)] = True
    return pooled.filter(pa.array(~test)), pooled.filter(pa.array(test))


def one_run(train: pa.Table, test: pa.Table, problem: str, model: str, cv: int | str, seed: int) -> dict[str, Any]:
    """Train with --cv `cv`, score the test table; the figures of one row of the raw results."""
    target = None if problem == "ofbs" else TARGET
    options = TrainOptions(problem=problem, target=target, model=model, cv=cv, seed=seed, allow_infeasible=True)
    started = time.perf_counter()
    fitted, report = dmocli.train(train, options)
    seconds = time.perf_counter() - started
    scored = dmocli.evaluate(fitted, test)["splits"]["data"]
    constraint, objective = PROBLEMS[problem]
    return {
        "seconds": seconds,
        "decision": report.get("cv_rule", {}).get("decision", "folds"),
        "objective": scored[objective],
        "feasible": None if constraint is None else bool(scored[constraint] >= TARGET),
        "train_positives": int(report["splits"]["train"]["n_pos"] + report["splits"].get("val", {}).get("n_pos", 0)),
    }


def summarize(runs: list[dict[str, Any]], key: dict[str, Any]) -> dict[str, Any]:
    """One table row: both modes of one (data, size, problem, model) over its resplits, paired by resplit."""
    by_mode = {mode: [run for run in runs if run["cv"] == mode] for mode in MODES}
    five, auto = by_mode[5], by_mode["auto"]
    diffs = [a["objective"] - f["objective"] for a, f in zip(auto, five)]
    row = {**key, "resplits": len(auto), "auto_decision": "/".join(sorted({run["decision"] for run in auto}))}
    for name, mode_runs in (("cv5", five), ("auto", auto)):
        row[f"{name}_s"] = statistics.median(run["seconds"] for run in mode_runs)
        row[f"{name}_obj"] = statistics.fmean(run["objective"] for run in mode_runs)
        feasible = [run["feasible"] for run in mode_runs if run["feasible"] is not None]
        row[f"{name}_feas"] = f"{sum(feasible)}/{len(feasible)}" if feasible else "-"
    row["diff"] = statistics.fmean(diffs)
    row["se"] = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
    row["speedup"] = row["cv5_s"] / row["auto_s"]
    return row


def progress(row: dict[str, Any]) -> None:
    print(f"{row['data']} {row['positives']} {row['problem']} {row['model']}: done", file=sys.stderr, flush=True)


def bench_generated(resplits: int, sizes: list[int], gbdt: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    test = generated(TEST_ROWS, 10_000)
    rows, raw = [], []
    for positives in sizes:
        cases = [(problem, "linear") for problem in PROBLEMS]
        if gbdt and positives == sizes[-1]:
            cases.append(("frop", "gbdt"))
        for problem, model in cases:
            runs = []
            for r in range(min(resplits, GBDT_RESPLITS) if model == "gbdt" else resplits):
                train = generated(round(positives / RATE), r)
                for cv in MODES:
                    runs.append({"data": "generated", "positives": positives, "problem": problem, "model": model,
                                 "resplit": r, "cv": cv, **one_run(train, test, problem, model, cv, r)})  # fmt: skip
            raw += runs
            rows.append(
                summarize(runs, {"data": "generated", "positives": positives, "problem": problem, "model": model})
            )
            progress(rows[-1])
    return rows, raw


def bench_shared(directory: Path, resplits: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, raw = [], []
    for name in SHARED_SETS:
        parts = [pq.read_table(directory / name / f"{part}.parquet") for part in ("train", "val", "test")]
        pooled = pa.concat_tables(parts)
        for problem in PROBLEMS:
            runs = []
            for r in range(resplits):
                train, test = resplit(pooled, r)
                for cv in MODES:
                    runs.append({"data": name, "problem": problem, "model": "linear", "resplit": r, "cv": cv,
                                 **one_run(train, test, problem, "linear", cv, r)})  # fmt: skip
            raw += runs
            positives = runs[0]["train_positives"]
            rows.append(summarize(runs, {"data": name, "positives": positives, "problem": problem, "model": "linear"}))
            progress(rows[-1])
    return rows, raw


COLUMNS = [
    "data", "positives", "problem", "model", "resplits", "auto_decision", "cv5_s", "auto_s", "speedup",
    "cv5_obj", "auto_obj", "diff", "se", "cv5_feas", "auto_feas",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resplits", type=int, default=10, help="draws of each generated size")
    parser.add_argument("--shared-resplits", type=int, default=10, help="80/20 resplits of each shared set")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data sets' folder")
    parser.add_argument("--positives", default=",".join(map(str, POSITIVES)), help="generated sizes, in positives")
    parser.add_argument("--no-gbdt", action="store_true", help="leave out gbdt at the largest size")
    parser.add_argument("--name", default="cv_auto", help="bench/results/NAME.json")
    args = parser.parse_args()
    rows, raw = bench_generated(args.resplits, [int(size) for size in args.positives.split(",")], not args.no_gbdt)
    if args.shared_resplits and (args.data / SHARED_SETS[0]).exists():
        shared_rows, shared_raw = bench_shared(args.data, args.shared_resplits)
        rows, raw = rows + shared_rows, raw + shared_raw
    print_table(rows, COLUMNS)
    path = write_results(
        args.name,
        {"target": TARGET, "test_rows": TEST_ROWS, "resplits": args.resplits,
         "shared_resplits": args.shared_resplits, "rows": rows, "runs": raw},
    )  # fmt: skip
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
