"""`dmo train` in one process against `torchrun --nproc-per-node N dmo train` (wce and ero, CPU, gloo).

    python bench/distributed.py [--rows 2000000] [--cols 50] [--files 8] [--processes 2] [--mlp-epochs 3]

Writes rows x cols float32 features (a linear binary label, ~20 % positives) as `files` parquet files, trains
on all but the last file (100,000 of its rows are the validation split), and times each training as a user \
runs it (the whole command, under /usr/bin/time for the peak RSS of the
largest process): wce's linear model (the exact L-BFGS optimum), wce's MLP (Adam, --mlp-epochs epochs,
validation on 100,000 rows) and ERO's linear model (fast preset, mini-batch at this size, same validation),
each in one process and on N processes. It checks that the linear models are
the same optimum (largest weight difference) and reports the fit seconds from the report. On one machine
the processes share its cores, so what this measures is the cost of the protocol (every process's
streaming preprocessing pass, the collectives) and the memory each process holds (its share of the rows);
the speed-up of N machines is not measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_synthetic_data_options, print_table, synthetic_data, timed, write_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_synthetic_data_options(parser)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--mlp-epochs", type=int, default=3)
    args = parser.parse_args()
    data, scratch = synthetic_data(args)
    files = sorted(data.glob("*.parquet"))
    val = scratch / "val.parquet"  # the last file is held out: 100,000 of its rows validate
    pq.write_table(pq.ParquetFile(files[-1]).read().slice(0, 100_000), val)
    train = scratch / "train_files"
    train.mkdir(exist_ok=True)
    for old in train.glob("*.parquet"):
        old.unlink()
    for name in files[:-1]:
        (train / name.name).symlink_to(name)
    rows_trained = sum(pq.ParquetFile(name).metadata.num_rows for name in files[:-1])
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={args.processes}",
        "--no-python",
    ]

    rows, reports = [], {}
    runs = (
        ("linear", []),
        ("mlp", ["--model", "mlp", "--param", f"max-epochs={args.mlp_epochs}", "--val", str(val)]),
        ("ero-linear", ["--solver", "ero", "--val", str(val)]),
    )
    for model, extra in runs:
        for processes, launcher in ((1, []), (args.processes, torchrun)):
            out = scratch / f"dist_{model}_{processes}.safetensors"
            report = scratch / f"dist_{model}_{processes}.json"
            wall, rss = timed(
                [
                    "train",
                    str(train),
                    "--problem",
                    "fpor",
                    "--target",
                    "0.8",
                    "--drop",
                    "id",
                    "--device",
                    "cpu",
                    "-o",
                    str(out),
                    "--report",
                    str(report),
                    *extra,
                ],
                launcher,
            )
            result = json.loads(report.read_text())
            reports[(model, processes)] = out
            own = result.get("before_adjustment", {}).get("train", {})  # the solver's own decision (ERO's)
            rows.append(
                {
                    "model": model,
                    "processes": processes,
                    "seconds": wall,
                    "fit_seconds": result["fit_seconds"],
                    "peak_rss_mib": rss,
                    "train_recall": result["splits"]["train"]["recall"],
                    "train_precision": result["splits"]["train"]["precision"],
                    "own_train_recall": own.get("recall"),
                    "own_train_precision": own.get("precision"),
                }
            )
    one, many = load_file(reports[("linear", 1)]), load_file(reports[("linear", args.processes)])
    linear_gap = max(float(np.abs(one[k] - many[k]).max()) for k in one)
    print_table(
        rows,
        [
            "model",
            "processes",
            "seconds",
            "fit_seconds",
            "peak_rss_mib",
            "train_precision",
            "train_recall",
            "own_train_precision",
            "own_train_recall",
        ],
    )
    print(f"linear: largest weight difference between 1 and {args.processes} processes: {linear_gap:.3g}")
    path = write_results(
        "distributed",
        {
            "rows_trained": rows_trained,
            "rows": args.rows,
            "cols": args.cols,
            "files": args.files,
            "processes": args.processes,
            "mlp_epochs": args.mlp_epochs,
            "runs": rows,
            "linear_largest_weight_difference": linear_gap,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
