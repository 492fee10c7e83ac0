"""wce + exact threshold adjustment on every binary benchmark set: the baseline table.

For each set in ../shared/data (or --data-dir), train `wce` (linear and MLP)
for FROP 0.8 with the threshold fitted on train (as the ERO paper's "TA") and
on the validation split, and report train/test precision, recall and F1.

Usage: python bench/wce_baseline.py [--data-dir DIR] [--models linear mlp] [--seeds 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results

from dmocli import TrainOptions, train
from dmocli.use.evaluate import evaluate


def run_one(data_dir: Path, name: str, model: str, ta_split: str, seed: int, workdir: Path) -> dict:
    folder = data_dir / name
    out = workdir / f"{name}-{model}-{ta_split}-{seed}.safetensors"
    opts = TrainOptions(
        problem="frop",
        target=0.8,
        solver="wce",
        model=model,
        seed=seed,
        device="cpu",
        val=folder / "val.parquet" if ta_split == "val" else None,
        allow_infeasible=True,
    )
    started = time.perf_counter()
    _, report = train(folder / "train.parquet", opts, output=out)
    seconds = time.perf_counter() - started
    test = evaluate(out, folder / "test.parquet")["splits"]["data"]
    tr = report["splits"]["train"]
    return {
        "set": name,
        "model": model,
        "TA on": ta_split,
        "seed": seed,
        "train P": tr["precision"],
        "train R": tr["recall"],
        "train F1": tr["f1"],
        "train feas": tr["feasible"],
        "test P": test["precision"],
        "test R": test["recall"],
        "test F1": test["f1"],
        "test feas": test["feasible"],
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", nargs="+", default=list(BINARY_SETS))
    parser.add_argument("--models", nargs="+", default=["linear", "mlp"])
    parser.add_argument("--ta", nargs="+", default=["train", "val"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets:
            for model in args.models:
                for ta in args.ta:
                    for seed in args.seeds:
                        rows.append(run_one(args.data_dir, name, model, ta, seed, Path(tmp)))
    print("wce + exact threshold adjustment, FROP (recall >= 0.8, max precision):")
    print_table(rows, list(rows[0]))
    print(f"\nwrote {write_results('wce_baseline', {'problem': 'frop', 'target': 0.8, 'rows': rows})}")


if __name__ == "__main__":
    main()
