"""Wide tables at predict time (issue 45, hostile 10): `dmo predict` and `dmo monitor --chunk-size 100` on a
500 x 5,000 table, as CSV and as parquet, with a linear model trained on it. Per-column work repeated per column
(a list of the schema's names rebuilt for each of 5,000 columns, in each batch) made predict on the CSV take
109 s; each step is linear in the columns now.

Prints one row per command and format (wall seconds of the whole process: start-up, reading, scoring, writing),
and writes bench/results/wide_table.json.

    nice -n 10 python bench/wide_table.py               # this checkout
    PYTHONPATH=/path/to/other/checkout python bench/wide_table.py --label before --runs 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402


def write_table(folder: Path, rows: int, cols: int) -> tuple[Path, Path, Path]:
    """rows x cols float features with a linear label, as parquet and CSV, and NEW (the same without the label)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, cols)).astype(np.float32)
    logit = X[:, :10].sum(axis=1) - 1.0
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(cols)])
    frame["label"] = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
    train = folder / "train.parquet"
    frame.to_parquet(train)
    new = frame.drop(columns="label")
    new.to_parquet(folder / "new.parquet")
    new.to_csv(folder / "new.csv", index=False)
    return train, folder / "new.parquet", folder / "new.csv"


def dmo(args: list[str], timeout: float | None = None) -> None:
    """`python -m dmocli ARGS` run outside the repository: `-m` puts the working folder first on sys.path, which
    would shadow the checkout PYTHONPATH names."""
    command = [sys.executable, "-m", "dmocli", *args]
    subprocess.run(command, check=True, capture_output=True, timeout=timeout, cwd=tempfile.gettempdir())


def timed(args: list[str], timeout: float) -> float:
    """Wall seconds of `python -m dmocli ARGS` as a process; NaN past `timeout` (named on stderr)."""
    start = time.perf_counter()
    try:
        dmo(args, timeout)
    except subprocess.TimeoutExpired:
        print(f"timed out after {timeout:g} s: dmo {' '.join(args)}", file=sys.stderr)
        return float("nan")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--cols", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3, help="runs per command (the median is kept)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a run counts as NaN")
    parser.add_argument("--label", default="after", help="the name of this checkout in the results (before/after)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        train, new_parquet, new_csv = write_table(folder, args.rows, args.cols)
        model = folder / "lin.safetensors"
        dmo(["train", str(train), "--problem", "ofbs", "--cv", "0", "-o", str(model)])
        for fmt, new in (("csv", new_csv), ("parquet", new_parquet)):
            commands = {
                "predict": ["predict", str(model), str(new), "-o", str(folder / "p.parquet")],
                "monitor --chunk-size 100": ["monitor", str(model), str(new), "--chunk-size", "100"],
            }
            for name, command in commands.items():
                times = [timed(command, args.timeout) for _ in range(args.runs)]
                seconds = float(np.median(times))  # NaN: a run past --timeout, written as null (over the timeout)
                rows.append(
                    {
                        "command": name,
                        "format": fmt,
                        "seconds": None if np.isnan(seconds) else seconds,
                        "runs": [None if np.isnan(t) else t for t in times],
                    }
                )
    where = subprocess.run(
        [sys.executable, "-c", "import dmocli; print(dmocli.__file__)"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stdout.strip()
    print(f"{args.rows} x {args.cols}, {args.label} ({where}, PYTHONPATH={os.environ.get('PYTHONPATH', '')!r}):")
    shown = [{**row, "seconds": row["seconds"] or f"over {args.timeout:g}"} for row in rows]
    print_table(shown, ["command", "format", "seconds"])
    write_results(
        f"wide_table_{args.label}" if args.label != "after" else "wide_table",
        {"rows": args.rows, "cols": args.cols, "label": args.label, "timeout_s": args.timeout, "results": rows},
    )


if __name__ == "__main__":
    main()
