"""`dmo monitor`'s intervals keep their level on sections of every size, and a section too small to say anything
is never gated (issue 45, hostile review 5).

Before: one row gave a "95 %" rate interval [0.829, 0.950], four rows [0, 0]; over chunks of 20 rows at the training
rate the interval covered the true rate 778 times in 1000 and the gate fired on 22 % of them (chunks of 5: 514 in
1000, 49 %): the bootstrap resamples the new rows, and a few rows resample to themselves.

A simulation with known truth: negatives' logits N(0, 1), positives' N(2, 1.5^2) at the training rate 0.2. Each draw
takes a fresh held-out curve of 600 rows (the curve's own error counts) and a fresh section of N new rows at the
same rate; the Platt map is the model's, fitted once. The threshold is the cut whose population precision is 0.6,
and the FPOR target that precision itself: a model exactly at its target, the hardest case for a false alarm.
bench/monitor_coverage.py prints the same table for more draws and sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, norm

from dmocli.operating_point.calibration import fit_platt
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.shift.prevalence import estimate_prevalence, exact_rate_interval
from dmocli.use.monitor import label_shift_section
from dmocli.use.verdicts import ReferenceRate, section_reasons

RATE, MU, SD = 0.2, 2.0, 1.5
LEVEL = 0.95
DRAWS = 200
# misses a 95 % interval may show in DRAWS draws before the test calls its level broken: the 0.999 quantile of
# Binomial(DRAWS, 0.05), so a right interval fails this test once in a thousand runs
ALLOWED = int(binom.ppf(0.999, DRAWS, 1 - LEVEL))


def draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < RATE).astype(np.int64)
    return (rng.normal(size=n) * np.where(y == 1, SD, 1.0) + MU * y).astype(np.float32), y


def population_cut(precision: float) -> tuple[float, float]:
    """The threshold whose precision at the training rate is closest to `precision`, and that precision."""
    grid = np.linspace(-2.0, 5.0, 2001)
    tpr, fpr = norm.sf((grid - MU) / SD), norm.sf(grid)
    values = RATE * tpr / (RATE * tpr + (1 - RATE) * fpr)
    best = int(np.argmin(np.abs(values - precision)))
    return float(grid[best]), float(values[best])


@pytest.fixture(scope="module")
def calibration():
    scores, labels = draw(50_000, np.random.default_rng(0))
    return fit_platt(scores, labels, "simulation")


@pytest.mark.parametrize("rows", [1, 4, 5, 20, 100, 1000])
def test_intervals_keep_their_level_and_the_gate_its_false_alarm_rate_at_every_size(calibration, rows):
    """Per draw: whether the rate interval holds the true rate, the precision interval the true precision, and
    whether the gate fired (the model meets its target exactly, at the training rate: any firing is false)."""
    threshold, precision = population_cut(0.6)
    problem = Problem("fpor", precision)
    rng = np.random.default_rng(rows)
    rate_misses = precision_misses = fired = small = 0
    for _ in range(DRAWS):
        scores, labels = draw(600, rng)
        curve = HeldOutCurve.from_scores(scores, labels)
        new, _ = draw(rows, rng)
        section = label_shift_section(curve, new, calibration, threshold, beta=1.0, confidence=LEVEL)
        low, high = section.positive_rate.interval
        rate_misses += not low <= RATE <= high
        low, high = section.label_shift.precision_interval
        precision_misses += not low <= precision <= high
        fired += bool(section_reasons(section, problem, ReferenceRate.training(curve, LEVEL)))
        small += section.too_small
    shown = (
        f"{rows} rows: the rate interval missed {rate_misses}, the precision interval {precision_misses}, the gate "
        f"fired {fired} times in {DRAWS} draws (allowed {ALLOWED} each)"
    )
    assert rate_misses <= ALLOWED and precision_misses <= ALLOWED and fired <= ALLOWED, shown
    if rows == 1 or rows >= 100:  # rows_needed is about 5 to 10 here: one row never tells a rate, 100 always can
        assert small == (DRAWS if rows == 1 else 0), f"{small} of {DRAWS} sections of {rows} rows too small"


def test_rows_needed_is_where_a_section_first_could_tell_its_rate(calibration):
    """Below rows_needed, even none or all rows flagged leave the training rate inside the exact interval; at it,
    one extreme excludes it (and the other does from one more row on, if not already)."""
    scores, labels = draw(3000, np.random.default_rng(7))
    curve = HeldOutCurve.from_scores(scores, labels)
    needed = exact_rate_interval(curve, np.zeros(1, np.float32), LEVEL).rows_needed
    assert needed > 1
    for rows, tells in ((needed - 1, False), (needed, True)):
        extremes = [np.full(rows, -50.0, np.float32), np.full(rows, 50.0, np.float32)]  # none flagged, all flagged
        outside = [not e.low <= curve.rate <= e.high for e in (exact_rate_interval(curve, x, LEVEL) for x in extremes)]
        assert all(outside) == tells, (rows, outside)
    estimate = estimate_prevalence(curve, np.zeros(needed - 1, np.float32), calibration, LEVEL)
    assert estimate.too_few_rows and not estimate_prevalence(curve, np.zeros(needed), calibration).too_few_rows


def test_one_row_and_four_rows_give_intervals_that_say_so(calibration):
    """The review's cases: one row, and four rows, each with an interval that is not a point."""
    scores, labels = draw(3000, np.random.default_rng(8))
    curve = HeldOutCurve.from_scores(scores, labels)
    one = estimate_prevalence(curve, np.array([3.0], np.float32), calibration, LEVEL)
    assert one.low <= 0.05 and one.high >= 0.95 and one.too_few_rows
    four = estimate_prevalence(curve, np.full(4, -3.0, np.float32), calibration, LEVEL)
    assert four.low == 0.0 and four.high > 0.3 and four.too_few_rows
