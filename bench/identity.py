"""Byte-identity check of the after-training commands (issue 49): every model file, report, prediction and
console output that `dmo` writes on sample_data/, for each solver and model family, written by one checkout's
code, then compared file by file with another checkout's.

Why: issue 49 restructures threshold, evaluate, predict, monitor and adapt, and its closing note must show that
behaviour stayed the same: "every model file trained, re-thresholded or adapted on sample_data, for each solver
and family, byte-identical before and after; every report equal except where a field was deliberately changed".

Rerun (about 5 minutes each on 2 idle cores; 15 to 20 with the test suite running beside it):

    mkdir -p /tmp/identity/base_src && git archive 3e516ca | tar -x -C /tmp/identity/base_src   # the commit before
    python bench/identity.py --checkout /tmp/identity/base_src --out /tmp/identity/base
    python bench/identity.py --checkout /work/main --out /tmp/identity/after     # the tree after
    python bench/identity.py --compare /tmp/identity/base /tmp/identity/after \\
        --json bench/results/identity_base_vs_after.json

The determinism check of the comparison itself (two runs of the same code must compare equal):

    python bench/identity.py --checkout /tmp/identity/base_src --out /tmp/identity/base2
    python bench/identity.py --compare /tmp/identity/base /tmp/identity/base2 \\
        --json bench/results/identity_base_vs_base2.json

Which code runs: every process runs with `PYTHONPATH=CHECKOUT` and the current directory set to OUT (so reports
name relative paths only, equal between two output folders); before the first command the script imports
`dmocli` the same way in a child process and refuses to go on unless `dmocli.__file__` lies inside
CHECKOUT/dmocli (the editable install of /work/main would otherwise win), and each steps process checks the
same of itself. `runs.json` records that path, the
checkout's commit and whether its tree was dirty.

What runs (all with `--seed 0`, `--no-progress`; trainings with small `--param`s so each takes seconds, and
`--allow-infeasible` so a small fit that misses its target still writes its model):

- binary (sample_data's page-blocks0): for each solver of `dmo solvers --json` and each model family it lists
  (linear, mlp, gbdt), one training with `--report`; then, from that model: `threshold MODEL` re-targeted to
  another problem on the stored held-out curve, `threshold MODEL DATA` (re-fit on labeled rows),
  `threshold MODEL --adapt NEW`, `threshold MODEL --prior R`, `evaluate --report --gate` (`--gate` only where
  the problem has a target), `predict` to CSV and to parquet, `monitor --report --gate --chunk-col week` and
  `monitor --report --chunk-size 250`, `info --json` of the trained and the adapted model. Variants of wce that
  take other paths: `--cv 3` (ensemble; linear and gbdt), `--cv 3 --cv-transfer rank`, `--confidence 0.9`
  (certificate, re-targeted with `--confidence`/`--new-rows`), `--model auto --cv 3`.
- multi-class (derived, see below): wce with each family (the other multi-class solvers' models go through the
  same after-training code, the class offsets, and are left out for time, each said in the output): training,
  re-fit on labeled rows (own problem and another), re-target on the stored curve, `--adapt` and `monitor` (which
  refuse a multi-class model: their exit code and message are compared), `evaluate --gate`, `predict`, `info`.

Processes: each training runs as `python -m dmocli` in a process of its own; a case's after-training steps then
run one after the other in one more process, each through `dmocli.cli.process.main(ARGS)` (what `dmo` runs, as
the test suite's `dmo` fixture does) with its stdout and stderr written to its files: an interpreter and its
imports per step cost more than the steps on a busy 2-core machine. `--fresh` runs every step as a process of its
own instead (slower; on 3e516ca the two gave the same files for binary/wce-linear, 42 of 42, with 350 s against
110 s under load). `--only CASE` (repeatable) runs only the named cases (`binary/wce-linear`: a quick check);
into an OUT already written, it re-runs them there, the other cases' files kept.

Derived inputs (written by this script with pyarrow from sample_data/, the same bytes for any checkout):
`train_unlabeled.parquet` (train with 60 % of labels emptied, rng seed 0: the semi-supervised solvers need
unlabeled rows), `shifted.parquet` (test's positives and a third of its negatives, label dropped, an integer
`week` column: a new positive rate for --adapt and monitor), `*_mc.parquet` (a 3-class label: 2 = page-blocks0's
positive, else 0/1 by x4 above the training negatives' median).

Every command's exit code is recorded; a non-zero one (a refusal, a gate at exit 3) is part of what is compared,
with its stderr. A solver/family combination is skipped only with its reason printed (SKIPS).

Comparison (`--compare A B`), by the file's suffix:

- `*.safetensors`: byte for byte; where they differ, the first differing header key (`__metadata__.dmocli.info
  ...`) or tensor is named.
- `*.json` (reports, `info --json`): parsed, with the keys of IGNORED_KEYS removed at any depth, then compared
  exactly (floats as Python reads them: the same bits); the first differing key path is named.
- `*.csv`, `*.parquet` (predictions): byte for byte; first differing line or column named.
- `*.stdout`, `*.stderr`: text with the patterns of CONSOLE_MASKS replaced, then compared line by line.
- `runs.json`: each step's command line and exit code (its seconds, the checkout path and commit ignored).

`--compare A B --only CASE ...` compares the inputs and the named cases alone (a partial run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"

# Keys dropped from every JSON file before comparing, at any depth, and why: each is a wall-clock duration or a rate
# from one. Two runs of 3e516ca differed in wall_seconds, fit_seconds, seconds, prepass_seconds, warm_start_seconds,
# rows_per_second (and .training.date, below) and nothing else; the other names are the remaining duration keys the
# package writes (grep '_seconds"'), listed so a solver that writes one is not reported as a difference.
IGNORED_KEYS: dict[str, str] = {
    "wall_seconds": "the command's wall-clock time (saving.py stamps it on every report)",
    "fit_seconds": "wall-clock time of the solver's fit",
    "seconds": "wall-clock time of one step (e.g. a training's per-fold or per-candidate time)",
    "prepass_seconds": "wall-clock time of a streaming solver's pre-pass",
    "pass_seconds": "wall-clock time of a streaming pass",
    "pilot_seconds": "wall-clock time of lus's pilot fit",
    "warm_start_seconds": "wall-clock time of ero's warm start",
    "extract_seconds": "wall-clock time of dmo extract (not run here; listed for completeness)",
    "rows_per_second": "rows over a wall-clock time (the streaming solvers' online section, dmo subsample)",
    "written_at": "when a train, evaluate or monitor report was written (UTC; report.written_now): the date its page "
    "states",
}
# Keys dropped at one place only (a dotted path from the top of the JSON).
IGNORED_PATHS: dict[str, str] = {
    ".training.date": "dmo info: when the model file was written, read from the file's modification time "
    "(pipelines/model_info.py, _written_at(stored.modified)); not stored in the file, which is compared byte for byte"
}
IGNORED_SUFFIX = "_seconds"  # any other key ending so is also a duration; dropped too, and listed when seen

# Console text: the durations train prints ("(solver wce, 4.4 s)") and the streaming solvers' speed ("58,776 rows/s").
CONSOLE_MASKS: list[tuple[str, str]] = [(r"\d+(?:\.\d+)? s\)", "<seconds> s)"), (r"[\d,]+ rows/s", "<rate> rows/s")]

MLP = ["--width", "16", "--depth", "1"]
KEEP = ["--allow-infeasible"]  # a small fit that misses its target still writes the model the later steps need
# Small --params per solver and family so each training takes seconds; a solver not listed trains with its
# defaults (a solver added later still runs).
SMALL: dict[str, dict[str, list[str]]] = {
    "wce": {"linear": [], "mlp": ["--param", "max-epochs=5"], "gbdt": ["--param", "rounds=30"]},
    "adsh": {"*": ["--param", "epochs=2", "--param", "steps-per-epoch=5", "--param", "fallback=false"]},
    "fixmatch": {"*": ["--param", "epochs=2", "--param", "steps-per-epoch=5", "--param", "fallback=false"]},
    "ero": {"linear": [], "mlp": [], "gbdt": ["--param", "rounds=30", "--param", "tree-rounds=3"]},
    "lagrangian": {"*": ["--param", "steps=100"]},
    "sigmoid-f1": {"*": ["--param", "steps=100"]},
    "lus": {"linear": ["--gamma", "2"], "mlp": ["--gamma", "2", "--param", "max-epochs=5"]},
}
SEMISUPERVISED = {"adsh", "fixmatch"}  # train on train_unlabeled.parquet
# (solver, family) combinations not run, with the reason printed.
SKIPS: dict[tuple[str, str], str] = {}
# Multi-class: wce with each family. The other multi-class solvers' models go through the same after-training code
# (a model's class offsets, whatever trained it), and each costs a training: left out for time, said in the output.
MULTICLASS = {"wce": ("linear", "mlp", "gbdt")}

ENV = {
    "OMP_NUM_THREADS": "1",  # two cases run side by side on 2 cores; fixed so both runs use the same
    "MKL_NUM_THREADS": "1",
    "COLUMNS": "120",  # the console's width decides where summary lines wrap
    "NO_COLOR": "1",
    "PYTHONHASHSEED": "0",
    "OMP_WAIT_POLICY": "PASSIVE",  # what the dmo entry point sets; the in-process steps do not pass through it
}


@dataclass
class Case:
    """One trained model and the after-training commands run from it."""

    name: str  # folder under OUT: binary/wce-linear, multiclass/wce-gbdt, ...
    train: list[str]
    steps: list[tuple[str, list[str]]] = field(default_factory=list)  # (output stem, dmo arguments)


def problem_for(solver: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Training problem, the re-target to another problem, and the re-fit's extra options."""
    problems = solver["problems"]
    if "fpor" in problems:
        return ["-p", "fpor", "-a", "0.8"], ["-p", "frop", "-a", "0.7"], ["-p", "fpor", "-a", "0.75"]
    return ["-p", "ofbs"], ["-p", "fpor", "-a", "0.8"], ["-p", "ofbs", "--beta", "2"]


def _threshold(model: str, d: str, stem: str, *args: str, report: bool = True) -> tuple[str, list[str]]:
    """A `dmo threshold` step writing D/STEM.safetensors (and D/STEM.json)."""
    written = ["-o", f"{d}/{stem}.safetensors", *(["--report", f"{d}/{stem}.json"] if report else [])]
    return stem, ["threshold", model, *args, *written]


def binary_case(name: str, train: list[str], *, retarget: list[str], refit: list[str], gate: bool) -> Case:
    d = f"binary/{name}"
    model, adapted = f"{d}/model.safetensors", f"{d}/adapt.safetensors"
    case = Case(name=d, train=[*train, "-o", model, "--report", f"{d}/train.json"])
    evaluate = ["evaluate", model, "data/test.parquet", "--report", f"{d}/evaluate.json"]
    new = "data/shifted.parquet"
    case.steps = [
        _threshold(model, d, "retarget", *retarget),
        _threshold(model, d, "refit", "data/test.parquet", *refit),
        _threshold(model, d, "adapt", "--adapt", new),
        _threshold(model, d, "prior", "--prior", "0.25"),
        ("evaluate", [*evaluate, "--gate"] if gate else evaluate),
        ("evaluate_adapted", ["evaluate", adapted, "data/test.parquet", "--report", f"{d}/evaluate_adapted.json"]),
        ("predict_csv", ["predict", model, "data/test.parquet", "-o", f"{d}/predictions.csv"]),
        ("predict_parquet", ["predict", model, new, "--id-col", "week", "-o", f"{d}/predictions.parquet"]),
        ("monitor_col", ["monitor", model, new, "--gate", "--chunk-col", "week", "--report", f"{d}/monitor_col.json"]),
        ("monitor_size", ["monitor", adapted, new, "--chunk-size", "250", "--report", f"{d}/monitor_size.json"]),
        ("info", ["info", model, "--json"]),
        ("info_adapted", ["info", adapted, "--json"]),
    ]
    return case


def multiclass_case(name: str, train: list[str]) -> Case:
    d = f"multiclass/{name}"
    model = f"{d}/model.safetensors"
    case = Case(name=d, train=[*train, "-o", model, "--report", f"{d}/train.json"])
    test = "data/test_mc.parquet"
    case.steps = [
        _threshold(model, d, "refit", test),
        _threshold(model, d, "retarget", test, "-p", "frop", "-a", "0.7"),
        _threshold(model, d, "retarget_stored", "-p", "frop", "-a", "0.7", report=False),
        _threshold(model, d, "adapt", "--adapt", "data/shifted.parquet", report=False),
        ("evaluate", ["evaluate", model, test, "--gate", "--report", f"{d}/evaluate.json"]),
        ("predict_csv", ["predict", model, test, "-o", f"{d}/predictions.csv"]),
        ("predict_parquet", ["predict", model, test, "-o", f"{d}/predictions.parquet"]),
        ("monitor", ["monitor", model, "data/shifted.parquet", "--chunk-size", "250", "--report", f"{d}/monitor.json"]),
        ("info", ["info", model, "--json"]),
    ]
    return case


def train_args(solver: str, family: str, data: str, val: str, problem: list[str]) -> list[str]:
    small = SMALL.get(solver, {})
    params = small.get(family, small.get("*", []))
    mlp = MLP if family == "mlp" else []
    return ["train", data, "--val", val, "-s", solver, "-m", family, "--seed", "0", *problem, *mlp, *params, *KEEP]


def plan(solvers: list[dict[str, Any]]) -> tuple[list[Case], list[str]]:
    """Every case to run, and a line per skipped combination."""
    cases: list[Case] = []
    skipped: list[str] = []
    for s in solvers:
        name = s["name"]
        problem, retarget, refit = problem_for(s)
        semi = name in SEMISUPERVISED  # needs unlabeled rows
        data = "data/train_unlabeled.parquet" if semi else "data/train.parquet"
        for family in s["models"]:
            if (name, family) in SKIPS:
                skipped.append(f"{name}/{family}: {SKIPS[name, family]}")
                continue
            train = train_args(name, family, data, "data/val.parquet", problem)
            gate = "ofbs" not in problem
            cases.append(binary_case(f"{name}-{family}", train, retarget=retarget, refit=refit, gate=gate))
        for family in ("linear", "mlp", "gbdt"):
            if family not in s["models"]:
                skipped.append(f"{name}/{family}: the solver does not train this family (dmo solvers --json)")
        if not s["multiclass"]:
            continue
        mc_data = "data/train_unlabeled_mc.parquet" if semi else "data/train_mc.parquet"
        for family in s["models"]:
            if family not in MULTICLASS.get(name, ()):
                skipped.append(f"{name}/{family} multi-class: same after-training code as wce's (class offsets); time")
                continue
            train = train_args(name, family, mc_data, "data/val_mc.parquet", ["-p", "fpor", "-a", "0.8"])
            cases.append(multiclass_case(f"{name}-{family}", train))
    wce = SMALL["wce"]
    base = ["train", "data/train.parquet", "-s", "wce", "--seed", "0", "-p", "fpor", "-a", "0.8", *KEEP]
    val = ["--val", "data/val.parquet"]
    fpor = {"retarget": ["-p", "frop", "-a", "0.7"], "refit": ["-p", "fpor", "-a", "0.75"], "gate": True}
    cv3 = ["--cv", "3"]
    cases += [
        binary_case("wce-linear-cv3", [*base, "-m", "linear", *cv3], **fpor),
        binary_case("wce-gbdt-cv3", [*base, "-m", "gbdt", *cv3, *wce["gbdt"]], **fpor),
        binary_case("wce-gbdt-cv3-rank", [*base, "-m", "gbdt", *cv3, "--cv-transfer", "rank", *wce["gbdt"]], **fpor),
        binary_case("wce-linear-confidence", [*base, *val, "-m", "linear", "--confidence", "0.9"],
                    retarget=["-p", "frop", "-a", "0.7", "--confidence", "0.9", "--new-rows", "500"],
                    refit=["-p", "fpor", "-a", "0.75", "--confidence", "0.9"], gate=True),
        binary_case("wce-auto", [*base, "-m", "auto", *cv3], **fpor),
    ]  # fmt: skip
    return cases, skipped


def write_inputs(data: Path) -> None:
    """sample_data/ copied, and the derived tables (see the module docstring), in OUT/data."""
    data.mkdir(parents=True, exist_ok=True)
    tables = {}
    for split in ("train", "val", "test"):
        shutil.copyfile(SAMPLE / f"{split}.parquet", data / f"{split}.parquet")
        tables[split] = pq.read_table(SAMPLE / f"{split}.parquet")
    rng = np.random.default_rng(0)
    train = tables["train"]
    hide = rng.random(train.num_rows) < 0.6
    label = train["label"].to_numpy()
    labels = pa.array(label, mask=hide)
    unlabeled = train.set_column(train.schema.get_field_index("label"), "label", labels)
    pq.write_table(unlabeled, data / "train_unlabeled.parquet")
    test = tables["test"]
    y = test["label"].to_numpy()
    keep = (y == 1) | (np.arange(len(y)) % 3 == 0)
    shifted = test.filter(pa.array(keep)).drop_columns(["label"])
    shifted = shifted.append_column("week", pa.array(np.arange(shifted.num_rows) // 100))
    pq.write_table(shifted, data / "shifted.parquet")
    median = float(np.median(train["x4"].to_numpy()[label == 0]))
    for split, table in [*tables.items(), ("train_unlabeled", unlabeled)]:
        y = table["label"].to_numpy(zero_copy_only=False)
        three = np.where(y == 1, 2, (table["x4"].to_numpy() > median).astype(np.int64))
        mask = np.isnan(y) if y.dtype.kind == "f" else None
        column = pa.array(three.astype(np.int64), mask=mask)
        table = table.set_column(table.schema.get_field_index("label"), "label", column)
        pq.write_table(table, data / f"{split}_mc.parquet")


def child_env(checkout: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    return {**env, **ENV, "PYTHONPATH": str(checkout)}


def verify_code(checkout: Path, out: Path) -> str:
    """The dmocli a child process imports, which must be CHECKOUT's."""
    probe = subprocess.run(
        [sys.executable, "-c", "import dmocli; print(dmocli.__file__)"],
        cwd=out, env=child_env(checkout), capture_output=True, text=True, check=True,
    )  # fmt: skip
    path = Path(probe.stdout.strip()).resolve()
    if not path.is_relative_to((checkout / "dmocli").resolve()):
        sys.exit(f"identity: dmocli imports from {path}, not from {checkout}/dmocli; check PYTHONPATH")
    return str(path)


def dmo(args: list[str], *, stem: Path, checkout: Path, out: Path) -> dict[str, Any]:
    """Run `python -m dmocli --no-progress ARGS` in OUT, its stdout and stderr kept beside its outputs."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dmocli", "--no-progress", *args],
        cwd=out, env=child_env(checkout), capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    stem.parent.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.stdout").write_text(proc.stdout)
    (out / f"{stem}.stderr").write_text(proc.stderr)
    return {"args": args, "rc": proc.returncode, "seconds": round(seconds, 2)}


def steps_child(spec_path: str) -> None:
    """Run a case's after-training steps in this process, one `dmocli.cli.process.main(ARGS)` each (what `dmo`
    runs; the test suite's `dmo` fixture does the same), each step's stdout and stderr written to its files."""
    import dmocli
    from dmocli.cli.process import main

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    if not Path(dmocli.__file__).resolve().is_relative_to(Path(spec["package"])):
        sys.exit(f"identity: dmocli imports from {dmocli.__file__}, not from {spec['package']}")
    results = {}
    saved = sys.stdout, sys.stderr
    for stem, args in spec["steps"]:
        base = out / spec["case"] / stem
        started = time.perf_counter()
        with open(f"{base}.stdout", "w") as stdout, open(f"{base}.stderr", "w") as stderr:
            sys.stdout, sys.stderr = stdout, stderr
            try:
                main(["--no-progress", *args])
                rc: Any = 0
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            except BaseException as exc:  # recorded, and the next step still runs
                rc = f"raised {type(exc).__name__}: {exc}"
            finally:
                sys.stdout, sys.stderr = saved
        results[stem] = {"args": args, "rc": rc, "seconds": round(time.perf_counter() - started, 2)}
    Path(spec_path).write_text(json.dumps(results))


def run_case(case: Case, checkout: Path, out: Path, fresh: bool) -> dict[str, Any]:
    """Train in a process of its own, then the steps: in one further process (or one process each: FRESH)."""
    (out / case.name).mkdir(parents=True, exist_ok=True)
    steps = {"train": dmo(case.train, stem=Path(case.name) / "train", checkout=checkout, out=out)}
    if steps["train"]["rc"] == 0 and fresh:
        for stem, args in case.steps:
            steps[stem] = dmo(args, stem=Path(case.name) / stem, checkout=checkout, out=out)
    elif steps["train"]["rc"] == 0:
        spec = out / case.name / "steps.spec"
        package = str((checkout / "dmocli").resolve())
        spec.write_text(json.dumps({"out": str(out), "case": case.name, "package": package, "steps": case.steps}))
        child = subprocess.run(
            [sys.executable, __file__, "--steps-child", str(spec)],
            cwd=out, env=child_env(checkout), capture_output=True, text=True,
        )  # fmt: skip
        if child.returncode != 0:
            sys.exit(f"identity: the steps of {case.name} failed: {child.stderr.strip()[-2000:]}")
        steps.update(json.loads(spec.read_text()))
        spec.unlink()
    rcs = " ".join(f"{k}={v['rc']}" for k, v in steps.items())
    print(f"  {case.name}: {sum(v['seconds'] for v in steps.values()):.0f} s  {rcs}", flush=True)
    return steps


def produce(checkout: Path, out: Path, jobs: int, *, fresh: bool, only: list[str] | None) -> None:
    """Write every case's files under OUT (replaced); with ONLY and an OUT already written, re-run those cases
    alone in it, their entries of runs.json replaced."""
    checkout = checkout.resolve()
    earlier = json.loads((out / "runs.json").read_text())["cases"] if only and (out / "runs.json").exists() else None
    if earlier is None and out.exists():
        shutil.rmtree(out)
    for name in only or []:
        shutil.rmtree(out / name, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    write_inputs(out / "data")
    code = verify_code(checkout, out)
    print(f"identity: dmocli from {code}", flush=True)
    listing = subprocess.run(
        [sys.executable, "-m", "dmocli", "solvers", "--json"],
        cwd=out, env=child_env(checkout), capture_output=True, text=True, check=True,
    )  # fmt: skip
    cases, skipped = plan(json.loads(listing.stdout)["solvers"])
    cases = [c for c in cases if not only or c.name in only]
    for line in skipped:
        print(f"identity: skipped {line}")
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = dict(zip([c.name for c in cases], pool.map(lambda c: run_case(c, checkout, out, fresh), cases)))
    git = ["git", "-C", str(checkout)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run([*git, "status", "--porcelain", "--", "dmocli"], capture_output=True, text=True).stdout)
    manifest = {
        "checkout": str(checkout),
        "commit": commit,
        "dmocli_dirty": dirty,
        "dmocli_file": code,
        "env": ENV,
        "steps": "one process per command" if fresh else "training in its own process, the steps in one more",
        "skipped": skipped,
        "seconds": round(time.perf_counter() - started, 1),
        "cases": {**earlier, **results} if earlier else results,
    }
    (out / "runs.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"identity: {len(cases)} cases, {sum(len(r) for r in results.values())} commands, "
          f"{manifest['seconds']} s; files under {out}")  # fmt: skip


# ---- comparison -------------------------------------------------------------------------------------------


def strip(value: Any, seen: set[str], path: str = "", also: frozenset[str] = frozenset()) -> Any:
    """VALUE without IGNORED_KEYS, *_seconds keys and IGNORED_PATHS at any depth (and the keys ALSO: the
    deliberately changed ones, on the second look); names the dropped in SEEN."""
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            where = f"{path}.{k}"
            if k in IGNORED_KEYS or k.endswith(IGNORED_SUFFIX) or where in IGNORED_PATHS:
                seen.add(where if where in IGNORED_PATHS else k)
                continue
            if k in also:
                continue
            kept[k] = strip(v, seen, where, also)
        return kept
    if isinstance(value, list):
        return [strip(v, seen, path, also) for v in value]
    return value


def json_difference(a: Path, b: Path, ignored: set[str], deliberate: frozenset[str]) -> str | None:
    """The first difference of two JSON files once the ignored keys are dropped; where the only differences are in
    DELIBERATE keys (changed on purpose, each named on the command line), that difference prefixed `deliberate:`."""
    va, vb = json.loads(a.read_text()), json.loads(b.read_text())
    found = first_difference(strip(va, ignored), strip(vb, ignored))
    if (
        found
        and deliberate
        and first_difference(strip(va, set(), also=deliberate), strip(vb, set(), also=deliberate)) is None
    ):
        return f"deliberate: {found}"
    return found


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first key path (depth first, in A's order) where A and B differ; None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                return f"{path}.{k} (only in A)"
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        extra = [k for k in b if k not in a]
        return f"{path}.{extra[0]} (only in B)" if extra else None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return f"{path} (length {len(a)} vs {len(b)})" if len(a) != len(b) else None
    both_nan = isinstance(a, float) and isinstance(b, float) and a != a and b != b
    if type(a) is not type(b) or not (a == b or both_nan):
        return f"{path}: {str(a)[:40]} vs {str(b)[:40]}"
    return None


def safetensors_header(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.get("__metadata__", {})
    header["__metadata__"] = {k: _maybe_json(v) for k, v in meta.items()}
    for name, entry in header.items():
        if name != "__metadata__":
            begin, end = entry["data_offsets"]
            entry["bytes"] = raw[8 + n + begin : 8 + n + end].hex()
    return header


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def masked(text: str) -> list[str]:
    for pattern, replacement in CONSOLE_MASKS:
        text = re.sub(pattern, replacement, text)
    return text.splitlines()


def compare_file(
    rel: str, a: Path, b: Path, ignored: set[str], deliberate: frozenset[str] = frozenset()
) -> tuple[str, str | None]:
    """(kind, first difference or None) of one file present in both folders."""
    if rel.endswith(".safetensors"):
        if a.read_bytes() == b.read_bytes():
            return "model", None
        return "model", first_difference(safetensors_header(a), safetensors_header(b)) or "bytes (same header)"
    if rel == "runs.json":
        ra, rb = json.loads(a.read_text())["cases"], json.loads(b.read_text())["cases"]
        steps = lambda r: {c: {s: (v["args"], v["rc"]) for s, v in st.items()} for c, st in r.items()}  # noqa: E731
        return "manifest", first_difference(steps(ra), steps(rb))
    if rel.endswith(".json"):
        kind = "info" if Path(rel).stem.startswith("info") else "report"
        return kind, json_difference(a, b, ignored, deliberate)
    if rel.endswith((".stdout", ".stderr")):
        la, lb = masked(a.read_text()), masked(b.read_text())
        if Path(rel).stem.startswith("info") and rel.endswith(".stdout") and la and la[0].startswith("{"):
            kind = "info"  # info --json: compared as JSON, like a report
            return kind, json_difference(a, b, ignored, deliberate)
        for i, (x, y) in enumerate(zip(la, lb)):
            if x != y:
                return "console", f"line {i + 1}: {x[:50]!r} vs {y[:50]!r}"
        return "console", None if len(la) == len(lb) else f"{len(la)} vs {len(lb)} lines"
    if a.read_bytes() == b.read_bytes():
        return "prediction" if "predictions" in rel else "input", None
    if rel.endswith(".parquet"):
        ta, tb = pq.read_table(a), pq.read_table(b)
        for name in ta.column_names:
            if name not in tb.column_names or not ta[name].equals(tb[name]):
                return "prediction", f"column {name}"
        return "prediction", "bytes (same columns)"
    la, lb = a.read_text().splitlines(), b.read_text().splitlines()
    line = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
    return "prediction", f"line {line + 1}"


def files(root: Path) -> Iterator[str]:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            yield str(p.relative_to(root))


def compare(
    a: Path, b: Path, json_path: Path | None, only: list[str] | None = None, *, deliberate: frozenset[str] = frozenset()
) -> int:
    """Compare output folders A and B file by file (with ONLY: the inputs and those cases' files alone). A report
    or info whose only differences are in DELIBERATE keys is counted apart ("deliberate"), its first one shown."""
    names_a, names_b = set(files(a)), set(files(b))
    if only:
        keep = lambda rel: rel.startswith(("data/", *(f"{c}/" for c in only)))  # noqa: E731
        names_a, names_b = {r for r in names_a if keep(r)}, {r for r in names_b if keep(r)}
    rows = []
    ignored: set[str] = set()
    for rel in sorted(names_a | names_b):
        if rel not in names_a or rel not in names_b:
            rows.append(
                {
                    "file": rel,
                    "kind": "missing",
                    "same": False,
                    "difference": "only in " + ("A" if rel in names_a else "B"),
                }
            )
            continue
        kind, diff = compare_file(rel, a / rel, b / rel, ignored, deliberate)
        on_purpose = diff is not None and diff.startswith("deliberate: ")
        rows.append({"file": rel, "kind": kind, "same": diff is None, "deliberate": on_purpose, "difference": diff})
    width = max(len(r["file"]) for r in rows)
    print(f"{'file'.ljust(width)}  {'kind':10}  same  first difference")
    for r in rows:
        print(f"{r['file'].ljust(width)}  {r['kind']:10}  {'yes' if r['same'] else 'NO ':4}  {r['difference'] or ''}")
    kinds: dict[str, list[int]] = {}
    for r in rows:
        kinds.setdefault(r["kind"], [0, 0, 0])[0 if r["same"] else 1 if r.get("deliberate") else 2] += 1
    print()
    for kind, (same, on_purpose, differ) in sorted(kinds.items()):
        print(f"{kind:10}  {same} same, {on_purpose} only in deliberate keys, {differ} different")
    print(f"ignored keys seen: {sorted(ignored)}")
    manifests = [json.loads((d / "runs.json").read_text()) if (d / "runs.json").exists() else {} for d in (a, b)]
    summary = {
        "a": {"dir": str(a), **{k: manifests[0].get(k) for k in ("checkout", "commit", "dmocli_dirty", "dmocli_file")}},
        "b": {"dir": str(b), **{k: manifests[1].get(k) for k in ("checkout", "commit", "dmocli_dirty", "dmocli_file")}},
        "only": only,
        "ignored_keys": IGNORED_KEYS,
        "ignored_suffix": IGNORED_SUFFIX,
        "ignored_paths": IGNORED_PATHS,
        "ignored_keys_seen": sorted(ignored),
        "console_masks": CONSOLE_MASKS,
        "deliberate_keys": sorted(deliberate),
        "by_kind": {k: {"same": s, "deliberate": p, "different": d} for k, (s, p, d) in sorted(kinds.items())},
        "all_same": all(r["same"] or r["deliberate"] for r in rows),
        "files": rows,
    }
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"written: {json_path}")
    return 0 if summary["all_same"] else 1


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--steps-child":
        steps_child(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkout", type=Path, help="repository root whose dmocli/ runs")
    parser.add_argument("--out", type=Path, help="output folder (replaced)")
    parser.add_argument("--jobs", type=int, default=2, help="cases run side by side (default 2)")
    parser.add_argument("--fresh", action="store_true", help="each step in a process of its own (slower)")
    parser.add_argument("--only", action="append", help="run (or compare) only this case (binary/wce-linear...)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two output folders")
    parser.add_argument("--json", type=Path, help="with --compare: write the comparison here")
    parser.add_argument(
        "--deliberate",
        action="append",
        default=[],
        metavar="KEY",
        help="with --compare: a report key changed on purpose (repeatable); a file differing only there is "
        "counted apart",
    )
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare, args.json, args.only, deliberate=frozenset(args.deliberate))
    if not (args.checkout and args.out):
        parser.error("give --checkout and --out, or --compare A B")
    produce(args.checkout, args.out.resolve(), args.jobs, fresh=args.fresh, only=args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
