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
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402


def make_data(directory: Path, rows: int, cols: int, files: int) -> None:
    marker = directory.parent / f"{directory.name}-{rows}x{cols}x{files}.done"
    if marker.exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.parquet"):
        old.unlink()
    rng = np.random.default_rng(0)
    w = rng.normal(size=cols)
    per = rows // files
    for i in range(files):
        X = rng.standard_normal((per, cols), dtype=np.float32)
        y = (X @ w + 3.0 * rng.standard_normal(per) > 6.0).astype(np.int64)
        arrays = [pa.array(X[:, j]) for j in range(cols)] + [pa.array(y), pa.array(np.arange(i * per, (i + 1) * per))]
        pq.write_table(pa.table(arrays, names=[f"x{j}" for j in range(cols)] + ["label", "id"]),
                       directory / f"part-{i:03d}.parquet", row_group_size=65536)
    marker.touch()


def timed(args: list[str]) -> tuple[float, float | None]:
    """Wall seconds and peak RSS (MiB, largest process) of `dmo ARGS`."""
    dmo = Path(sys.executable).with_name("dmo")
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started = time.perf_counter()
    proc = subprocess.run(timer + [str(dmo), *args], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return wall, int(rss.group(1)) / 1024 if rss else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/dmo-engines"))
    args = parser.parse_args()
    data, scratch = args.scratch / "data", args.scratch
    make_data(data, args.rows, args.cols, args.files)
    train = scratch / "train.parquet"
    pq.write_table(pq.ParquetFile(next(iter(sorted(data.glob("*.parquet"))))).read().slice(0, 100_000), train)
    model = scratch / "model.safetensors"
    timed(["train", str(train), "--problem", "fpor", "--target", "0.8", "--drop", "id", "-o", str(model)])

    rows, outputs = [], {}
    for engine in ("local", "dask"):
        extra = ["--engine", engine, "--workers", str(args.workers)] if engine == "dask" else []
        report = scratch / f"evaluate_{engine}.json"
        wall, rss = timed(["evaluate", str(model), str(data), "--report", str(report), *extra])
        rows.append({"command": "evaluate", "engine": engine, "seconds": wall, "rows_per_s": args.rows / wall,
                     "peak_rss_mib": rss})
        out = scratch / f"predictions_{engine}"
        wall, rss = timed(["predict", str(model), str(data), "--id-col", "id", "-o", str(out), *extra])
        rows.append({"command": "predict", "engine": engine, "seconds": wall, "rows_per_s": args.rows / wall,
                     "peak_rss_mib": rss})
        outputs[engine] = (json.loads(report.read_text())["splits"], pq.read_table(out))
    same_report = outputs["local"][0] == outputs["dask"][0]
    same_predictions = outputs["local"][1].equals(outputs["dask"][1])
    print_table(rows, ["command", "engine", "seconds", "rows_per_s", "peak_rss_mib"])
    print(f"engines agree: evaluate report {same_report}, predictions {same_predictions}")
    path = write_results("engines", {"rows": args.rows, "cols": args.cols, "files": args.files, "workers": args.workers,
                                     "runs": rows, "same_report": same_report, "same_predictions": same_predictions})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
