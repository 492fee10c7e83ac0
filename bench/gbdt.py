"""Gradient-boosted trees: dmo's `--model gbdt` (wce, ero) against the boosting libraries used directly.

Every binary set of ../shared/data is pooled (train + val + test) and re-split, stratified, into 80 % DATA and
20 % test; DATA is split again, stratified, into 75 % fit rows and 25 % validation rows (dmocli's own
stratified_split, the rows `--val-frac 0.25` takes). On each resplit, for FPOR 0.8, FROP 0.8 and OFBS, every
method's threshold is the exact search on the validation rows:

- `gbdt_wce`, `gbdt_ero`: `dmo train --model gbdt --val-frac 0.25 --cv 0` (defaults otherwise);
- `xgb_spw`: xgboost.XGBClassifier with scale_pos_weight = negatives/positives and the same tree settings and
  early stopping on the validation rows (the library as a user would call it, plus dmo's exact threshold);
- `hgb`: scikit-learn HistGradientBoostingClassifier(class_weight="balanced"), defaults;
- `linear_wce`: dmo's linear model, for when trees pay;
- with `--cv5`, `gbdt_wce_cv5`, `gbdt_ero_cv5`: dmo's trees with `--cv 5` on all of DATA (out-of-fold threshold).

Reported: refusals (target out of reach on validation), test feasibility, mean test objective, the train
objective at the chosen threshold (feasible first) of ero against wce, and seconds per fit.

    python bench/gbdt.py --resplits 10          # writes bench/results/gbdt.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results  # noqa: E402
from targets_on_new_data import PROBLEMS, outcome, pooled, resplit, summarize, test_metrics  # noqa: E402

DMO_METHODS = {"gbdt_wce": ("wce", "gbdt"), "gbdt_ero": ("ero", "gbdt"), "linear_wce": ("wce", "linear")}
CV_METHODS = {"gbdt_wce_cv5": ("wce", "gbdt"), "gbdt_ero_cv5": ("ero", "gbdt")}  # --cv5: DATA pooled, --cv 5


def dmo_run(
    data, test, problem: str, target: float | None, method: str, seed: int, params: dict[str, str], transfer: str
) -> dict[str, Any]:
    from dmocli import TrainOptions, train
    from dmocli.errors import UnreachableTarget

    solver, model = {**DMO_METHODS, **CV_METHODS}[method]
    opts = TrainOptions(problem=problem, target=target, solver=solver, model=model, seed=seed, device="cpu")
    opts.params = dict(params) if model == "gbdt" else {}
    opts.cv_transfer = transfer
    opts.val_frac, opts.cv = (0.0, 5) if method in CV_METHODS else (0.25, 0)
    started = time.perf_counter()
    try:
        trained, report = train(data, opts)
    except UnreachableTarget:
        return {"refused": True, "test_feasible": None, "test_objective": None, "seconds": None}
    seconds = time.perf_counter() - started
    logits, _ = trained.logits(test)
    result = outcome(problem, target, test_metrics(trained.decide(logits), test.column("label").to_numpy()))
    train_split = report["splits"]["train"]
    objective = {"fpor": "recall", "frop": "precision", "ofbs": "f_beta"}[problem]
    result.update(
        seconds=seconds,
        fit_seconds=report["fit_seconds"],
        train_feasible=train_split["feasible"],
        train_objective=train_split[objective],
    )
    return result


def library_runs(data, test, seed: int) -> list[dict[str, Any]]:
    """xgb_spw and hgb on the same fit/validation rows; the exact threshold of each problem on validation."""
    import pandas as pd
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier

    from dmocli import Problem, search_threshold
    from dmocli.prep.dataset import stratified_split

    frame, test_frame = data.to_pandas(), test.to_pandas()
    y, y_test = frame.pop("label").to_numpy(), test_frame.pop("label").to_numpy()
    both = pd.get_dummies(pd.concat([frame, test_frame]), dtype=np.float32)  # text columns one-hot, as dmo does
    X, X_test = both.iloc[: len(frame)].to_numpy(np.float32), both.iloc[len(frame) :].to_numpy(np.float32)
    fit, val = stratified_split(y, 0.25, seed, [0, 1])
    spw = float((y[fit] == 0).sum() / max((y[fit] == 1).sum(), 1))
    models = {
        "xgb_spw": xgb.XGBClassifier(
            n_estimators=1000,
            learning_rate=0.1,
            max_depth=6,
            early_stopping_rounds=50,
            scale_pos_weight=spw,
            eval_metric="logloss",
            tree_method="hist",
            random_state=seed,
        ),
        "hgb": HistGradientBoostingClassifier(class_weight="balanced", random_state=seed),
    }
    rows = []
    for method, model in models.items():
        started = time.perf_counter()
        if method == "xgb_spw":
            model.fit(X[fit], y[fit], eval_set=[(X[val], y[val])], verbose=False)
            score = lambda rows: model.predict(rows, output_margin=True)  # noqa: E731
        else:
            model.fit(X[fit], y[fit])
            score = model.decision_function
        seconds = time.perf_counter() - started
        val_scores, test_scores = score(X[val]), score(X_test)
        for problem, target in PROBLEMS:
            point = search_threshold(val_scores, y[val], Problem(problem, target))
            if point.feasible is False:
                rows.append(
                    {
                        "method": method,
                        "problem": problem,
                        "refused": True,
                        "test_feasible": None,
                        "test_objective": None,
                        "seconds": seconds,
                    }
                )
                continue
            result = outcome(problem, target, test_metrics(test_scores >= point.threshold, y_test))
            rows.append({"method": method, "problem": problem, **result, "seconds": seconds, "fit_seconds": seconds})
    return rows


def one_resplit(task: tuple[str, str, int, list[str], dict[str, str], str]) -> list[dict[str, Any]]:
    data_dir, name, seed, methods, params, transfer = task
    data, test = resplit(pooled(Path(data_dir), name), seed)
    rows = []
    for method in methods:
        if method not in DMO_METHODS and method not in CV_METHODS:
            continue
        for problem, target in PROBLEMS:
            rows.append(
                {
                    "set": name,
                    "seed": seed,
                    "method": method,
                    "problem": problem,
                    **dmo_run(data, test, problem, target, method, seed, params, transfer),
                }
            )
    if {"xgb_spw", "hgb"} & set(methods):
        for row in library_runs(data, test, seed):
            rows.append({"set": name, "seed": seed, **row})
    return rows


def _one_thread() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # before xgboost and torch load: one core per worker process
    import torch

    torch.set_num_threads(1)


def ero_vs_wce_on_train(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per set and problem: on how many resplits ero's train objective (feasible first) is at least wce's."""
    index = {(r["set"], r["seed"], r["problem"], r["method"]): r for r in runs}
    table = []
    for name in sorted({r["set"] for r in runs}):
        for problem, _ in PROBLEMS:
            wins, pairs = 0, 0
            for seed in sorted({r["seed"] for r in runs}):
                ero, wce = index.get((name, seed, problem, "gbdt_ero")), index.get((name, seed, problem, "gbdt_wce"))
                if not ero or not wce or ero["refused"] or wce["refused"]:
                    continue
                pairs += 1
                key = lambda r: (r["train_feasible"] is not False, r["train_objective"])  # noqa: E731
                wins += key(ero) >= key(wce)
            table.append(
                {
                    "set": name,
                    "problem": problem,
                    "pairs": pairs,
                    "ero_at_least_wce": wins,
                    "share": wins / pairs if pairs else None,
                }
            )
    return table


def paired_against(runs: list[dict[str, Any]], method: str, baseline: str) -> dict[str, Any]:
    """method against baseline on the same (set, resplit, problem) where both answered: the mean test objective
    difference and each one's test feasibility (FPOR, FROP)."""
    index = {(r["set"], r["seed"], r["problem"], r["method"]): r for r in runs}
    diffs, feasible = [], {method: [], baseline: []}
    for (name, seed, problem, which), run in index.items():
        other = index.get((name, seed, problem, baseline))
        if which != method or other is None or run["refused"] or other["refused"]:
            continue
        diffs.append(run["test_objective"] - other["test_objective"])
        if run["test_feasible"] is not None:
            feasible[method].append(run["test_feasible"])
            feasible[baseline].append(other["test_feasible"])
    return {
        "method": method,
        "baseline": baseline,
        "pairs": len(diffs),
        "mean_objective_difference": float(np.mean(diffs)) if diffs else None,
        "test_feasible_method": float(np.mean(feasible[method])) if feasible[method] else None,
        "test_feasible_baseline": float(np.mean(feasible[baseline])) if feasible[baseline] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--resplits", type=int, default=10)
    parser.add_argument("--sets", nargs="*", default=list(BINARY_SETS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cv5", action="store_true", help="also dmo's gbdt with --cv 5 on all of DATA")
    parser.add_argument("--methods", nargs="*", default=[*DMO_METHODS, "xgb_spw", "hgb"])
    parser.add_argument("--param", action="append", default=[], help="KEY=VALUE for dmo's gbdt runs (repeatable)")
    parser.add_argument("--name", default="gbdt", help="results file bench/results/NAME.json")
    parser.add_argument("--cv-transfer", default="apply", choices=("apply", "rank"))
    args = parser.parse_args()
    methods = [*args.methods, *(CV_METHODS if args.cv5 else ())]
    params = dict(item.split("=", 1) for item in args.param)
    tasks = [
        (args.data, name, seed, methods, params, args.cv_transfer)
        for name in args.sets
        for seed in range(args.resplits)
    ]
    runs: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.workers, initializer=_one_thread) as pool:
        for done, rows in enumerate(pool.map(one_resplit, tasks), 1):
            runs.extend(rows)
            print(f"{done}/{len(tasks)} resplits", file=sys.stderr, flush=True)
    for run in runs:
        run["model"], run["mode"] = run["method"], "val25"
    pooled_table = summarize(runs, ("method",))
    for row in pooled_table:  # a refusal (target out of reach on validation) counted as objective 0
        scored = [r["test_objective"] or 0.0 for r in runs if r["method"] == row["method"]]
        row["mean_objective_refused_as_0"] = float(np.mean(scored))
    by_problem = summarize(runs, ("method", "problem"))
    by_set = summarize(runs, ("set", "method"))
    seconds = []
    for method in sorted({r["method"] for r in runs}):
        fits = [r["fit_seconds"] for r in runs if r["method"] == method and r.get("fit_seconds") is not None]
        totals = [r["seconds"] for r in runs if r["method"] == method and r.get("seconds") is not None]
        seconds.append(
            {
                "method": method,
                "fits": len(fits),
                "median_fit_seconds": float(np.median(fits)),
                "median_total_seconds": float(np.median(totals)),
            }
        )
    train_wins = ero_vs_wce_on_train(runs)
    pairs = [
        paired_against(runs, method, baseline)
        for method in ("gbdt_ero", "gbdt_wce", "gbdt_ero_cv5", "gbdt_wce_cv5")
        for baseline in ("xgb_spw", "hgb", "gbdt_wce", "linear_wce")
        if method != baseline and any(r["method"] == method for r in runs)
    ]
    print("pooled over sets and problems")
    print_table(
        pooled_table, ["method", "runs", "refused", "test_feasible", "mean_objective", "mean_objective_refused_as_0"]
    )
    print("\nby problem")
    print_table(by_problem, ["method", "problem", "runs", "refused", "test_feasible", "mean_objective"])
    print("\nby set")
    print_table(by_set, ["set", "method", "runs", "refused", "test_feasible", "mean_objective"])
    print("\npaired: where both answered (same set, resplit, problem)")
    print_table(pairs, ["method", "baseline", "pairs", "mean_objective_difference", "test_feasible_method",
                        "test_feasible_baseline"])  # fmt: skip
    print("\nero >= wce on the train objective (feasible first)")
    print_table(train_wins, ["set", "problem", "pairs", "ero_at_least_wce", "share"])
    print("\nseconds per fit (solver only) and per train call (read, prepare, fit, threshold, report)")
    print_table(seconds, ["method", "fits", "median_fit_seconds", "median_total_seconds"])
    path = write_results(
        args.name,
        {
            "params": params,
            "resplits": args.resplits,
            "sets": args.sets,
            "pooled": pooled_table,
            "by_problem": by_problem,
            "by_set": by_set,
            "ero_vs_wce_train": train_wins,
            "paired": pairs,
            "seconds": seconds,
            "runs": runs,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
