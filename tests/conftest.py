"""Shared test helpers: run the real `dmo` entry point, and write small real data files."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

# BLAS (OpenBLAS) and OpenMP (scikit-learn, torch, XGBoost) on one thread in the test processes and the `dmo`
# processes they start: the tests' fits are tiny, and with `-n 2` both cores are busy, where a call that wakes a
# second thread waits for a core (a LogisticRegression fit on 30 rows: 21 ms with two threads, 0.8 ms with one).
# The variables reach the libraries loaded from here on; threadpool_limits the OpenBLAS numpy loaded above.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
threadpool_limits(limits=1)

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data"

# The test folders follow dmocli's packages, and a test module imports helpers from another by its basename
# (`from test_gbdt import schema_problems`), as pytest's default "prepend" import mode names them. Every folder
# goes on sys.path here, so that holds whichever files a run selects; tests/architecture/test_test_layout.py keeps
# the basenames unique and the folders without __init__.py, which that naming needs.
_FOLDERS = sorted({str(module.parent) for module in Path(__file__).parent.rglob("test_*.py")})
sys.path[1:1] = [folder for folder in _FOLDERS if folder not in sys.path]


def dmo_command() -> list[str]:
    beside = Path(sys.executable).with_name("dmo")  # this interpreter's (worktree venv's) entry point first
    exe = str(beside) if beside.exists() else shutil.which("dmo")
    return [exe] if exe else [sys.executable, "-m", "dmocli"]


def run_dmo(
    *args: str | os.PathLike,
    check: bool = False,
    timeout: float = 300,
    stdin: os.PathLike | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess:
    """`dmo ARGS` as a user's shell script runs it: exit status, stdout and stderr.

    In this process through the real entry point (dmocli.cli.process.main), which is what nearly every test needs:
    a new process costs seconds of start-up (torch) and tests nothing more. `process=True`, or a file piped to
    `stdin`, starts a real `dmo` process, for what only a process shows (standard input, signals, the console
    script, the interpreter's exit)."""
    if process or stdin is not None:
        proc = _dmo_process(args, timeout, stdin)
    else:
        proc = _dmo_in_this_process(args)
    if check and proc.returncode != 0:
        raise AssertionError(f"dmo {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def _dmo_process(
    args: tuple[str | os.PathLike, ...], timeout: float, stdin: os.PathLike | None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with open(stdin, "rb") if stdin is not None else contextlib.nullcontext() as piped:
        return subprocess.run(
            [*dmo_command(), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, stdin=piped
        )


def _dmo_in_this_process(args: tuple[str | os.PathLike, ...]) -> subprocess.CompletedProcess:
    """main(ARGS) with stdout and stderr caught as text (stdout with a byte buffer, as predict's `-o -` writes
    bytes), and what main sets for the whole process put back afterwards (messages naming flags, the SIGTERM
    handler, a forced progress display), so later tests see the library's defaults."""
    from dmocli import errors, progress
    from dmocli.cli.process import main

    spelling, handler, shown = errors._SPELLING["cli"], signal.getsignal(signal.SIGTERM), progress._forced
    out, err = io.BytesIO(), io.BytesIO()
    out_text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    err_text = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
            try:
                main([str(arg) for arg in args])
            except SystemExit as ended:
                code = ended.code
            if isinstance(code, str):  # sys.exit(message): the interpreter prints it and exits 1
                print(code, file=sys.stderr)
                code = 1
    finally:
        errors._SPELLING["cli"] = spelling
        signal.signal(signal.SIGTERM, handler)
        progress.configure(shown)
        out_text.flush()
        err_text.flush()
    returned = 0 if code is None else code
    return subprocess.CompletedProcess(args, returned, out.getvalue().decode(), err.getvalue().decode())


def make_binary_frame(
    n: int = 600, d: int = 4, pos_frac: float = 0.15, seed: int = 0, sep: float = 1.5
) -> pd.DataFrame:
    """Gaussian classes with a shifted mean: an imbalanced set where a linear model does well."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < pos_frac).astype(np.int64)
    X = rng.normal(size=(n, d)) + sep * y[:, None] * np.linspace(1.0, 0.3, d)[None, :]
    frame = pd.DataFrame(X.astype(np.float32), columns=[f"f{i}" for i in range(d)])
    frame["label"] = y
    return frame


def make_gaussian_classes(
    n: int, seed: int = 0, d: int = 20, priors: tuple[float, ...] = (0.1, 0.8, 0.1), sep: float = 0.5
) -> pd.DataFrame:
    """The LUS paper's simulation (section 6.1): x | y=k ~ N(mu_k, I), so the true log-odds are linear.

    Three classes with P = 0.1/0.8/0.1 and means +sep, 0, -sep on every coordinate
    (the paper does not print its means; these give a Bayes accuracy near 0.88).
    """
    rng = np.random.default_rng(seed)
    y = rng.choice(len(priors), size=n, p=np.asarray(priors))
    means = np.linspace(sep, -sep, len(priors))[:, None] * np.ones((1, d))
    X = rng.normal(size=(n, d)) + means[y]
    frame = pd.DataFrame(X.astype(np.float32), columns=[f"x{i}" for i in range(d)])
    frame["label"] = y
    return frame


@pytest.fixture(scope="session")
def dask_processes():
    """The address of a 2-worker Dask cluster of separate processes (XGBoost's Dask training needs them, and a
    user's cluster is one), started once per test process and shared by the tests that train on it."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def dask_threads():
    """The address of a 2-worker Dask cluster of threads in this process, one per test module that asks (the
    engine's tasks set torch to one thread, so the count is put back for the modules after it)."""
    import torch
    from distributed import LocalCluster

    threads = torch.get_num_threads()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address
    torch.set_num_threads(threads)


@pytest.fixture
def one_torch_thread():
    """Tiny networks train much faster on one thread, above all on a busy 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def binary_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "train.parquet"
    make_binary_frame().to_parquet(path)
    return path


@pytest.fixture
def dmo(monkeypatch, capsys):
    """`dmo ARGS` in this process through the real entry point (exit codes, one-line errors, warnings on stderr):
    (exit status, stdout, stderr). What main sets for the whole process (messages naming flags, the SIGTERM
    handler) is put back afterwards, so the tests after these see the library's defaults."""
    from dmocli import errors
    from dmocli.cli.process import main

    monkeypatch.setitem(errors._SPELLING, "cli", errors._SPELLING["cli"])
    previous = signal.getsignal(signal.SIGTERM)

    def run(*args: str | os.PathLike) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return ended.value.code, captured.out, captured.err

    yield run
    signal.signal(signal.SIGTERM, previous)
