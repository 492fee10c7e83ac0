"""Coverage of the alert budget's certificate with known truth (issue 48).

A simulation: negatives' scores N(0, 1), positives' N(1.5, 1) at the rate 0.1. Each draw takes n fresh held-out
rows, searches the most recall within the budget (`Problem("alerts")`, operating_point/alert_budget.py) at
confidence C, and judges the cut chosen:

- with a period of M rows (`--max-alerts N --per-rows M`, or `--max-alert-rate R --new-rows M`), on M fresh rows
  drawn from the same distribution: the draw misses when they hold more than the budget's floor(R x M) alerts;
- for the population's share (`--max-alert-rate R`, no period), on the cut's exact share under the known
  distribution: the draw misses when it is above R.

The certificate promises a miss in at most 1 - C of the answered draws (a draw is answered when some cut that
flags a row is certified: with continuous scores the first cut flags one row, so whether a setting answers depends
on n, M, C and the budget alone, never on the draw; f shows one that never does). Beside it, the same search
without a confidence (the plain cut within the budget on the held-out rows), whose misses show what the
certificate is for, and the true recall each keeps.

Usage: python bench/budget_coverage.py [--draws 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _common import print_table, write_results
from scipy.stats import norm

from dmocli.operating_point.alert_budget import AlertBudget, allowed_alerts
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search

RATE, SHIFT = 0.1, 1.5
# (name, held-out rows n, period M (None: the population's share), confidence C, budget)
SETTINGS = [
    ("a: 50 per 1,000, n 2,000", 2000, 1000, 0.95, AlertBudget(0.05, 50, 1000)),
    ("b: 10 per 200, n 500", 500, 200, 0.9, AlertBudget(0.05, 10, 200)),
    ("c: 2% of 10,000 new rows, n 5,000", 5000, 10000, 0.95, AlertBudget(0.02)),
    ("d: 5% population, n 1,000", 1000, None, 0.95, AlertBudget(0.05)),
    ("e: 3 per 100, n 300", 300, 100, 0.95, AlertBudget(0.03, 3, 100)),
    ("f: 3 per 100, n 150", 150, 100, 0.95, AlertBudget(0.03, 3, 100)),  # too few rows: never answered
]


def draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = (rng.random(n) < RATE).astype(np.int64)
    return (rng.normal(size=n) + SHIFT * labels).astype(np.float32), labels


def true_share(threshold: float) -> float:
    """P(score >= threshold) under the known distribution."""
    return RATE * norm.sf(threshold - SHIFT) + (1 - RATE) * norm.sf(threshold)


def true_recall(threshold: float) -> float:
    return float(norm.sf(threshold - SHIFT))


def missed(threshold: float, budget: AlertBudget, period: int | None, rng: np.random.Generator) -> bool:
    """Whether the cut exceeds the budget: on M fresh rows, or in the population's share."""
    if period is None:
        return true_share(threshold) > budget.share
    scores, _ = draw(period, rng)
    return int(np.count_nonzero(scores >= np.float32(threshold))) > allowed_alerts(budget.share, period)


def run_setting(setting: tuple, draws: int, rng: np.random.Generator) -> dict:
    name, n, period, confidence, budget = setting
    answered = misses = plain_misses = 0
    recall, plain_recall = [], []
    started = time.perf_counter()
    for _ in range(draws):
        scores, labels = draw(n, rng)
        if labels.sum() == 0:
            continue
        new_rows = None if period is None or budget.per_rows is not None else period
        point = search(scores, labels, Problem("alerts"), confidence, new_rows=new_rows, budget=budget)
        plain = search(scores, labels, Problem("alerts"), budget=budget)
        plain_misses += missed(plain.threshold, budget, period, rng)
        plain_recall.append(true_recall(plain.threshold))
        if not point.feasible:
            continue
        answered += 1
        misses += missed(point.threshold, budget, period, rng)
        recall.append(true_recall(point.threshold))
    miss_rate = misses / max(answered, 1)
    # the miss rate's 95% Clopper-Pearson upper bound over the answered draws: consistent with 1 - C when above it
    from dmocli.operating_point.bounds import clopper_pearson_interval

    interval = clopper_pearson_interval(misses, answered) if answered else None
    return {
        "setting": name,
        "n": n,
        "period": "population" if period is None else period,
        "C": confidence,
        "budget": budget.describe(),
        "draws": draws,
        "answered": answered / draws,
        "miss_rate": miss_rate,
        "miss_interval": interval,
        "allowed": 1 - confidence,
        "holds": interval is not None and interval[0] <= 1 - confidence,
        "recall": float(np.mean(recall)) if recall else math.nan,
        "plain_miss_rate": plain_misses / draws,
        "plain_recall": float(np.mean(plain_recall)),
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = [run_setting(setting, args.draws, rng) for setting in SETTINGS]
    print_table(
        rows, ["setting", "C", "answered", "miss_rate", "allowed", "holds", "recall", "plain_miss_rate", "plain_recall"]
    )
    path = write_results(
        "budget_coverage", {"draws": args.draws, "seed": args.seed, "rate": RATE, "shift": SHIFT, "settings": rows}
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
