"""Helpers shared by the benchmark scripts: where the data is, synthetic data, timing a command, writing results."""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "bench" / "results"
BINARY_SETS = ("page_blocks0", "segment0", "abalone19", "yeast4", "satimage", "ada")


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "machine": platform.node(),
        "python": platform.python_version(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **payload,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    def fmt(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    widths = {c: max([len(c), *(len(fmt(r.get(c, ""))) for r in rows)]) for c in columns}  # rows may be empty
    print("  ".join(c.rjust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(fmt(r.get(c, "")).rjust(widths[c]) for c in columns))


def make_data(directory: Path, rows: int, cols: int, files: int) -> None:
    """rows x cols float32 features and a linear binary label (~20 % positives) in `files` parquet files, plus an
    id column; kept between runs (a marker names the shape)."""
    marker = directory.parent / f"{directory.name}-{rows}x{cols}x{files}.done"
    if marker.exists():
        return
    for stale in directory.parent.glob(f"{directory.name}-*.done"):  # another shape's data is being replaced
        stale.unlink()
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
        pq.write_table(
            pa.table(arrays, names=[f"x{j}" for j in range(cols)] + ["label", "id"]),
            directory / f"part-{i:03d}.parquet",
            row_group_size=65536,
        )
    marker.touch()


def timed(args: list[str], launcher: list[str] = ()) -> tuple[float, float | None]:
    """Wall seconds and peak RSS (MiB, largest process) of `dmo ARGS`, started by `launcher` (e.g. torchrun)."""
    dmo = Path(sys.executable).with_name("dmo")
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started = time.perf_counter()
    proc = subprocess.run(timer + [*launcher, str(dmo), *args], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return wall, int(rss.group(1)) / 1024 if rss else None


def add_synthetic_data_options(parser: argparse.ArgumentParser) -> None:
    """--rows, --cols, --files and --scratch: the shape and place of make_data's set."""
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/dmo-engines"))


def synthetic_data(args: argparse.Namespace) -> tuple[Path, Path]:
    """(the data directory, the scratch directory) of make_data's set for the options above, written if needed."""
    data = args.scratch / "data"
    make_data(data, args.rows, args.cols, args.files)
    return data, args.scratch
