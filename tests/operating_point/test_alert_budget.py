"""Alert budgets (operating_point/alert_budget.py) against brute force on tiny data: the certified counts by
enumerating every binomial and hypergeometric outcome, the search by trying every cut, and a small simulation of
the next-rows certificate with known truth (bench/budget_coverage.py runs the large one)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmocli.errors import DmoError
from dmocli.operating_point.alert_budget import (
    AlertBudget,
    alerts_interval,
    allowed_alerts,
    certified_share,
    most_certified,
)
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.problems import Problem, f_beta, precision, recall
from dmocli.operating_point.search import search


def binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def hypergeometric_cdf(k: int, population: int, successes: int, draws: int) -> float:
    total = math.comb(population, draws)
    return sum(math.comb(successes, i) * math.comb(population - successes, draws - i) for i in range(k + 1)) / total


def brute_population(rows: int, share: float, confidence: float) -> int:
    """The most held-out rows flagged whose share's Clopper-Pearson upper bound is within `share`: the count x
    with P(Binomial(rows, share) <= x) <= 1 - C, the definition of that bound."""
    passing = [k for k in range(rows + 1) if binomial_cdf(k, rows, share) <= 1 - confidence + 1e-12]
    return max(passing) if passing else -1


def brute_next(rows: int, next_rows: int, allowed: int, confidence: float) -> int:
    passing = []
    for k in range(rows + 1):
        total = k + allowed + 1
        risk = 0.0 if total > rows + next_rows else hypergeometric_cdf(k, rows + next_rows, total, rows)
        if risk <= 1 - confidence + 1e-12:
            passing.append(k)
    return max(passing) if passing else -1


@pytest.mark.parametrize("rows", [5, 12, 30])
@pytest.mark.parametrize("share", [0.1, 0.25, 0.6])
@pytest.mark.parametrize("confidence", [0.5, 0.9])
def test_most_certified_matches_enumeration(rows, share, confidence):
    assert most_certified(rows, share, confidence=confidence, next_rows=None) == brute_population(
        rows, share, confidence
    )
    for next_rows in (4, 10, 25):
        allowed = allowed_alerts(share, next_rows)
        expected = rows if allowed >= next_rows else brute_next(rows, next_rows, allowed, confidence)
        assert most_certified(rows, share, confidence=confidence, next_rows=next_rows) == expected


def test_the_certificate_is_a_prefix_and_tightens_with_confidence():
    # the tail the next-rows test reads grows with the held-out count, so the certified cuts are a prefix
    loose = most_certified(200, 0.1, confidence=0.6, next_rows=100)
    tight = most_certified(200, 0.1, confidence=0.95, next_rows=100)
    population = most_certified(200, 0.1, confidence=0.95, next_rows=None)
    assert 0 <= tight < loose < 20
    assert tight <= population  # a finite period's own scatter costs more than the population's share
    budget = AlertBudget(0.1)
    mask = budget.admissible(np.arange(201), 200, confidence=0.95, next_rows=100)
    assert mask.tolist() == [k <= tight for k in range(201)]


def test_certified_share_is_the_least_alerts_passing():
    for flagged in (0, 3, 10):
        bound = certified_share(flagged, 40, confidence=0.9, next_rows=20)
        allowed = round(bound * 20)
        assert brute_next(40, 20, allowed, 0.9) >= flagged
        assert allowed == 0 or brute_next(40, 20, allowed - 1, 0.9) < flagged


def test_alerts_interval_brackets_the_expected_count():
    low, high = alerts_interval(50, 1000, next_rows=1000)
    assert low < 50 < high
    assert alerts_interval(0, 1000, next_rows=1000)[0] == 0


def brute_search(scores, labels, problem: Problem, share: float) -> tuple[int, int] | None:
    """(tp, fp) of the best cut that flags a row and keeps within the share, by trying every cut."""
    curve = ScoreCurve.from_scores(scores, labels)
    rows, n_pos = scores.size, int(labels.sum())
    best = None
    for tp, fp in zip(curve.tp.tolist(), curve.fp.tolist()):
        if tp + fp > math.floor(share * rows + 1e-9):
            continue
        if problem.kind == "fpor" and (tp == 0 or precision(tp, fp) < problem.target):
            continue
        objective = {"alerts": recall(tp, n_pos), "fpor": recall(tp, n_pos), "ofbs": f_beta(tp, fp, n_pos)}[
            problem.kind
        ]
        key = (objective, -(tp + fp)) if problem.kind != "fpor" else (objective, precision(tp, fp))
        if best is None or key > best[0]:
            best = (key, (tp, fp))
    return None if best is None else best[1]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", ["alerts", "ofbs", "fpor"])
def test_search_within_budget_matches_brute_force(seed, kind):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 40))
    labels = (rng.random(n) < 0.35).astype(np.int64)
    labels[0] = 1
    scores = np.round(rng.normal(size=n) + labels, 1)  # ties: cuts group them
    problem = Problem(kind, 0.5 if kind == "fpor" else None)
    share = float(rng.choice([0.1, 0.3, 0.5]))
    point = search(scores, labels, problem, budget=AlertBudget(share))
    expected = brute_search(scores, labels, problem, share)
    if expected is None:
        assert point.feasible is False
    else:
        assert point.feasible is True
        assert (point.tp, point.fp) == expected


def test_certified_search_keeps_within_the_certified_count():
    rng = np.random.default_rng(3)
    labels = (rng.random(3000) < 0.1).astype(np.int64)
    scores = rng.normal(size=3000) + 2 * labels
    budget = AlertBudget.asked(None, 50, 1000)
    point = search(scores, labels, Problem("alerts"), 0.95, budget=budget)
    most = most_certified(3000, 0.05, confidence=0.95, next_rows=1000)
    assert point.feasible and point.tp + point.fp <= most
    plain = search(scores, labels, Problem("alerts"), budget=budget)
    assert plain.tp + plain.fp <= 150 and plain.tp + plain.fp > point.tp + point.fp
    assert "next 1,000 rows" in point.certificate


def test_ofbs_takes_a_confidence_only_beside_a_budget():
    labels = np.array([0, 1, 0, 1, 1, 0, 0, 0])
    scores = np.arange(8.0)
    with pytest.raises(DmoError, match="ofbs"):
        search(scores, labels, Problem("ofbs"), 0.9)
    assert search(scores, labels, Problem("ofbs"), 0.6, budget=AlertBudget(1.0)).feasible


def test_a_budget_of_more_alerts_than_rows_is_refused():
    with pytest.raises(DmoError, match="give N <= M"):
        AlertBudget.asked(None, 11, 10)
    assert AlertBudget.asked(None, 10, 10) == AlertBudget(1.0, 10, 10)
    assert AlertBudget.asked(0.02, None, None) == AlertBudget(0.02)
    assert AlertBudget.from_info(AlertBudget(0.25, 1, 4).info()) == AlertBudget(0.25, 1, 4)


def test_next_rows_certificate_holds_with_known_truth():
    """A few hundred draws (bench/budget_coverage.py runs thousands): scores of a known distribution, the search's
    cut certified for the next 200 rows, which exceed the budget in at most 1 - C of the answered draws."""
    rng = np.random.default_rng(0)
    confidence, budget = 0.9, AlertBudget.asked(None, 20, 200)
    exceeded = answered = 0
    for _ in range(300):
        labels = (rng.random(600) < 0.1).astype(np.int64)
        scores = rng.normal(size=600) + 1.5 * labels
        point = search(scores, labels, Problem("alerts"), confidence, budget=budget)
        if not point.feasible:
            continue
        answered += 1
        fresh_labels = rng.random(200) < 0.1
        fresh = rng.normal(size=200) + 1.5 * fresh_labels
        exceeded += int(np.count_nonzero(fresh >= point.threshold) > 20)
    assert answered > 250
    assert exceeded / answered <= 1 - confidence + 0.04  # binomial scatter of 300 draws at 0.1: sd 0.017
