"""The review band's lower cut against brute force on tiny data: every candidate cut tried, the lowest whose band
keeps within the budget (its share, or the share's bound) kept; each row's class of decision; the figures per class;
the refusal of a budget no band fits (issue 48)."""

from __future__ import annotations

import numpy as np
import pytest

from dmocli.operating_point.alert_budget import certified_share
from dmocli.operating_point.bounds import clopper_pearson_upper
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.review_band import band_figures, decisions, review_band, why_empty


def _brute_lower(scores, upper, budget, confidence, next_rows=None):
    """The lowest cut (tried at every distinct score below `upper`, and at `upper` itself) whose band holds at most
    `budget` of the rows, or whose certified share is within it: the band's rows and its lower cut's score."""
    rows = scores.size
    below = np.unique(scores[scores < np.float32(upper)])
    best = (0, None)  # the empty band
    for start in below[::-1]:  # the band grows as its lower cut falls
        count = int(np.count_nonzero((scores >= start) & (scores < np.float32(upper))))
        if confidence is None:
            within = count <= budget * rows + 1e-9
        else:
            within = certified_share(count, rows, confidence=confidence, next_rows=next_rows) <= budget
        if within:
            best = (count, start)
    return best


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("confidence", [None, 0.8])
def test_the_lower_cut_is_the_lowest_within_the_budget_by_brute_force(seed, confidence):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 60))
    labels = rng.integers(0, 2, n)
    scores = np.round(rng.normal(size=n) + labels, 1).astype(np.float32)  # ties on purpose
    upper = float(rng.choice(scores)) + 0.05
    budget = float(rng.uniform(0.05, 0.6))
    band = review_band(HeldOutCurve.from_scores(scores, labels), upper, budget, confidence=confidence)
    count, start = _brute_lower(scores, upper, budget, confidence)
    assert band.band_rows == count
    decided = decisions(scores, band.upper, band.lower)
    assert int(np.count_nonzero(decided == 1)) == count  # the stored cut reproduces the band on the rows
    if start is None:
        assert band.lower == band.upper and band.empty
    else:
        assert np.float32(band.lower) <= start and not (scores[scores < start] >= np.float32(band.lower)).any()
    if confidence is not None and count:
        assert band.volume_bound == pytest.approx(float(clopper_pearson_upper(count, n, confidence)))


def test_a_band_for_the_next_rows_is_certified_by_the_alert_budgets_bound():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    scores = (rng.normal(size=400) + labels).astype(np.float32)
    curve = HeldOutCurve.from_scores(scores, labels)
    band = review_band(curve, 1.0, 0.15, confidence=0.9, next_rows=200)
    count, _ = _brute_lower(scores, 1.0, 0.15, 0.9, next_rows=200)
    assert band.band_rows == count > 0 and band.next_rows == 200
    population = review_band(curve, 1.0, 0.15, confidence=0.9)
    assert population.band_rows >= band.band_rows  # 200 next rows scatter more than the population's share


def test_each_row_is_decided_in_the_logits_own_type():
    logits = np.array([2.0, 1.0, 0.99999, 0.5, -3.0], dtype=np.float32)
    assert decisions(logits, 1.0, 0.5).tolist() == [0, 0, 1, 1, 2]
    assert decisions(logits, 1.0, 1.0).tolist() == [0, 0, 2, 2, 2]  # an empty band: no row to review


def test_the_figures_per_class_of_decision_count_the_rows():
    decided = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
    labels = np.array([1, 1, 0, 1, 0, 1, 0, 0, 0, 0])
    figures = band_figures(decided, labels, budget=0.2)
    positive, review, negative = (figures["classes"][name] for name in ("positive", "review", "negative"))
    assert (positive["rows"], positive["positives"], positive["precision"]) == (3, 2, pytest.approx(2 / 3))
    assert (review["volume"], review["recall"]) == (pytest.approx(0.2), pytest.approx(0.25))
    assert negative["recall"] == pytest.approx(0.25) and figures["within_budget"]
    assert band_figures(decided, None, budget=0.1)["classes"]["review"] == {"rows": 2, "volume": 0.2}


def test_a_budget_no_band_fits_says_what_would():
    scores = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 3.0], dtype=np.float32)  # three rows tie just below the cut
    labels = np.array([0, 1, 0, 1, 1, 1])
    band = review_band(HeldOutCurve.from_scores(scores, labels), 0.5, 0.2)
    assert band.empty
    assert "--review-budget 0.5 or more" in why_empty(band)
    certified = review_band(HeldOutCurve.from_scores(scores, labels), 0.5, 0.2, confidence=0.9)
    assert certified.empty and "certified at 0.9" in why_empty(certified)
    assert review_band(HeldOutCurve.from_scores(scores, labels), 0.5, 0.6).band_rows == 3
    assert "none is left for review" in why_empty(review_band(HeldOutCurve.from_scores(scores, labels), -1.0, 0.5))
