"""The README's quick start works as written: its shell blocks (train on your own CSV, evaluate, predict, the CI
gate) run with bash, unchanged, on a generated fraud-style CSV of the shape they describe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

README = (REPO / "README.md").read_text()


def quick_start_blocks() -> list[str]:
    """The ```bash blocks of the Quick start section, but the install one (it installs into the environment)."""
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [block for block in blocks if "pip install" not in block]


def transactions(n: int, seed: int, labeled: bool = True) -> pd.DataFrame:
    """What the README describes: a yes/no `is_fraud` label, an id, text columns and missing numbers."""
    rng = np.random.default_rng(seed)
    fraud = rng.random(n) < 0.1
    age = rng.normal(40, 12, n)
    age[rng.random(n) < 0.05] = np.nan
    frame = pd.DataFrame(
        {
            "transaction_id": np.arange(n) + seed * 1_000_000,
            "amount": np.round(np.exp(rng.normal(3, 0.6, n) + 1.8 * fraud), 2),
            "hour": rng.integers(0, 24, n) - 3.0 * fraud,
            "card_type": rng.choice(["visa", "mastercard", "amex"], n),
            "customer_age": age,
            "country": np.where(fraud & (rng.random(n) < 0.6), "XX", rng.choice(["DE", "FR", "US"], n)),
            "is_fraud": np.where(fraud, "yes", "no"),
        }
    )
    return frame if labeled else frame.drop(columns="is_fraud")


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)  # this interpreter's `dmo` and `python3` first
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHONHASHSEED": "0"}
    return subprocess.run(["bash", "-c", block], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("quick_start")
    transactions(3000, 1).to_csv(where / "transactions.csv", index=False)
    transactions(1500, 2).to_csv(where / "holdout.csv", index=False)
    transactions(500, 3, labeled=False).to_csv(where / "new.csv", index=False)
    return where


def test_the_quick_start_has_the_steps_the_readme_promises():
    blocks = quick_start_blocks()
    assert [next(w for w in block.split() if w.startswith(("dmo", "set"))) for block in blocks] == [
        "dmo",
        "dmo",
        "dmo",
        "set",
    ]
    assert "--label-col" in blocks[0] and "--drop" in blocks[0] and "--impute" in blocks[0]
    assert "--json" in blocks[3] and len(blocks[3].strip().splitlines()) <= 5


def test_the_quick_start_runs_as_written(workdir):
    train, evaluate, predict, gate = quick_start_blocks()
    for block in (train, evaluate, predict):
        proc = run_block(block, workdir)
        assert proc.returncode == 0, f"{block}\n{proc.stderr}"
    report = json.loads((workdir / "holdout.json").read_text())
    assert report["splits"]["data"]["n"] == 1500
    scores = pd.read_csv(workdir / "scores.csv")
    assert len(scores) == 500 and scores["transaction_id"].tolist() == transactions(500, 3)["transaction_id"].tolist()
    assert set(scores["predicted"]) <= {"yes", "no"}

    proc = run_block(gate, workdir)
    precision = json.loads((workdir / "holdout.json").read_text())["splits"]["data"]["precision"]
    assert json.loads((workdir / "train.json").read_text())["confidence"] == 0.95
    assert proc.returncode == (0 if precision >= 0.9 else 1), proc.stderr  # the gate follows the report
