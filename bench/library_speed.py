"""The Python API at the command's speed: `DmoClassifier.fit` against `dmo train`, and scoring in memory against
`dmo predict` to a file (issue 37).

Fit: the same generated table (13,000 rows x 20 columns, 16 numeric and 4 text, 4 % positives) trained by
`python -m dmocli train` in a process and by `DmoClassifier(...).fit` in a fresh Python process (`import dmocli`
first, as a session would), while BUSY processes spin on the cores (another job on a shared machine). Both
process times include start-up, reading the parquet file and writing nothing else; the fit-only time of the
library is shown too. A third variant imports torch before dmocli, so OpenMP has started (spinning) before
dmocli could set OMP_WAIT_POLICY: what the library did before it set the variable (one run, capped).

Scoring: a model trained on that table scores 1,000,000 generated rows: `dmocli.predict(model, DataFrame)` and
`DmoClassifier.load(path).predict_proba` in one process (the DataFrame already in memory; the time of the call),
against `python -m dmocli predict MODEL big.parquet -o out.parquet` (the process), without background load.

    nice -n 10 python bench/library_speed.py [--repeats 3] [--busy 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_table, write_results  # noqa: E402

ROWS, NUMERIC, TEXT, POSITIVE_RATE = 13_000, 16, 4, 0.04
SCORE_ROWS = 1_000_000
BEFORE_CAP_S = 180  # the spinning variant's time limit (it took 30-40 s where the command took 5-7 s)

LIBRARY_FIT = """
import sys, time
started = time.perf_counter()
{before}import dmocli
import pandas as pd
frame = pd.read_parquet(sys.argv[1])
y = frame.pop("label")
fit_started = time.perf_counter()
dmocli.DmoClassifier(model=sys.argv[2], seed=0).fit(frame, y)
now = time.perf_counter()
print(now - fit_started, now - started)
"""

SCORE = """
import sys, time, numpy as np, pandas as pd, dmocli
frame = pd.read_parquet(sys.argv[1])
started = time.perf_counter()
predictions = dmocli.predict(sys.argv[2], frame)
middle = time.perf_counter()
proba = dmocli.DmoClassifier.load(sys.argv[2]).predict_proba(frame)
done = time.perf_counter()
assert len(predictions) == len(frame) and np.allclose(proba[:, 1], predictions["probability"], atol=1e-6)
print(middle - started, done - middle)
"""


def table(rows: int, seed: int) -> pd.DataFrame:
    """Numeric and text columns, and a label from a logistic model of some of them (about POSITIVE_RATE)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, NUMERIC))
    levels = [rng.integers(0, 6, size=rows) for _ in range(TEXT)]
    score = x[:, :6] @ np.array([1.2, -0.8, 0.6, 0.5, -0.4, 0.3]) + 0.7 * (levels[0] == 2) - 0.5 * (levels[1] == 4)
    label = (score + rng.logistic(size=rows) > np.quantile(score, 1 - POSITIVE_RATE) + 1.0).astype(np.int64)
    frame = pd.DataFrame(x, columns=[f"n{j}" for j in range(NUMERIC)])
    for j, codes in enumerate(levels):
        frame[f"t{j}"] = np.asarray(["a", "b", "c", "d", "e", "f"], dtype=object)[codes]
    frame["label"] = label
    return frame


def environment() -> dict[str, str]:
    """The caller's environment without OMP_WAIT_POLICY (as a new user's), with this tree importable."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(REPO)
    return env


def run(args: list[str], timeout: float | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(args, env=environment(), capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{args[:4]} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout


def fit_times(data: Path, model: str, repeats: int, work: Path) -> list[dict[str, object]]:
    rows = []
    for repeat in range(repeats):
        cli, _ = run(
            [sys.executable, "-m", "dmocli", "train", str(data), "-m", model, "-o", str(work / "m.safetensors")]
        )
        _, out = run([sys.executable, "-c", LIBRARY_FIT.format(before=""), str(data), model])
        fit, process = (float(v) for v in out.split())
        rows.append(
            {
                "model": model,
                "repeat": repeat,
                "cli_s": cli,
                "library_process_s": process,
                "library_fit_s": fit,
                "ratio": process / cli,
            }
        )
        print_table(rows[-1:], list(rows[-1]))
    return rows


def before_time(data: Path, model: str) -> float | None:
    """The library with OpenMP started before dmocli set the variable; None past BEFORE_CAP_S."""
    script = LIBRARY_FIT.format(before="import torch, xgboost  # OpenMP starts here, spinning\n")
    try:
        _, out = run([sys.executable, "-c", script, str(data), model], timeout=BEFORE_CAP_S)
    except subprocess.TimeoutExpired:
        return None
    return float(out.split()[0])


def score_times(data: Path, work: Path) -> dict[str, float]:
    model = work / "score.safetensors"
    run([sys.executable, "-m", "dmocli", "train", str(data), "-o", str(model)])
    big = work / "big.parquet"
    table(SCORE_ROWS, seed=1).drop(columns="label").to_parquet(big)
    cli, _ = run([sys.executable, "-m", "dmocli", "predict", str(model), str(big), "-o", str(work / "out.parquet")])
    _, out = run([sys.executable, "-c", SCORE, str(big), str(model)])
    frame_s, proba_s = (float(v) for v in out.split())
    return {
        "rows": SCORE_ROWS,
        "cli_predict_to_file_s": cli,
        "dmocli_predict_frame_s": frame_s,
        "predict_proba_s": proba_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes during the fits (one per core)")
    parser.add_argument("--models", default="linear,gbdt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        data = work / "train.parquet"
        table(ROWS, seed=0).to_parquet(data)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            rows, before = [], {}
            for model in args.models.split(","):
                rows += fit_times(data, model, args.repeats, work)
                before[model] = before_time(data, model)
        finally:
            for process in busy:
                process.kill()
                process.wait()
        scoring = score_times(data, work)
    summary = []
    for model in args.models.split(","):
        mine = [row for row in rows if row["model"] == model]
        summary.append(
            {
                "model": model,
                "cli_median_s": float(np.median([row["cli_s"] for row in mine])),
                "library_median_s": float(np.median([row["library_process_s"] for row in mine])),
                "median_ratio": float(np.median([row["ratio"] for row in mine])),
                "max_ratio": float(max(row["ratio"] for row in mine)),
                "fit_torch_first_s": before[model],
            }
        )
    print(f"\nfit under {args.busy} busy processes, {args.repeats} repeats (target: ratio <= 1.3)")
    print_table(summary, list(summary[0]))
    print(f"\nscoring {SCORE_ROWS:,} rows")
    print_table([scoring], list(scoring))
    path = write_results(
        "library_speed",
        {
            "rows": ROWS,
            "columns": NUMERIC + TEXT,
            "positive_rate": POSITIVE_RATE,
            "busy_processes": args.busy,
            "cores": os.cpu_count(),
            "fits": rows,
            "summary": summary,
            "scoring": scoring,
        },
    )
    print(f"\nwrote {path}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
