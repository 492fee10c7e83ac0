"""A model file replaced while `dmo predict` loads it (issue 33): how many runs give a mix of the two models.

A deploy swaps the live model with a rename (`mv new live.safetensors`). This script trains two models on
sample_data, swaps them under one name in a tight loop in a background thread, runs `dmo predict` on the live name
RUNS times as separate processes, and counts the outputs that are neither model's own (a mix, or a failure).

    python bench/model_swap.py --runs 100                       # this checkout's dmo
    python bench/model_swap.py --runs 100 --pythonpath /tmp/old # another checkout's package (`git worktree add`)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from _common import REPO, print_table, write_results

SAMPLE = REPO / "sample_data"


def dmo(args: list[str], pythonpath: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    where = pythonpath or REPO  # `python -m` imports from its working folder first
    return subprocess.run([sys.executable, "-m", "dmocli", *args], capture_output=True, env=env, cwd=where, timeout=600)


def digest(proc: subprocess.CompletedProcess) -> str:
    return hashlib.md5(proc.stdout).hexdigest() if proc.returncode == 0 else f"exit {proc.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--pythonpath", help="import dmocli from this folder (an older checkout)")
    parser.add_argument("--results-name", default="model_swap")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dmo-swap-"))
    data = str(SAMPLE / "test.parquet")
    own = {}
    for name, problem in (("a", ["--problem", "fpor", "--target", "0.8"]), ("b", ["--problem", "ofbs"])):
        model = str(work / f"{name}.st")
        trained = dmo(["train", str(SAMPLE / "train.parquet"), *problem, "--cv", "2", "-o", model], args.pythonpath)
        assert trained.returncode == 0, trained.stderr
        own[digest(dmo(["predict", model, data, "-o", "-"], args.pythonpath))] = name
    live, stop = work / "live.st", threading.Event()
    shutil.copyfile(work / "a.st", live)
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            for name in ("b", "a"):
                shutil.copyfile(work / f"{name}.st", work / ".swap.tmp")
                os.replace(work / ".swap.tmp", live)
                swaps += 1

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    started = time.perf_counter()
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    try:
        for _ in range(args.runs):
            proc = dmo(["predict", str(live), data, "-o", "-"], args.pythonpath)
            outcomes[own.get(digest(proc), "mixed" if proc.returncode == 0 else digest(proc))] += 1
            if proc.returncode != 0:
                failures.append(proc.stderr.decode(errors="replace").strip()[-300:])
    finally:
        stop.set()
        swapper.join()
    shutil.rmtree(work)
    rows = [{"outcome": outcome, "runs": count} for outcome, count in sorted(outcomes.items())]
    print_table(rows, ["outcome", "runs"])
    print(f"{args.runs} runs, {swaps} swaps, {time.perf_counter() - started:.0f} s")
    for failure in sorted(set(failures)):
        print(f"failure: {failure}")
    path = write_results(
        args.results_name, {"runs": args.runs, "swaps": swaps, "outcomes": dict(outcomes), "failures": failures}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
