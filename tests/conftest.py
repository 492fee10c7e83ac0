"""Shared test helpers: run the real `dmo` entry point, and write small real data files."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data"


def dmo_command() -> list[str]:
    beside = Path(sys.executable).with_name("dmo")  # the entry point of the environment running the tests
    if beside.exists():
        return [str(beside)]
    exe = shutil.which("dmo")
    return [exe] if exe else [sys.executable, "-m", "dmocli.cli"]


def run_dmo(*args: str | os.PathLike, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `dmo ARGS` in a subprocess, as a user's shell script would."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run([*dmo_command(), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"dmo {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def make_binary_frame(n: int = 600, d: int = 4, pos_frac: float = 0.15, seed: int = 0, sep: float = 1.5) -> pd.DataFrame:
    """Gaussian classes with a shifted mean: an imbalanced set where a linear model does well."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < pos_frac).astype(np.int64)
    X = rng.normal(size=(n, d)) + sep * y[:, None] * np.linspace(1.0, 0.3, d)[None, :]
    frame = pd.DataFrame(X.astype(np.float32), columns=[f"f{i}" for i in range(d)])
    frame["label"] = y
    return frame


@pytest.fixture
def binary_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "train.parquet"
    make_binary_frame().to_parquet(path)
    return path
