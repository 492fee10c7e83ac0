"""Exact threshold search against brute force, and the confidence-aware mode's coverage."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import norm

from dmocli.operating_point.bounds import clopper_pearson_lower
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search


def brute_force(scores: np.ndarray, y: np.ndarray, problem: Problem) -> tuple[float, bool]:
    """Best objective over every threshold (each distinct score, and 'nothing positive')."""
    n_pos = int(y.sum())
    best, found = -np.inf, False
    for t in list(np.unique(scores)) + [np.inf]:
        pred = scores >= t
        tp = int((pred & (y == 1)).sum())
        fp = int((pred & (y == 0)).sum())
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / n_pos
        if problem.kind == "fpor":
            ok, obj = tp > 0 and prec >= problem.target, rec
        elif problem.kind == "frop":
            ok, obj = rec >= problem.target, prec
        else:
            b2 = problem.beta**2
            ok, obj = True, (1 + b2) * tp / (b2 * n_pos + tp + fp)
        if ok and obj > best:
            best, found = obj, True
    return best, found


cases = (
    st.integers(2, 40)
    .flatmap(
        lambda n: st.tuples(
            arrays(np.float32, n, elements=st.integers(-4, 4).map(float)),
            arrays(np.int64, n, elements=st.integers(0, 1)),
        )
    )
    .filter(lambda c: c[1].sum() > 0)
)


@settings(max_examples=300, deadline=None)
@given(
    cases, st.sampled_from(["fpor", "frop", "ofbs"]), st.sampled_from([0.3, 0.5, 0.8]), st.sampled_from([0.5, 1.0, 2.0])
)
def test_search_matches_brute_force(case, kind, target, beta):
    scores, y = case
    problem = Problem(kind, None if kind == "ofbs" else target, beta)
    point = search(scores, y, problem)
    best, found = brute_force(scores, y, problem)
    if problem.kind != "ofbs":
        assert point.feasible == found
    if found:
        assert np.isclose(point.objective, best)
        # the stored threshold reproduces the reported counts
        pred = scores >= point.threshold
        assert int((pred & (y == 1)).sum()) == point.tp
        assert int((pred & (y == 0)).sum()) == point.fp


def test_infeasible_reports_best_achievable():
    scores = np.array([0.9, 0.8, 0.7, 0.6], dtype=np.float32)
    y = np.array([0, 1, 0, 1])
    point = search(scores, y, Problem("fpor", 0.9))
    assert point.feasible is False
    assert np.isclose(point.best_achievable, 0.5)


def test_clopper_pearson_matches_known_values():
    # 0 successes: bound 0; all successes: (1-confidence)^(1/n)
    assert clopper_pearson_lower(np.array([0]), np.array([10]), 0.95)[0] == 0.0
    assert np.isclose(clopper_pearson_lower(np.array([10]), np.array([10]), 0.95)[0], 0.05 ** (1 / 10))


def _true_precision(t: float, pi: float, shift: float) -> float:
    """Population precision of 'score >= t' when negatives ~ N(0,1), positives ~ N(shift,1)."""
    tpr = norm.sf(t - shift)
    fpr = norm.sf(t)
    return pi * tpr / (pi * tpr + (1 - pi) * fpr)


def _true_recall(t: float, shift: float) -> float:
    return norm.sf(t - shift)


@pytest.mark.parametrize("kind", ["fpor", "frop"])
def test_confidence_mode_holds_target_on_fresh_samples(kind):
    """Plain search meets the target on new data about half the time; the 95% bound about 95%+ of the time."""
    rng = np.random.default_rng(0)
    pi, shift, n, target, trials = 0.1, 2.0, 2000, 0.8, 300
    problem = Problem(kind, target)
    held = {"plain": 0, "confident": 0}
    for _ in range(trials):
        y = (rng.random(n) < pi).astype(np.int64)
        scores = (rng.normal(size=n) + shift * y).astype(np.float32)
        for mode, conf in (("plain", None), ("confident", 0.95)):
            point = search(scores, y, problem, conf)
            true = (
                _true_precision(point.threshold, pi, shift) if kind == "fpor" else _true_recall(point.threshold, shift)
            )
            held[mode] += true >= target
    plain, confident = held["plain"] / trials, held["confident"] / trials
    assert 0.25 <= plain <= 0.75, plain
    assert confident >= 0.93, confident
