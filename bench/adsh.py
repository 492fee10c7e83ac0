"""Benchmark: do adsh and fixmatch, with their defaults, beat supervised wce on the same labeled rows?

Issue 22's question, on three multi-class sets made long-tailed: optdigits
and letter (../shared/data) and `synthetic11`, generated here
(scikit-learn's make_classification: 11 classes, 20 features of which 10
informative, 2 clusters per class, class_sep 1.5, seed 0; 400 train and 100
test rows per class), since the shared satimage is binary.

Per set, imbalance ratio gamma and labeled fraction f: class rank k = 1..K
(a random class order per seed, so the head is not the first class) keeps
N_k = N_1 gamma^(-(k-1)/(K-1)) of its train rows (N_1: the smallest class
size of the train split; at least 2 rows), and a stratified share f of them
(at least one row per class) keeps its label; the others are unlabeled, the
same long-tailed profile (the issue's setting). The test split stays
balanced. Methods, all with their defaults:

- wce: `--solver wce --drop-unlabeled` (class-weighted, the same labeled rows);
- adsh, fixmatch: `--solver adsh|fixmatch` (the safety net on: fallback=true);
- adsh_raw: adsh with `--param fallback=false` (what the safety net guards against).

Per setting (set, gamma, f), means over seeds: balanced accuracy on test,
recall of the rarest class, wall seconds per fit; then the issue's targets.

    python bench/adsh.py [--data-dir ../shared/data] [--seeds 0 1 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dmocli import TrainOptions, train
from dmocli.use.evaluate import evaluate

REPO = Path(__file__).resolve().parent.parent
METHODS = {
    "wce": ("wce", {}),
    "adsh": ("adsh", {}),
    "adsh_raw": ("adsh", {"fallback": "false"}),
    "fixmatch": ("fixmatch", {}),
}
SETS = ("optdigits", "letter", "synthetic11")


def synthetic11() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test) of the generated 11-class set (see the module docstring)."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=11 * 500,
        n_features=20,
        n_informative=10,
        n_redundant=4,
        n_classes=11,
        n_clusters_per_class=2,
        class_sep=1.5,
        random_state=0,
    )
    frame = pd.DataFrame(X.astype(np.float32), columns=[f"x{i}" for i in range(X.shape[1])])
    frame["label"] = y
    test = np.zeros(y.size, dtype=bool)
    for k in range(11):
        test[np.flatnonzero(y == k)[:100]] = True
    return frame[~test].reset_index(drop=True), frame[test].reset_index(drop=True)


def load(name: str, data_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    if name == "synthetic11":
        return synthetic11()
    return pd.read_parquet(data_dir / name / "train.parquet"), pd.read_parquet(data_dir / name / "test.parquet")


def long_tailed(train: pd.DataFrame, seed: int, gamma: float, frac: float) -> tuple[pd.DataFrame, list]:
    """(partly labeled long-tailed table, class order head -> tail)."""
    rng = np.random.default_rng(seed)
    labels = train["label"].to_numpy()
    classes = sorted(np.unique(labels))
    order = list(rng.permutation(classes))
    n1 = min(int((labels == c).sum()) for c in classes)
    sizes = np.maximum(2, np.round(n1 * gamma ** -(np.arange(len(classes)) / (len(classes) - 1)))).astype(int)
    kept, labeled = [], []
    for cls, size in zip(order, sizes):
        rows = rng.permutation(np.flatnonzero(labels == cls))[:size]
        kept.append(rows)
        labeled.append(rows[: max(1, int(round(frac * size)))])
    rows = rng.permutation(np.concatenate(kept))
    table = train.iloc[rows].reset_index(drop=True)
    table["label"] = table["label"].astype(object).where(np.isin(rows, np.concatenate(labeled)), None)
    return table, order


def one_setting(args: tuple) -> list[dict]:
    """Every method on one (set, gamma, fraction, seed); run in a worker process with one torch thread."""
    name, gamma, frac, seed, data_dir, methods = args
    torch.set_num_threads(1)
    train_frame, test_frame = load(name, data_dir)
    table, order = long_tailed(train_frame, seed, gamma, frac)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        data, test, model = Path(tmp) / "train.parquet", Path(tmp) / "test.parquet", Path(tmp) / "m.safetensors"
        table.to_parquet(data)
        test_frame.to_parquet(test)
        for method in methods:
            solver, params = METHODS[method]
            opts = TrainOptions(solver=solver, seed=seed, params=params, drop_unlabeled=solver == "wce", device="cpu")
            started = time.perf_counter()
            _, report = train(data, opts, output=model)
            wall = time.perf_counter() - started
            split = evaluate(model, test)["splits"]["data"]
            rarest = split["classes"].index(order[-1])
            verdict = report["solver_trace"].get("fallback")
            out.append(
                {
                    "set": name,
                    "gamma": gamma,
                    "labeled_frac": frac,
                    "seed": seed,
                    "method": method,
                    "n_labeled": int(table["label"].notna().sum()),
                    "n_unlabeled": int(table["label"].isna().sum()),
                    "balanced_accuracy": split["balanced_accuracy"],
                    "rarest_recall": split["per_class"]["recall"][rarest],
                    "wall_seconds": wall,
                    "fallback": verdict,
                }
            )
            print(
                f"{name:11s} gamma {gamma:>3g} f {frac:.2f} seed {seed} {method:8s} "
                f"bal.acc {split['balanced_accuracy']:.4f} rarest {out[-1]['rarest_recall']:.3f} {wall:.1f}s"
                + (f" saved {verdict['saved']}" if verdict else ""),
                flush=True,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--gammas", type=float, nargs="+", default=[10, 50, 100])
    parser.add_argument("--fracs", type=float, nargs="+", default=[0.05, 0.2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (one torch thread each)")
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "adsh.json")
    args = parser.parse_args()
    started = time.perf_counter()
    grid = [
        (name, gamma, frac, seed, args.data_dir, args.methods)
        for name, gamma, frac, seed in itertools.product(args.sets, args.gammas, args.fracs, args.seeds)
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        records = [r for rows in pool.map(one_setting, grid) for r in rows]
    summary, targets = summarize(records, args.methods)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                "device": "cpu",
                "torch": torch.__version__,
                "total_wall_seconds": time.perf_counter() - started,
                "summary": summary,
                "targets": targets,
                "runs": records,
            },
            indent=2,
        )
    )
    print(f"wrote {args.output} ({time.perf_counter() - started:.0f} s)")


def summarize(records: list[dict], methods: list[str]) -> tuple[list[dict], dict]:
    """Per setting, means over seeds (printed as a table), and the issue's targets over all settings."""
    frame = pd.DataFrame(records)
    keys = ["set", "gamma", "labeled_frac"]
    means = frame.groupby([*keys, "method"])[["balanced_accuracy", "rarest_recall", "wall_seconds"]].mean()
    rows = []
    for setting, _ in frame.groupby(keys, sort=True):
        row = dict(zip(keys, setting))
        for method in methods:
            for metric, value in means.loc[(*setting, method)].items():
                row[f"{method}_{metric}"] = float(value)
        rows.append(row)
    names = " ".join(f"{m:>9}" for m in methods)
    print(f"{'set':11} {'gamma':>5} {'f':>4} | bal.acc {names} | rarest {names} | wall s {names}")
    for r in rows:
        cells = [
            " ".join(f"{r[f'{m}_{key}']:>9.{digits}f}" for m in methods)
            for key, digits in (("balanced_accuracy", 4), ("rarest_recall", 3), ("wall_seconds", 1))
        ]
        head = f"{r['set']:11} {r['gamma']:>5g} {r['labeled_frac']:>4g}"
        print(f"{head} | {'':7} {cells[0]} | {'':6} {cells[1]} | {'':6} {cells[2]}")
    targets: dict = {"settings": len(rows)}
    wce = np.array([r["wce_balanced_accuracy"] for r in rows])
    for method in [m for m in methods if m != "wce"]:
        acc = np.array([r[f"{method}_balanced_accuracy"] for r in rows])
        targets[method] = {
            "mean_balanced_accuracy": float(acc.mean()),
            "share_of_settings_>=_wce": float(np.mean(acc >= wce - 1e-12)),
            "worst_difference_to_wce": float((acc - wce).min()),
            "mean_difference_to_wce": float((acc - wce).mean()),
            "mean_rarest_recall": float(np.mean([r[f"{method}_rarest_recall"] for r in rows])),
            "wall_seconds_per_fit": float(np.mean([r[f"{method}_wall_seconds"] for r in rows])),
        }
    targets["wce"] = {
        "mean_balanced_accuracy": float(wce.mean()),
        "mean_rarest_recall": float(np.mean([r["wce_rarest_recall"] for r in rows])),
        "wall_seconds_per_fit": float(np.mean([r["wce_wall_seconds"] for r in rows])),
    }
    if "adsh" in methods:
        runs = frame[frame["method"] == "adsh"]
        targets["adsh"]["saved_semi_supervised_share"] = float(
            np.mean([v is not None and v["saved"] == "adsh" for v in runs["fallback"]])
        )
    print(json.dumps(targets, indent=2))
    return rows, targets


if __name__ == "__main__":
    main()
