"""Benchmark: Adsh vs FixMatch vs supervised-only training on long-tailed, partly labeled optdigits.

Built like the paper's long-tailed sets (Guo & Li 2022, section 5.1): for
class rank k = 1..K (head first), N_k = N_1 gamma^(-(k-1)/(K-1)) labeled rows
and M_k = M_1 gamma^(-(k-1)/(K-1)) unlabeled rows with M_1 = 4 N_1 ("same"
profile) or M_k = M_1 gamma^(-(K-k)/(K-1)) ("reversed": the unlabeled head
is the labeled tail), all drawn without replacement from the train split
(about 330 rows per class; at least one row per class). The class order is
a random permutation of the digits per seed, so the majority class is rarely
digit 0. The test split stays balanced. Reported per setting, averaged over
seeds: balanced accuracy on test, mean recall of the three rarest labeled
classes, wall seconds per training run; then, per gamma and per family of
methods sharing one labeled loss (plain CE: ce/fixmatch/adsh; class-weighted:
wce/fixmatch_w/adsh_w), whether adsh > fixmatch > supervised and adsh's
rare-3 recall > fixmatch's on average.

    python bench/adsh.py [--data-dir ../shared/data] [--seeds 0 1 2] [--epochs 20] [--steps 50]
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dmocli import TrainOptions, train
from dmocli.pipelines.apply import evaluate

REPO = Path(__file__).resolve().parent.parent
# name -> (solver, extra params). Two fair families, each with one labeled loss for all three methods:
# plain CE (the paper's "Supervised" row and docs/algorithms.md#adsh L_s) and inverse-frequency class weighting
# (wce, the supervised baseline users compare against; fixmatch/adsh with balanced=true weight L_s and L_u
# the same way).
# sup/sup_w (the FixMatch loop with tau = 1: no unlabeled row is used) are diagnostics, not run by default.
METHODS = {
    "ce": ("wce", {"balanced": "false"}),
    "fixmatch": ("fixmatch", {}),
    "adsh": ("adsh", {}),
    "wce": ("wce", {}),
    "fixmatch_w": ("fixmatch", {"balanced": "true"}),
    "adsh_w": ("adsh", {"balanced": "true"}),
    "sup": ("fixmatch", {"tau": "1.0"}),
    "sup_w": ("fixmatch", {"tau": "1.0", "balanced": "true"}),
}
DEFAULT_METHODS = ["ce", "fixmatch", "adsh", "wce", "fixmatch_w", "adsh_w"]
# (supervised, fixmatch, adsh) compared within a family for the targets
FAMILIES = {"plain CE": ("ce", "fixmatch", "adsh"), "class-weighted": ("wce", "fixmatch_w", "adsh_w")}


def profile(first: float, gamma: float, n_classes: int, reverse: bool) -> np.ndarray:
    """Rows per class rank: first * gamma^(-(k-1)/(K-1)), reversed if asked, at least 1."""
    exponent = np.arange(n_classes) / (n_classes - 1)
    counts = np.maximum(1, np.round(first * gamma**-exponent)).astype(int)
    return counts[::-1].copy() if reverse else counts


def build(
    train: pd.DataFrame, seed: int, gamma: float, n1: int, reverse: bool
) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """(partly labeled train table, its truth table, class order head -> tail)."""
    rng = np.random.default_rng(seed)
    classes = sorted(train["label"].unique())
    order = list(rng.permutation(classes))
    n_lab = profile(n1, gamma, len(classes), False)
    n_unl = profile(4 * n1, gamma, len(classes), reverse)
    lab_parts, unl_parts = [], []
    for cls, a, b in zip(order, n_lab, n_unl):
        rows = rng.permutation(np.flatnonzero(train["label"].to_numpy() == cls))
        if a + b > rows.size:
            raise SystemExit(f"class {cls}: {a}+{b} rows asked, {rows.size} available")
        lab_parts.append(rows[:a])
        unl_parts.append(rows[a : a + b])
    lab, unl = np.concatenate(lab_parts), np.concatenate(unl_parts)
    rows = rng.permutation(np.concatenate([lab, unl]))
    table = train.iloc[rows].reset_index(drop=True)
    truth = table[["label"]].copy()
    table["label"] = table["label"].astype(object).where(np.isin(rows, lab), None)
    return table, truth, order


def run(
    method: str,
    data: Path,
    truth: Path,
    test: Path,
    out: Path,
    seed: int,
    model: str,
    epochs: int,
    steps: int,
    extra: dict[str, str],
) -> dict:
    solver, params = METHODS[method]
    semi = solver != "wce"
    if semi:
        params = {**params, "epochs": str(epochs), "steps_per_epoch": str(steps), **extra}
    opts = TrainOptions(
        solver=solver,
        model=model,
        seed=seed,
        params=params,
        drop_unlabeled=not semi,
        unlabeled_truth=truth if semi else None,
        device="cpu",
    )
    started = time.perf_counter()
    _, report = train(data, opts, output=out)
    wall = time.perf_counter() - started
    split = evaluate(out, test)["splits"]["data"]
    result = {
        "balanced_accuracy": split["balanced_accuracy"],
        "recall": split["per_class"]["recall"],
        "classes": split["classes"],
        "wall_seconds": wall,
    }
    if semi:
        trace = report["solver_trace"]
        result["final_thresholds"] = trace["thresholds"][-1]
        result["final_pseudo_label_quality"] = trace["pseudo_label_quality"][-1]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--gammas", type=float, nargs="+", default=[10, 50, 100])
    parser.add_argument("--n1", type=int, nargs="+", default=[30, 60])
    parser.add_argument("--profiles", nargs="+", default=["same", "reversed"])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(METHODS))
    parser.add_argument("--model", default="linear")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=50, help="steps per epoch")
    parser.add_argument("--param", action="append", default=[], help="KEY=VALUE for fixmatch and adsh (repeatable)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: best on a shared machine)")
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "adsh.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    source = args.data_dir / "optdigits"
    train_frame = pd.read_parquet(source / "train.parquet")
    test = source / "test.parquet"
    records = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for gamma, n1, prof, seed in itertools.product(args.gammas, args.n1, args.profiles, args.seeds):
            table, truth, order = build(train_frame, seed, gamma, n1, prof == "reversed")
            data, truth_path = tmp / "train.parquet", tmp / "truth.parquet"
            table.to_parquet(data)
            truth.to_parquet(truth_path)
            rare = order[-3:]
            for method in args.methods:
                res = run(
                    method,
                    data,
                    truth_path,
                    test,
                    tmp / f"{method}.safetensors",
                    seed,
                    args.model,
                    args.epochs,
                    args.steps,
                    dict(item.split("=", 1) for item in args.param),
                )
                res["rare3_recall"] = float(np.mean([res["recall"][res["classes"].index(c)] for c in rare]))
                records.append(
                    {
                        "gamma": gamma,
                        "n1": n1,
                        "profile": prof,
                        "seed": seed,
                        "method": method,
                        "n_labeled": int(table["label"].notna().sum()),
                        "n_unlabeled": int(table["label"].isna().sum()),
                        "class_order": [int(c) for c in order],
                        **res,
                    }
                )
                print(
                    f"gamma {gamma:g} N1 {n1} {prof:8s} seed {seed} {method:8s} bal.acc {res['balanced_accuracy']:.4f} "
                    f"rare3 {res['rare3_recall']:.4f} {res['wall_seconds']:.1f}s",
                    flush=True,
                )
    summary = summarize(records, args.methods)
    print_table(summary, args.methods)
    targets = check_targets(summary, args.methods)
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


def summarize(records: list[dict], methods: list[str]) -> list[dict]:
    frame = pd.DataFrame(
        [
            {
                k: r[k]
                for k in (
                    "gamma",
                    "n1",
                    "profile",
                    "seed",
                    "method",
                    "balanced_accuracy",
                    "rare3_recall",
                    "wall_seconds",
                )
            }
            for r in records
        ]
    )
    rows = []
    for (gamma, n1, prof), group in frame.groupby(["gamma", "n1", "profile"], sort=True):
        row = {"gamma": gamma, "n1": n1, "profile": prof}
        for method in methods:
            g = group[group["method"] == method]
            row[f"{method}_bal_acc"] = float(g["balanced_accuracy"].mean())
            row[f"{method}_bal_acc_std"] = float(g["balanced_accuracy"].std(ddof=0))
            row[f"{method}_rare3"] = float(g["rare3_recall"].mean())
            row[f"{method}_wall_s"] = float(g["wall_seconds"].mean())
        rows.append(row)
    return rows


def print_table(rows: list[dict], methods: list[str]) -> None:
    """Means over seeds: balanced accuracy | rare-3 recall | wall seconds, one column per method."""
    names = " ".join(f"{m:>8}" for m in methods)
    head = f"{'gamma':>5} {'N1':>3} {'profile':8} | bal.acc {names} | rare3 {names} | wall s {names}"
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = [
            " ".join(f"{r[f'{m}_{key}']:>8.{digits}f}" for m in methods)
            for key, digits in (("bal_acc", 4), ("rare3", 4), ("wall_s", 1))
        ]
        print(
            f"{r['gamma']:>5g} {r['n1']:>3} {r['profile']:8} | {'':7} {cells[0]} | "
            f"{'':5} {cells[1]} | {'':6} {cells[2]}"
        )


def check_targets(rows: list[dict], methods: list[str]) -> list[dict]:
    """Per gamma and family, means over N1, profiles and seeds: is adsh > fixmatch > supervised, and adsh's
    rare-3 recall > fixmatch's?"""
    out = []
    for gamma in sorted({r["gamma"] for r in rows}):
        group = [r for r in rows if r["gamma"] == gamma]
        for family, (sup, fix, ads) in FAMILIES.items():
            if not {sup, fix, ads} <= set(methods):
                continue
            mean = {m: float(np.mean([r[f"{m}_bal_acc"] for r in group])) for m in (sup, fix, ads)}
            rare = {m: float(np.mean([r[f"{m}_rare3"] for r in group])) for m in (fix, ads)}
            item = {
                "gamma": gamma,
                "family": family,
                "bal_acc": mean,
                "rare3": rare,
                "adsh>fixmatch>supervised": mean[ads] > mean[fix] > mean[sup],
                "rare3 adsh>fixmatch": rare[ads] > rare[fix],
                "adsh>fixmatch settings": sum(r[f"{ads}_bal_acc"] > r[f"{fix}_bal_acc"] for r in group),
                "fixmatch>supervised settings": sum(r[f"{fix}_bal_acc"] > r[f"{sup}_bal_acc"] for r in group),
                "settings": len(group),
            }
            out.append(item)
            print(
                f"gamma {gamma:g} {family:15s} bal.acc {sup} {mean[sup]:.4f} {fix} {mean[fix]:.4f} "
                f"{ads} {mean[ads]:.4f} | rare3 {fix} {rare[fix]:.4f} {ads} {rare[ads]:.4f} | "
                f"adsh>fixmatch>sup {item['adsh>fixmatch>supervised']} "
                f"(settings: adsh>fixmatch {item['adsh>fixmatch settings']}/{len(group)}, "
                f"fixmatch>sup {item['fixmatch>supervised settings']}/{len(group)}) rare3 {item['rare3 adsh>fixmatch']}"
            )
    return out


if __name__ == "__main__":
    main()
