"""Which prevalence estimator dmo uses by default (dmocli/shift/prevalence.py, issue 35).

A simulation with known truth: negatives' logits N(0, 1), positives' N(mu, sd^2); a held-out curve of rows at the
training rate 0.1 (50 or 2000 positives), a Platt map fitted on it, and new rows at rate 0.1 x {0.25, 0.5, 1, 2,
4}. Per estimator and shift: mean absolute error of the rate and coverage of the true rate by the 95% interval.
sd = 1 makes the Platt map exact (log-odds linear in the logit); sd = 1.5 makes it wrong, as real maps are.
Also times one estimate on 1e6 new rows against a 1e5-point curve.

Usage: python bench/label_shift.py [--draws 200] [--new-rows 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import print_table, write_results

from dmocli.operating_point.calibration import fit_platt
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search_curve
from dmocli.shift.prevalence import METHODS, estimate_prevalence

TRAINING_RATE = 0.1
SHIFTS = (0.25, 0.5, 1.0, 2.0, 4.0)


def draw_logits(n: int, rate: float, mu: float, sd: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < rate).astype(np.int64)
    return (rng.normal(size=n) * np.where(y == 1, sd, 1.0) + mu * y).astype(np.float32), y


def scenario(positives: int, mu: float, sd: float, draws: int, new_rows: int) -> list[dict]:
    rng = np.random.default_rng(positives)
    errors = {(m, s): [] for m in METHODS for s in SHIFTS}
    covered = {(m, s): [] for m in METHODS for s in SHIFTS}
    for draw in range(draws):
        scores, labels = draw_logits(int(positives / TRAINING_RATE), TRAINING_RATE, mu, sd, rng)
        curve = HeldOutCurve.from_scores(scores, labels)
        calibration = fit_platt(scores, labels, "validation")
        model_threshold = search_curve(curve.score_curve(), Problem("ofbs")).threshold
        for shift in SHIFTS:
            rate = TRAINING_RATE * shift
            new_scores, _ = draw_logits(new_rows, rate, mu, sd, rng)
            for method in METHODS:
                estimate = estimate_prevalence(
                    curve, new_scores, calibration, method=method, threshold=model_threshold, seed=draw
                )
                errors[method, shift].append(abs(estimate.rate - rate))
                covered[method, shift].append(estimate.low <= rate <= estimate.high)
    rows = []
    for method in METHODS:
        row = {"positives": positives, "sd": sd, "method": method}
        for shift in SHIFTS:
            row[f"mae x{shift:g}"] = float(np.mean(errors[method, shift]))
            row[f"cov x{shift:g}"] = float(np.mean(covered[method, shift]))
        row["mae shifted"] = float(np.mean([np.mean(errors[method, s]) for s in SHIFTS if s != 1.0]))
        row["cov pooled"] = float(np.mean([np.mean(covered[method, s]) for s in SHIFTS]))
        rows.append(row)
    return rows


def timing() -> list[dict]:
    rng = np.random.default_rng(1)
    scores, labels = draw_logits(200_000, TRAINING_RATE, 2.0, 1.0, rng)
    scores = np.round(scores * 25_000) / 25_000  # about 1e5 distinct scores
    curve = HeldOutCurve.from_scores(scores.astype(np.float32), labels)
    calibration = fit_platt(scores, labels, "validation")
    new_scores, _ = draw_logits(1_000_000, 0.05, 2.0, 1.0, rng)
    rows = []
    for method in METHODS:
        start = time.perf_counter()
        estimate_prevalence(curve, new_scores, calibration, method=method)
        rows.append({"method": method, "curve points": curve.scores.size, "seconds": time.perf_counter() - start})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--new-rows", type=int, default=10_000)
    args = parser.parse_args()
    columns = ["positives", "sd", "method"]
    columns += [f"{k} x{s:g}" for s in SHIFTS for k in ("mae", "cov")] + ["mae shifted", "cov pooled"]
    rows = []
    for sd in (1.0, 1.5):
        for positives in (50, 2000):
            rows += scenario(positives, 2.0, sd, args.draws, args.new_rows)
    print_table(rows, columns)
    speed = timing()
    print_table(speed, ["method", "curve points", "seconds"])
    write_results("label_shift", {"draws": args.draws, "new_rows": args.new_rows, "accuracy": rows, "speed": speed})


if __name__ == "__main__":
    main()
