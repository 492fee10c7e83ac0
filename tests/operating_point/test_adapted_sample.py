"""`--adapt/--prior --confidence C --new-rows N` (adapted_sample.py) against a simulation with known truth.

Negatives' logits are N(0, 1), positives' N(MU, 1), rounded to GRID; held-out curves are drawn at the training rate
PI, and the new rows at PI x SHIFT. A cut's true TPR and FPR follow from the normal CDFs, so the precision measured
on N new rows at the true rate is drawn exactly (positives ~ Binomial(N, rate), their true positives ~
Binomial(positives, TPR), the negatives' false positives ~ Binomial(N - positives, FPR)) many times per curve.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.stats import betabinom

from dmocli.errors import DmoError
from dmocli.operating_point.adapted_sample import _PrecisionTest, fewest_new_positives
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.shift.adaptation import adapt_threshold

MU, PI, SHIFT, GRID = 2.0, 0.1, 0.5, 0.02
HELD_OUT, NEW_ROWS, TARGET = 10_000, 2_000, 0.6  # 1,000 held-out positives; about 100 positives in N new rows
CURVES, SAMPLES = 100, 500


def draw(n: int, rate: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < rate).astype(np.int64)
    scores = rng.normal(size=n) + MU * y
    return (np.round(scores / GRID) * GRID).astype(np.float32), y


def true_rates(threshold: float) -> tuple[float, float]:
    """TPR and FPR of `logit >= threshold` on the grid: rows whose unrounded logit reaches half a step below the
    first grid point at or above it."""
    cut = (np.ceil(threshold / GRID - 1e-9) - 0.5) * GRID
    return float(stats.norm.sf(cut - MU)), float(stats.norm.sf(cut))


def sample_precision_met(threshold: float, rate: float, rng: np.random.Generator) -> int:
    """Of SAMPLES draws of NEW_ROWS rows at `rate`, how many measure precision >= TARGET at the threshold."""
    tpr, fpr = true_rates(threshold)
    positives = rng.binomial(NEW_ROWS, rate, SAMPLES)
    tp, fp = rng.binomial(positives, tpr), rng.binomial(NEW_ROWS - positives, fpr)
    return int(np.count_nonzero(tp >= TARGET * np.maximum(tp + fp, 1) - 1e-9))


def test_new_sample_certificate_holds_where_the_population_one_falls_short():
    """At a given rate (`--prior`), the population certificate's cut is met on N new rows in clearly under 95%
    of the samples; the certificate about N new rows is met in at least 95% of all the samples of the curves it
    answers for (CURVES held-out draws x SAMPLES new samples: the error of the certificate counts both)."""
    rng = np.random.default_rng(35)
    rate = PI * SHIFT
    counts = {"population": [0, 0], "new_rows": [0, 0]}
    for _ in range(CURVES):
        curve = HeldOutCurve.from_scores(*draw(HELD_OUT, PI, rng))
        for label, new_rows in (("population", None), ("new_rows", NEW_ROWS)):
            adapted = adapt_threshold(
                curve, Problem("fpor", TARGET), rate, confidence=0.95, threshold=0.0, new_rows=new_rows
            )
            assert adapted.new_rows == new_rows
            if adapted.feasible:
                counts[label][0] += 1
                counts[label][1] += sample_precision_met(adapted.threshold, rate, rng)
    answered, met = counts["new_rows"]
    population_answered, population_met = counts["population"]
    share, population_share = met / max(answered * SAMPLES, 1), population_met / (population_answered * SAMPLES)
    assert answered >= 10, f"the new-sample certificate answered {answered} of {CURVES} curves"
    assert share >= 0.95, f"met on {met} of {answered * SAMPLES} new samples ({answered} curves answered)"
    assert population_share < 0.9, (
        f"population certificate met on {population_met} of {population_answered * SAMPLES} new samples"
    )


def test_miss_probability_matches_a_brute_force_sum():
    """The vectorized predictive miss probability against scipy's Beta-binomials summed term by term."""
    test = _PrecisionTest(500, 4500, m_pos=40, m_neg=1900, target=0.8, level=0.01)
    for tp, fp in ((0, 0), (5, 1), (100, 3), (200, 10), (300, 40)):
        x = np.arange(41)
        p_x = betabinom.pmf(x, 40, tp + 1, 500 - tp + 1)
        missing = [1.0 if k == 0 else betabinom.sf(np.floor(0.25 * k + 1e-9), 1900, fp + 1, 4500 - fp + 1) for k in x]
        expected = float(p_x @ np.array(missing))
        assert test.miss_probability(np.array([tp]), np.array([fp]))[0] == pytest.approx(expected, abs=1e-9)


def test_fewest_new_positives_is_a_lower_binomial_quantile():
    rng = np.random.default_rng(1)
    m_lo = fewest_new_positives(2000, 0.05, 0.05)  # COUNT_SHARE x 0.05 = 0.01 of samples may hold fewer
    below = np.count_nonzero(rng.binomial(2000, 0.05, 100_000) < m_lo)
    assert 60 <= m_lo <= 100 and below <= 1_300, (m_lo, below)


def test_frop_new_sample_certificate_and_ofbs_refusal():
    rng = np.random.default_rng(3)
    curve = HeldOutCurve.from_scores(*draw(HELD_OUT, PI, rng))
    tp_rows = adapt_threshold(curve, Problem("frop", 0.5), 0.05, confidence=0.95, new_rows=NEW_ROWS)
    assert tp_rows.threshold == tp_rows.old_threshold and tp_rows.new_rows == NEW_ROWS
    few = adapt_threshold(curve, Problem("frop", 0.5), 0.05, confidence=0.95, new_rows=20)  # about one positive
    assert few.feasible is False
    with pytest.raises(DmoError):
        adapt_threshold(curve, Problem("ofbs"), 0.05, confidence=0.95, new_rows=NEW_ROWS)
