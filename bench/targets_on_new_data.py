"""Operating points that hold on new data: validation split vs --cv 5 vs --cv 5 --confidence 0.95 vs scikit-learn.

Every binary set of ../shared/data is pooled (train + val + test) and re-split many times, stratified, into
80 % DATA and 20 % test. On each resplit, for FPOR 0.8, FROP 0.8 and OFBS:

- `val25`: `dmo train` with a stratified 25 % validation split of DATA (`--val-frac 0.25`), as before --cv;
- `cv5`: `dmo train --cv 5` (the default without a validation split), with `--transfer` (default: dmo's
  default `--cv-transfer`, which keeps the 5 fold models as an averaged ensemble);
- `cv5_refit`: `--cv 5 --cv-transfer apply`: one model refitted on all of DATA at the out-of-fold threshold
  (scikit-learn's refit-and-apply), against which `ensemble` was chosen;
- `cv5_conf95`: `--cv 5 --confidence 0.95` (FPOR and FROP), as a user types it: the value measured on a new
  sample as large as one fold (dmo's default `--new-rows`) is certified;
- `cv5_conf95_pop`: `--cv 5 --confidence 0.95 --new-rows inf`: the population value is certified;
- `cv5_conf95_new`: `--cv 5 --confidence 0.95 --new-rows T`, T the test split's row count: the value measured on
  a new sample of that size (what the test split is) is certified;
- `sklearn_lr`: scikit-learn LogisticRegression(class_weight="balanced") with the exact threshold searched on
  its own 5-fold out-of-fold scores (cross_val_predict), then refit on all of DATA.

A run is refused when the target is out of reach (exit 3); otherwise the test split says whether the constrained
metric still meets the target (test feasibility) and what the objective is (recall for FPOR, precision for FROP,
F1 for OFBS). The calibration columns give the mean predicted probability against the test positive rate.

    python bench/targets_on_new_data.py --resplits 20 --models linear   # writes bench/results/targets_on_new_data.json
    python bench/targets_on_new_data.py --models mlp gbdt --modes val25 cv5 cv5_refit --results-name transfer
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
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results  # noqa: E402

from dmocli import TrainOptions  # noqa: E402

DEFAULT_TRANSFER = TrainOptions.__dataclass_fields__["cv_transfer"].default  # what `dmo train --cv` does

PROBLEMS = [("fpor", 0.8), ("frop", 0.8), ("ofbs", None)]
MODES = ("val25", "cv5", "cv5_refit", "cv5_conf95", "cv5_conf95_pop", "cv5_conf95_new", "sklearn_lr")
MODELS = ("linear", "mlp", "ero_linear", "gbdt")
CERTIFIED = ("cv5_conf95", "cv5_conf95_pop", "cv5_conf95_new")
NEW_ROWS = {"cv5_conf95_pop": float("inf")}  # and cv5_conf95_new: the test split's rows; cv5_conf95: dmo's default


def pooled(data_dir: Path, name: str) -> pa.Table:
    parts = [pq.read_table(data_dir / name / f"{split}.parquet") for split in ("train", "val", "test")]
    return pa.concat_tables(parts, promote_options="permissive")


def resplit(table: pa.Table, seed: int) -> tuple[pa.Table, pa.Table]:
    """Stratified 80/20 split of the pooled rows."""
    y = table.column("label").to_numpy()
    rng = np.random.default_rng(10_000 + seed)
    test = []
    for cls in np.unique(y):
        rows = np.flatnonzero(y == cls)
        rng.shuffle(rows)
        test.append(rows[: int(round(0.2 * rows.size))])
    mask = np.zeros(y.size, dtype=bool)
    mask[np.concatenate(test)] = True
    return table.filter(pa.array(~mask)), table.filter(pa.array(mask))


def test_metrics(decided: np.ndarray, y: np.ndarray) -> dict[str, float]:
    tp = int((decided & (y == 1)).sum())
    fp = int((decided & (y == 0)).sum())
    n_pos = int((y == 1).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / n_pos if n_pos else 0.0
    f1 = 2 * tp / (n_pos + tp + fp) if n_pos + tp + fp else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def outcome(problem: str, target: float | None, metrics: dict[str, float]) -> dict[str, Any]:
    constrained = {"fpor": "precision", "frop": "recall"}.get(problem)
    objective = {"fpor": "recall", "frop": "precision", "ofbs": "f1"}[problem]
    feasible = None if constrained is None else metrics[constrained] >= target
    return {"refused": False, "test_feasible": feasible, "test_objective": metrics[objective]}


def dmo_run(
    data: pa.Table, test: pa.Table, problem: str, target: float | None, mode: str, model: str, seed: int, transfer: str
):
    from dmocli import TrainOptions, train
    from dmocli.errors import UnreachableTarget

    solver, kind = ("ero", "linear") if model == "ero_linear" else ("wce", model)
    opts = TrainOptions(
        problem=problem, target=target, solver=solver, model=kind, seed=seed, device="cpu", cv_transfer=transfer
    )
    if mode == "val25":
        opts.val_frac, opts.cv = 0.25, 0
    else:
        opts.cv = 5
        opts.cv_transfer = "apply" if mode == "cv5_refit" else transfer
        opts.confidence = 0.95 if mode in CERTIFIED else None
        opts.new_rows = test.num_rows if mode == "cv5_conf95_new" else NEW_ROWS.get(mode)
    try:
        trained, _ = train(data, opts)
    except UnreachableTarget:
        return {"refused": True, "test_feasible": None, "test_objective": None}
    logits, _ = trained.logits(test)
    y = test.column("label").to_numpy()
    result = outcome(problem, target, test_metrics(trained.decide(logits), y))
    result["mean_probability"] = float(np.mean(trained.probability(logits)))  # calibrated, as predict writes it
    result["mean_raw_sigmoid"] = float(np.mean(1.0 / (1.0 + np.exp(-logits.astype(np.float64)))))  # before 0.2.0
    return result


def sklearn_runs(data: pa.Table, test: pa.Table, seed: int) -> dict[str, dict[str, Any]]:
    """One LogisticRegression(class_weight='balanced') per resplit; the exact threshold of each problem on its
    5-fold out-of-fold decision scores."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from dmocli import Problem, search_threshold

    frame, test_frame = data.to_pandas(), test.to_pandas()
    y, y_test = frame.pop("label").to_numpy(), test_frame.pop("label").to_numpy()
    text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    numbers = [c for c in frame.columns if c not in text]
    prep = ColumnTransformer(
        [("num", StandardScaler(), numbers), ("cat", OneHotEncoder(handle_unknown="ignore"), text)]
    )
    pipeline = make_pipeline(prep, LogisticRegression(class_weight="balanced", max_iter=2000))
    folds = StratifiedKFold(5, shuffle=True, random_state=seed)
    oof = cross_val_predict(pipeline, frame, y, cv=folds, method="decision_function")
    pipeline.fit(frame, y)
    scores = pipeline.decision_function(test_frame)
    out = {}
    for problem, target in PROBLEMS:
        point = search_threshold(oof, y, Problem(problem, target))
        if point.feasible is False:
            out[problem] = {"refused": True, "test_feasible": None, "test_objective": None}
            continue
        out[problem] = outcome(problem, target, test_metrics(scores >= point.threshold, y_test))
        out[problem]["mean_probability"] = float(np.mean(pipeline.predict_proba(test_frame)[:, 1]))
    return out


def one_resplit(task: tuple[str, str, int, tuple[str, ...], str, tuple[str, ...]]) -> list[dict[str, Any]]:
    data_dir, name, seed, models, transfer, modes = task
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    data, test = resplit(pooled(Path(data_dir), name), seed)
    positive_rate = float(np.mean(test.column("label").to_numpy() == 1))
    rows = []
    for model in models:
        for problem, target in PROBLEMS:
            for mode in ("val25", "cv5", "cv5_refit", *CERTIFIED):
                if mode not in modes or mode in CERTIFIED and problem == "ofbs":
                    continue
                started = time.perf_counter()
                result = dmo_run(data, test, problem, target, mode, model, seed, transfer)
                rows.append(
                    {
                        "set": name,
                        "seed": seed,
                        "model": model,
                        "problem": problem,
                        "mode": mode,
                        "seconds": time.perf_counter() - started,
                        "test_positive_rate": positive_rate,
                        **result,
                    }
                )
    for problem, result in (sklearn_runs(data, test, seed) if "sklearn_lr" in modes else {}).items():
        rows.append(
            {
                "set": name,
                "seed": seed,
                "model": "sklearn",
                "problem": problem,
                "mode": "sklearn_lr",
                "test_positive_rate": positive_rate,
                **result,
            }
        )
    return rows


def summarize(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(tuple(run[k] for k in keys), []).append(run)
    table = []
    for key, members in sorted(groups.items()):
        answered = [m for m in members if not m["refused"]]
        constrained = [m for m in answered if m["test_feasible"] is not None]
        objectives = [m["test_objective"] for m in answered]
        table.append(
            {
                **dict(zip(keys, key)),
                "runs": len(members),
                "refused": len(members) - len(answered),
                "test_feasible": (sum(m["test_feasible"] for m in constrained) / len(constrained))
                if constrained
                else None,
                "mean_objective": float(np.mean(objectives)) if objectives else None,
            }
        )
    return table


def paired(runs: list[dict[str, Any]], model: str, a: str, b: str) -> dict[str, Any]:
    """Mode a against mode b on the same (set, seed, problem) where both answered: mean objective difference (with
    its standard error over the pairs) and test-feasibility of each, pooled over sets and problems."""
    index = {(r["set"], r["seed"], r["problem"], r["mode"]): r for r in runs if r["model"] in (model, "sklearn")}
    diffs, feas = [], {a: [], b: []}
    for (name, seed, problem, mode), run in index.items():
        if mode != a:
            continue
        other = index.get((name, seed, problem, b))
        if other is None or run["refused"] or other["refused"]:
            continue
        diffs.append(run["test_objective"] - other["test_objective"])
        if run["test_feasible"] is not None:
            feas[a].append(run["test_feasible"])
            feas[b].append(other["test_feasible"])
    return {
        "model": model,
        "a": a,
        "b": b,
        "pairs": len(diffs),
        "mean_objective_a_minus_b": float(np.mean(diffs)) if diffs else None,
        "standard_error": float(np.std(diffs, ddof=1) / np.sqrt(len(diffs))) if len(diffs) > 1 else None,
        "test_feasible_a": float(np.mean(feas[a])) if feas[a] else None,
        "test_feasible_b": float(np.mean(feas[b])) if feas[b] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--resplits", type=int, default=20)
    parser.add_argument("--models", nargs="+", default=["linear"], choices=MODELS)
    parser.add_argument("--sets", nargs="+", default=list(BINARY_SETS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--transfer",
        default=DEFAULT_TRANSFER,
        choices=["ensemble", "apply", "rank"],
        help="--cv-transfer of the cv5 runs",
    )
    parser.add_argument("--results-name", default="targets_on_new_data")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="the modes to run")
    args = parser.parse_args()
    started = time.perf_counter()
    tasks = [
        (str(args.data_dir), name, seed, tuple(args.models), args.transfer, tuple(args.modes))
        for name in args.sets
        for seed in range(args.resplits)
    ]
    runs: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for done, rows in enumerate(pool.map(one_resplit, tasks), 1):
            runs += rows
            print(f"[{done}/{len(tasks)}] {rows[0]['set']} seed {rows[0]['seed']}", file=sys.stderr, flush=True)
    per_set = summarize(runs, ("model", "problem", "mode", "set"))
    pooled_table = summarize(runs, ("model", "mode"))
    constrained = summarize([r for r in runs if r["problem"] != "ofbs"], ("model", "mode"))
    comparisons = [
        paired(runs, model, a, b)
        for model in args.models
        for a, b in (
            ("cv5", "val25"),
            ("cv5_refit", "val25"),
            ("cv5", "cv5_refit"),
            ("cv5_conf95", "cv5"),
            ("cv5_conf95_pop", "cv5"),
            ("cv5_conf95_new", "cv5"),
            ("cv5", "sklearn_lr"),
        )
    ]
    calibration = summarize_calibration(runs)
    print_table(per_set, ["model", "problem", "mode", "set", "runs", "refused", "test_feasible", "mean_objective"])
    print()
    print("pooled over sets and problems")
    print_table(pooled_table, ["model", "mode", "runs", "refused", "test_feasible", "mean_objective"])
    print()
    print("pooled over sets, FPOR and FROP only")
    print_table(constrained, ["model", "mode", "runs", "refused", "test_feasible", "mean_objective"])
    print()
    print_table(
        comparisons,
        ["model", "a", "b", "pairs", "mean_objective_a_minus_b", "standard_error"]
        + ["test_feasible_a", "test_feasible_b"],
    )
    print()
    print_table(
        calibration, ["model", "set", "mean_probability", "test_positive_rate", "relative_gap", "raw_sigmoid_gap"]
    )
    path = write_results(
        args.results_name,
        {
            "resplits": args.resplits,
            "models": args.models,
            "sets": args.sets,
            "transfer": args.transfer,
            "seconds": time.perf_counter() - started,
            "per_set": per_set,
            "pooled": pooled_table,
            "pooled_constrained": constrained,
            "comparisons": comparisons,
            "calibration": calibration,
            "runs": runs,
        },
    )
    print(f"\nwrote {path} ({time.perf_counter() - started:.0f} s)")


def summarize_calibration(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean predicted probability against the test positive rate, per set (OFBS cv5 runs of dmo; sklearn's)."""
    rows = []
    for model in sorted({r["model"] for r in runs}):
        for name in sorted({r["set"] for r in runs}):
            picked = [
                r
                for r in runs
                if r["model"] == model
                and r["set"] == name
                and r["problem"] == "ofbs"
                and r["mode"] in ("cv5", "sklearn_lr")
                and r.get("mean_probability") is not None
            ]
            if not picked:
                continue
            mean_p = float(np.mean([r["mean_probability"] for r in picked]))
            raw = [r["mean_raw_sigmoid"] for r in picked if "mean_raw_sigmoid" in r]
            rate = float(np.mean([r["test_positive_rate"] for r in picked]))
            rows.append(
                {
                    "model": model,
                    "set": name,
                    "mean_probability": mean_p,
                    "test_positive_rate": rate,
                    "relative_gap": mean_p / rate - 1.0,
                    "raw_sigmoid_gap": float(np.mean(raw)) / rate - 1.0 if raw else None,
                }
            )
    return rows


if __name__ == "__main__":
    main()
