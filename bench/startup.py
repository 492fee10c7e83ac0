"""Start-up of each command a CI job calls, cold, on sample_data: this checkout against another (issue 45).

Every `dmo` call paid for importing torch (seconds of a call like `dmo info MODEL`). Each command below runs as
`python -m dmocli ...` in a fresh process, RUNS times per checkout, the two checkouts taking turns (so both see
the same load), after one untimed run that fills the file cache; the table gives the median wall seconds, and
whether the command imported torch (one more run, which reports `'torch' in sys.modules` as it exits). The models
are trained once, by this checkout (the file format is the same), so both checkouts time the same inputs; where a
command writes predictions, the two checkouts' outputs are compared byte for byte.

    git worktree add /tmp/base fd1709e   # the checkout before the change
    nice python bench/startup.py --before /tmp/base [--runs 5]

Without --before only this checkout is timed. Targets (issue 45, on the quiet 2-core machine): info, check and
threshold under 1 s, a linear model's predict under 1.5 s. Results: bench/results/startup.json.
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
from _common import REPO, print_table, write_results  # noqa: E402

SAMPLE = REPO / "sample_data"
TARGETS_S = {"info": 1.0, "check": 1.0, "threshold": 1.0, "predict linear": 1.5}

# Runs dmo as `python -m dmocli` does, and says on exit whether torch was imported and which dmocli ran.
REPORTING = """
import atexit, sys
def _report():
    import dmocli
    with open({path!r}, "w") as out:
        out.write(f"{{'torch' in sys.modules}} {{dmocli.__file__}}")
atexit.register(_report)
sys.argv = ["dmo", *sys.argv[1:]]
from dmocli.cli.entry import main
main()
"""


def commands(work: Path) -> dict[str, list[str]]:
    """Name -> dmo arguments; {out} in an argument is the run's own output folder."""
    lin, gb, test = str(work / "lin.safetensors"), str(work / "gb.safetensors"), str(SAMPLE / "test.parquet")
    return {
        "--version": ["--version"],
        "info": ["info", lin],
        "check": ["check", str(SAMPLE / "train.parquet")],
        "solvers": ["solvers"],
        "threshold": ["threshold", lin, "--problem", "fpor", "--target", "0.7", "-o", "{out}/t.safetensors"],
        "predict linear": ["predict", lin, test, "-o", "{out}/p.csv"],
        "predict gbdt": ["predict", gb, test, "-o", "{out}/p.csv"],
        "evaluate linear": ["evaluate", lin, test],
        "monitor linear": ["monitor", lin, test],
    }


def environment(checkout: Path) -> dict[str, str]:
    """The caller's environment with `checkout` on the import path; run from `checkout` too, since `python -m`
    puts the working folder first on the path, ahead of PYTHONPATH (imports_torch checks which dmocli ran)."""
    return {**os.environ, "PYTHONPATH": str(checkout)}


def run(checkout: Path, args: list[str], out: Path, *, launcher: tuple[str, ...] = ("-m", "dmocli")) -> float:
    """Wall seconds of `python -m dmocli ARGS` (or `python LAUNCHER ARGS`) with `checkout`'s code."""
    out.mkdir(parents=True, exist_ok=True)
    filled = [arg.replace("{out}", str(out)) for arg in args]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *launcher, *filled], env=environment(checkout), capture_output=True, text=True, cwd=checkout
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{checkout}: dmo {' '.join(filled)} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def imports_torch(checkout: Path, args: list[str], work: Path) -> bool:
    """Whether the command imported torch, from one run that reports it as it exits (and checks which dmocli ran)."""
    report = work / "imported.txt"
    run(checkout, args, work / "report-run", launcher=("-c", REPORTING.format(path=str(report))))
    imported, module = report.read_text().split(" ", 1)
    if not Path(module).resolve().is_relative_to(checkout.resolve()):
        raise RuntimeError(f"PYTHONPATH={checkout} ran the dmocli of {module}: is it importable from there?")
    return imported == "True"


def compare_outputs(before: Path, after: Path) -> str:
    """How the two checkouts' predictions differ: identical bytes, or how many logits and decisions differ."""
    if before.read_bytes() == after.read_bytes():
        return "identical"
    old, new = pd.read_csv(before), pd.read_csv(after)
    logits = int((old["logit"] != new["logit"]).sum())
    largest = float((old["logit"] - new["logit"]).abs().max())
    decisions = int((old["decision"] != new["decision"]).sum())
    return f"{logits}/{len(old)} logits differ (max {largest:.1g}), {decisions} decisions"


def train_models(work: Path) -> None:
    """The linear and gbdt models of issue 45's repros, trained by this checkout."""
    for name, extra in (("lin", []), ("gb", ["--model", "gbdt"])):
        args = ["train", str(SAMPLE / "train.parquet"), "--problem", "fpor", "--target", "0.8"]
        run(REPO, [*args, *extra, "-o", str(work / f"{name}.safetensors")], work / "train")


def time_all(checkouts: dict[str, Path], runs: int, work: Path) -> list[dict[str, object]]:
    rows = []
    for name, args in commands(work).items():
        times: dict[str, list[float]] = {label: [] for label in checkouts}
        for label, checkout in checkouts.items():
            run(checkout, args, work / label)  # fills the file cache; not timed
        for _ in range(runs):
            for label, checkout in checkouts.items():
                times[label].append(run(checkout, args, work / label))
        row: dict[str, object] = {"command": name}
        for label, checkout in checkouts.items():
            row[f"{label}_s"] = float(np.median(times[label]))
        for label, checkout in checkouts.items():
            row[f"torch_{label}"] = "yes" if imports_torch(checkout, args, work / label) else "no"
        row["target_s"] = TARGETS_S.get(name, "")
        if name.startswith("predict") and "before" in checkouts:
            row["output"] = compare_outputs(work / "before" / "p.csv", work / "after" / "p.csv")
        row["runs"] = {label: times[label] for label in checkouts}
        rows.append(row)
        print_table([row], [key for key in row if key != "runs"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="another checkout to time beside this one (its repository root)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command and checkout (median)")
    args = parser.parse_args()
    checkouts = {**({"before": args.before} if args.before else {}), "after": REPO}
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        train_models(work)
        rows = time_all(checkouts, args.runs, work)
    columns = list(dict.fromkeys(key for row in rows for key in row if key != "runs"))
    print(f"\nmedian of {args.runs} cold runs per command, seconds ({os.cpu_count()} cores)")
    print_table(rows, columns)
    path = write_results(
        "startup",
        {
            "checkouts": {label: str(path) for label, path in checkouts.items()},
            "runs": args.runs,
            "cores": os.cpu_count(),
            "load_average": os.getloadavg(),
            "commands": rows,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
