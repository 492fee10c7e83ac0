"""Scoring passes on the two engines: `dmo evaluate` and `dmo predict` with --engine local and --engine dask.

    python bench/engines.py [--rows 2000000] [--cols 50] [--files 8] [--workers 2] [--scratch /tmp/dmo-engines]

Writes rows x cols float32 features (a linear binary label, ~20 % positives) as `files` parquet files, trains
the default `wce` linear model on the first 100,000 rows, then times each command as a user runs it (the
whole command, under /usr/bin/time for the peak RSS of the largest process) on both engines, and checks that
the engines agree: the same evaluate report splits, the same predictions table. On one 2-core machine the
Dask engine pays for its cluster start and its pandas partitions; it is there to spread the pass over the
machines of a cluster (`--scheduler`), which this script does not have.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_synthetic_data_options, print_table, synthetic_data, timed, write_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_synthetic_data_options(parser)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    data, scratch = synthetic_data(args)
    train = scratch / "train.parquet"
    pq.write_table(pq.ParquetFile(next(iter(sorted(data.glob("*.parquet"))))).read().slice(0, 100_000), train)
    model = scratch / "model.safetensors"
    timed(["train", str(train), "--problem", "fpor", "--target", "0.8", "--drop", "id", "-o", str(model)])

    rows, outputs = [], {}
    for engine in ("local", "dask"):
        extra = ["--engine", engine, "--workers", str(args.workers)] if engine == "dask" else []
        report = scratch / f"evaluate_{engine}.json"
        wall, rss = timed(["evaluate", str(model), str(data), "--report", str(report), *extra])
        rows.append(
            {
                "command": "evaluate",
                "engine": engine,
                "seconds": wall,
                "rows_per_s": args.rows / wall,
                "peak_rss_mib": rss,
            }
        )
        out = scratch / f"predictions_{engine}"
        wall, rss = timed(["predict", str(model), str(data), "--id-col", "id", "-o", str(out), *extra])
        rows.append(
            {
                "command": "predict",
                "engine": engine,
                "seconds": wall,
                "rows_per_s": args.rows / wall,
                "peak_rss_mib": rss,
            }
        )
        outputs[engine] = (json.loads(report.read_text())["splits"], pq.read_table(out))
    same_report = outputs["local"][0] == outputs["dask"][0]
    same_predictions = outputs["local"][1].equals(outputs["dask"][1])
    print_table(rows, ["command", "engine", "seconds", "rows_per_s", "peak_rss_mib"])
    print(f"engines agree: evaluate report {same_report}, predictions {same_predictions}")
    path = write_results(
        "engines",
        {
            "rows": args.rows,
            "cols": args.cols,
            "files": args.files,
            "workers": args.workers,
            "runs": rows,
            "same_report": same_report,
            "same_predictions": same_predictions,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
