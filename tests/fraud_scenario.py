"""A generated fraud table as a new user brings it: a yes/no label named `is_fraud`, an id column, transaction
dates written as text, missing values, categorical columns, and amounts written for people ("$14.43").
The transcript test (tests/end_to_end/test_first_hour.py) and docs/first-hour.md use it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd


def fraud_frame(n: int = 3000, seed: int = 0, upper_card_types: bool = False) -> pd.DataFrame:
    """Fraud is likelier for large amounts, prepaid cards and online merchants; `card_type` upper-cased
    (`upper_card_types`) is the drift of new data that the model has never seen written so."""
    rng = np.random.default_rng(seed)
    card = rng.choice(["visa", "mastercard", "amex", "prepaid"], size=n, p=[0.45, 0.35, 0.12, 0.08])
    merchant = rng.choice(["grocery", "online", "travel", "fuel", "restaurant"], size=n)
    amount = np.round(rng.lognormal(3.5, 1.0, size=n), 2)
    hour = rng.integers(0, 24, size=n)
    score = 0.012 * amount + 1.5 * (card == "prepaid") + 1.0 * (merchant == "online") + 0.6 * (hour < 6) - 4.5
    fraud = rng.random(n) < 1 / (1 + np.exp(-score))
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 366, size=n), unit="D")
    age = rng.normal(45, 12, size=n).round()
    age[rng.random(n) < 0.05] = np.nan  # customers who gave no age
    return pd.DataFrame(
        {
            "transaction_id": [f"T{100000 + i}" for i in range(n)],
            "transaction_date": days.strftime("%Y-%m-%d"),
            "card_type": np.char.upper(card) if upper_card_types else card,
            "merchant_category": merchant,
            "amount": amount,
            "hour": hour,
            "customer_age": age,
            "is_fraud": np.where(fraud, "yes", "no"),
        }
    )


def write_fraud_csv(path: Path, n: int = 3000, seed: int = 0, upper_card_types: bool = False) -> Path:
    fraud_frame(n, seed, upper_card_types).to_csv(path, index=False)
    return path


FIX = ["--label-col", "is_fraud", "--drop", "transaction_id", "--drop", "transaction_date", "--impute", "median"]
# The first hour, as docs/first-hour.md shows it: (command, expected exit status); run in a folder holding
# fraud.csv (training) and new.csv (new data whose card_type values are upper-cased).
STEPS: list[tuple[list[str], int]] = [
    (["train", "fraud.csv"], 2),
    (["check", "fraud.csv"], 2),
    (["check", "fraud.csv", *FIX], 0),
    (["train", "fraud.csv", *FIX, "-o", "fraud.dmo.safetensors"], 0),
    (["predict", "fraud.dmo.safetensors", "new.csv", "-o", "scores.parquet"], 0),
    (["predict", "fraud.dmo.safetensors", "new.csv", "-o", "scores.parquet", "--strict"], 2),
]


def write_scenario(folder: Path) -> None:
    write_fraud_csv(folder / "fraud.csv")
    write_fraud_csv(folder / "new.csv", n=500, seed=1, upper_card_types=True)


def run_step(args: list[str], folder: Path) -> subprocess.CompletedProcess:
    """`dmo ARGS` run in `folder`, as the user typed it there."""
    from conftest import dmo_command

    env = {**os.environ, "PYTHONHASHSEED": "0", "COLUMNS": "200"}
    return subprocess.run([*dmo_command(), *args], capture_output=True, text=True, cwd=folder, env=env, timeout=300)


def transcript(folder: Path) -> str:
    """The steps run in `folder` with the real `dmo`, as a shell session (command, output, exit status)."""
    write_scenario(folder)
    lines = []
    for args, _ in STEPS:
        proc = run_step(args, folder)
        lines += [
            f"$ dmo {' '.join(args)}",
            *(proc.stderr + proc.stdout).rstrip().splitlines(),
            f"# exit {proc.returncode}",
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":  # python tests/fraud_scenario.py FOLDER: the transcript of docs/first-hour.md
    import sys

    print(transcript(Path(sys.argv[1])))
