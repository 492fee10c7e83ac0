"""Coverage of `dmo monitor`'s intervals and the gate's false-alarm rate by section size (issue 45, hostile review 5).

A simulation with known truth, as tests/operating_point/test_monitor_interval_coverage.py: negatives' logits
N(0, 1), positives' N(2, 1.5^2) at the training rate 0.2; each draw takes a fresh held-out curve of 600 rows and a
fresh section of N new rows at the training rate (the Platt map is the model's, fitted once on 50,000 rows). The
threshold is the cut whose population precision is 0.6 and the FPOR target that precision: a model exactly at its
target, so every gate firing is a false alarm.

Per N: how often the 95 % rate and precision intervals hold the truth, how often the gate fires, the share of
sections too small to say anything, and the same for the percentile bootstrap alone with no too-small rule (the
intervals before this change).

Usage: python bench/monitor_coverage.py [--draws 1000] [--sizes 1,4,5,20,100,1000]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
from _common import print_table, write_results
from scipy.stats import norm

from dmocli.operating_point.calibration import fit_platt
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.use.monitor import label_shift_section
from dmocli.use.verdicts import ReferenceRate, rate_drift, section_reasons

RATE, MU, SD, LEVEL, CURVE_ROWS = 0.2, 2.0, 1.5, 0.95, 600


def draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < RATE).astype(np.int64)
    return (rng.normal(size=n) * np.where(y == 1, SD, 1.0) + MU * y).astype(np.float32), y


def population_cut(precision: float) -> tuple[float, float]:
    grid = np.linspace(-2.0, 5.0, 2001)
    tpr, fpr = norm.sf((grid - MU) / SD), norm.sf(grid)
    values = RATE * tpr / (RATE * tpr + (1 - RATE) * fpr)
    best = int(np.argmin(np.abs(values - precision)))
    return float(grid[best]), float(values[best])


def bootstrap_alone(curve: HeldOutCurve, section: dict, threshold: float) -> tuple[list[float], list[float]]:
    """The rate and precision intervals as the bootstrap's percentiles alone gave them (before the change)."""
    from dmocli.shift.at_rate import shifted_metrics
    from dmocli.shift.prevalence import estimate_prevalence, percentile_interval

    estimate = estimate_prevalence(curve, section["new"], section["calibration"], LEVEL)
    tps, fps = estimate.curve_replicates.counts_at(threshold)
    precision = shifted_metrics(estimate.replicates, tps / curve.n_pos, fps / curve.n_neg, 1.0)["precision"]
    return list(percentile_interval(estimate.replicates, LEVEL)), list(percentile_interval(precision, LEVEL))


def size_row(rows: int, draws: int, calibration) -> dict:
    threshold, precision = population_cut(0.6)
    problem = Problem("fpor", precision)
    rng = np.random.default_rng(rows)
    kinds = ("rate", "precision", "fired", "small", "rate_before", "precision_before", "fired_before")
    counts = dict.fromkeys(kinds, 0)
    needed = []
    for _ in range(draws):
        scores, labels = draw(CURVE_ROWS, rng)
        curve = HeldOutCurve.from_scores(scores, labels)
        new, _ = draw(rows, rng)
        section = label_shift_section(curve, new, calibration, threshold, beta=1.0, confidence=LEVEL)
        low, high = section.positive_rate.interval
        counts["rate"] += low <= RATE <= high
        low, high = section.label_shift.precision_interval
        counts["precision"] += low <= precision <= high
        reference = ReferenceRate.training(curve, LEVEL)
        counts["fired"] += bool(section_reasons(section, problem, reference))
        counts["small"] += section.too_small
        needed.append(section.positive_rate.rows_needed)
        rate_before, precision_before = bootstrap_alone(curve, {"new": new, "calibration": calibration}, threshold)
        counts["rate_before"] += rate_before[0] <= RATE <= rate_before[1]
        counts["precision_before"] += precision_before[0] <= precision <= precision_before[1]
        drifted = rate_drift(section.positive_rate.estimate, rate_before, replace(reference, interval=None))
        counts["fired_before"] += bool(drifted) or precision_before[1] < precision
    return {
        "rows": rows,
        "draws": draws,
        "rate_covered": counts["rate"],
        "precision_covered": counts["precision"],
        "gate_fired": counts["fired"],
        "too_small": counts["small"],
        "rows_needed_median": float(np.median(needed)),
        "rate_covered_before": counts["rate_before"],
        "precision_covered_before": counts["precision_before"],
        "gate_fired_before": counts["fired_before"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--sizes", default="1,4,5,20,100,1000")
    args = parser.parse_args()
    scores, labels = draw(50_000, np.random.default_rng(0))
    calibration = fit_platt(scores, labels, "simulation")
    started = time.perf_counter()
    rows = [size_row(int(n), args.draws, calibration) for n in args.sizes.split(",")]
    columns = list(rows[0])
    print_table(rows, columns)
    path = write_results(
        "monitor_coverage",
        {
            "setup": {
                "training_rate": RATE,
                "positives": f"N({MU}, {SD}^2)",
                "negatives": "N(0, 1)",
                "curve_rows": CURVE_ROWS,
                "confidence": LEVEL,
                "target_precision": population_cut(0.6)[1],
            },
            "rows": rows,
            "seconds": time.perf_counter() - started,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
