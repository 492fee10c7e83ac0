"""Boosted trees at scale: `dmo train --model gbdt` on a 2,000,000 x 50 parquet set against XGBoost trained
directly from a numpy array, and on a 2-worker local Dask cluster (XGBoost's Dask interface).

Every fit runs the same 100 rounds (no early stopping, so the work is equal) of depth-6 histogram trees with
class weights; quality is judged on a separate 200,000-row test set (average precision, and the test precision
and recall at the FPOR 0.8 threshold each dmo run chose). Wall time and peak RSS are those of a fresh process.

    python bench/gbdt_scale.py                  # writes bench/results/gbdt_scale.json
    python bench/gbdt_scale.py --device cuda    # the one-process fit on the GPU as well
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_synthetic_data_options, make_data, print_table, synthetic_data, timed, write_results  # noqa: E402

ROUNDS = 100
DIRECT = (
    """
import sys, time, numpy as np, pyarrow.parquet as pq, xgboost as xgb
table = pq.read_table(sys.argv[1])
X = np.column_stack([table.column(f"x{j}").to_numpy() for j in range(int(sys.argv[2]))]).astype(np.float32)
y = table.column("label").to_numpy()
del table
w = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum()))).astype(np.float32)
started = time.perf_counter()
d = xgb.QuantileDMatrix(X, label=y, weight=w, max_bin=256)
xgb.train({"objective": "binary:logistic", "tree_method": "hist", "max_depth": 6, "eta": 0.1,
           "device": sys.argv[3]}, d, num_boost_round=%d)
print("fit_seconds", time.perf_counter() - started)
"""
    % ROUNDS
)


def direct(data: Path, cols: int, device: str) -> dict:
    """XGBoost from a numpy array (the parquet read into numpy first, outside the timed fit)."""
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started = time.perf_counter()
    proc = subprocess.run([*timer, sys.executable, "-c", DIRECT, str(data), str(cols), device], capture_output=True,
                          text=True)  # fmt: skip
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    fit = float(re.search(r"fit_seconds ([\d.]+)", proc.stdout).group(1))
    return {"wall_seconds": time.perf_counter() - started, "fit_seconds": fit,
            "peak_rss_mib": int(rss.group(1)) / 1024 if rss else None}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_synthetic_data_options(parser)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-dask", action="store_true")
    args = parser.parse_args()
    args.scratch = Path(str(args.scratch) + "-gbdt")
    data, scratch = synthetic_data(args)
    test = scratch / "test"
    make_data(test, 200_000, args.cols, 1)
    common = ["--model", "gbdt", "--problem", "fpor", "--target", "0.8", "--drop", "id",
              "--param", f"rounds={ROUNDS}", "--param", "early-stopping=0"]  # fmt: skip
    runs = {}
    runs["xgboost_numpy"] = direct(data, args.cols, "cpu")
    variants = {
        "dmo_local": ["--cv", "0", "--val-frac", "0.1", "--device", "cpu"],
        "dmo_dask_2_workers": ["--engine", "dask", "--device", "cpu"],
    }
    if args.skip_dask:
        del variants["dmo_dask_2_workers"]
    if args.device == "cuda":
        runs["xgboost_numpy_cuda"] = direct(data, args.cols, "cuda")
        variants["dmo_local_cuda"] = ["--cv", "0", "--val-frac", "0.1", "--device", "cuda"]
    for name, extra in variants.items():
        model, report = scratch / f"{name}.safetensors", scratch / f"{name}.json"
        args_ = ["train", str(data), *common, *extra, "-o", str(model), "--report", str(report)]
        wall, rss = timed(args_)
        trained = json.loads(report.read_text())
        evaluated = scratch / f"{name}-test.json"
        timed(["evaluate", str(model), str(test), "--report", str(evaluated)])
        split = json.loads(evaluated.read_text())["splits"]["data"]
        runs[name] = {"wall_seconds": wall, "fit_seconds": trained["fit_seconds"], "peak_rss_mib": rss,
                      "test_average_precision": split["average_precision"], "test_precision": split["precision"],
                      "test_recall": split["recall"]}  # fmt: skip
    rows = [
        {"run": name, **values, "rows_per_second": args.rows / values["fit_seconds"]} for name, values in runs.items()
    ]
    print_table(rows, ["run", "wall_seconds", "fit_seconds", "rows_per_second", "peak_rss_mib",
                       "test_average_precision", "test_precision", "test_recall"])  # fmt: skip
    print(
        f"\nwrote {write_results('gbdt_scale', {'rows': args.rows, 'cols': args.cols, 'rounds': ROUNDS, 'runs': rows})}"
    )


if __name__ == "__main__":
    main()
