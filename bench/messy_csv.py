"""Closing evidence of --dates parts and --parse-numbers (issue 37, item 4): a messy generated CSV (dates in four
formats, amounts with currency signs, codes and thousands separators) trains with no preparation script, and its
predictions match those of a model trained on the same rows prepared by hand (pandas), with the same seed.

Prints, per model kind, the training time of each file, the rows whose decision differs and the largest logit
difference; writes bench/results/messy_csv.json.

    nice -n 10 python bench/messy_csv.py --rows 20000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

FORMATS = ["%Y-%m-%d %H:%M", "%d/%m/%Y %H:%M", "%d %b %Y %H:%M", "%Y-%m-%dT%H:%M:00Z"]


def messy_and_hand(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same rows as a user's export and as prepared by hand: the columns dmo derives, computed with pandas."""
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 365 * 24 * 60, n), unit="min")
    amount = np.round(rng.lognormal(5, 1.2, n), 2)
    x = rng.normal(size=n)
    logit = 1.5 * (when.hour < 6) + 0.01 * (amount - 150) + x + 0.8 * (when.day_of_week >= 5) - 1
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    written = [t.strftime(FORMATS[i % 4]) for i, t in enumerate(when)]
    money = [f"${a:,.2f}" if i % 2 else f"{a:,.2f} USD" for i, a in enumerate(amount)]
    messy = pd.DataFrame({"when": written, "amount": money, "x": x, "label": label})
    hand = pd.DataFrame(
        {
            "when.year": when.year,
            "when.month": when.month,
            "when.day": when.day,
            "when.weekday": when.day_of_week,
            "when.hour": when.hour,
            "when.minute": when.minute,
            "when.days_since": (when - when.normalize().min()) / pd.Timedelta(days=1),
            "amount": amount,
            "x": x,
            "label": label,
        }
    )
    return messy, hand


def dmo(*args: object) -> float:
    """Run `dmo ARGS` in a real process; seconds taken."""
    import subprocess

    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dmocli", *map(str, args)], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="linear,gbdt")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        messy, hand = messy_and_hand(args.rows, args.seed)
        messy.to_csv(work / "messy.csv", index=False)
        hand.to_csv(work / "hand.csv", index=False)
        for model in args.models.split(","):
            common = ["--model", model, "--seed", "3"]
            flags = ["--dates", "parts", "--parse-numbers"]
            t_messy = dmo("train", work / "messy.csv", *flags, *common, "-o", work / "m.dmo")
            t_hand = dmo("train", work / "hand.csv", *common, "-o", work / "h.dmo")
            dmo("predict", work / "m.dmo", work / "messy.csv", "-o", work / "m.parquet")
            dmo("predict", work / "h.dmo", work / "hand.csv", "-o", work / "h.parquet")
            a, b = pd.read_parquet(work / "m.parquet"), pd.read_parquet(work / "h.parquet")
            rows.append(
                {
                    "model": model,
                    "rows": args.rows,
                    "train_messy_s": round(t_messy, 2),
                    "train_hand_s": round(t_hand, 2),
                    "decisions_differing": int((a["decision"] != b["decision"]).sum()),
                    "max_abs_logit_diff": float(np.abs(a["logit"] - b["logit"]).max()),
                    "positives": int(a["decision"].sum()),
                }
            )
    print_table(rows, list(rows[0]))
    path = write_results("messy_csv", {"rows": rows, "seed": args.seed})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
