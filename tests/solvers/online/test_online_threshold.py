"""The vectorized threshold recurrences against plain per-row loops written from the paper's pseudo-code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmocli.solvers.online.thresholds import FofoThreshold, Schedule, affine_scan, fofo_path, ofo_predictions


def reference_fofo(
    eta: np.ndarray, y: np.ndarray, beta: float, n: int | None, first_horizon: int = 4096
) -> list[float]:
    """Algorithms 1 and 2 of Liu et al. (2018) row by row; n=None: doubling horizons first_horizon * 2^j.

    Returns the threshold (stage running average) used to predict each row.
    """
    b2 = beta * beta
    top = 1.0 / (1.0 + b2)
    used: list[float] = []
    t = 0  # rows seen (for pi)
    pos = 0
    start_theta = 0.0
    horizons = iter([n]) if n is not None else (first_horizon * 2**j for j in range(60))
    while t < eta.size:
        horizon = next(horizons)
        m = max(1, math.floor(0.5 * math.log2(2 * horizon / math.log2(horizon))) - 1) if horizon > 2 else 1
        n0 = max(1, horizon // m)
        radius = top
        for k in range(1, m + 1):
            rows = n0 if k < m else horizon - (m - 1) * n0
            gamma = radius / math.sqrt(10 * n0)
            lo, hi = max(0.0, start_theta - radius), min(top, start_theta + radius)
            theta = start_theta
            avg = start_theta
            for tau in range(1, rows + 1):
                if t >= eta.size:
                    return used
                used.append(avg)
                pos += int(y[t])
                t += 1
                pi = pos / t
                grad = -max(eta[t - 1] - theta, 0.0) + b2 * pi * theta
                theta = min(max(theta - gamma * grad, lo), hi)
                avg = (tau * avg + theta) / (tau + 1)
            start_theta = avg
            radius /= 2
    return used


def reference_ofo(eta: np.ndarray, y: np.ndarray, beta: float) -> list[int]:
    b2 = beta * beta
    tp = pos = predicted = 0
    out = []
    for e, label in zip(eta, y):
        den = b2 * pos + predicted
        pred = int(e >= (tp / den if den else 0.0))
        out.append(pred)
        tp += pred * int(label)
        predicted += pred
        pos += int(label)
    return out


def stream(n: int, pos: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    eta = rng.beta(0.6, 0.6 / pos - 0.6, n)  # mean `pos`, spread over [0, 1]
    return eta, (rng.random(n) < eta).astype(np.int64)


def feed(learner: FofoThreshold, eta: np.ndarray, y: np.ndarray, chunk: int) -> np.ndarray:
    return np.concatenate([learner.process(eta[i : i + chunk], y[i : i + chunk]) for i in range(0, eta.size, chunk)])


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(-2.0, 2.0)), min_size=1, max_size=300), st.floats(-3.0, 3.0))
@settings(max_examples=60, deadline=None)
def test_affine_scan_matches_a_loop(pairs, x0):
    a = np.array([p[0] for p in pairs])
    c = np.array([p[1] for p in pairs])
    x, expected = x0, []
    for aj, cj in pairs:
        x = aj * x + cj
        expected.append(x)
    np.testing.assert_allclose(affine_scan(a, c, x0), expected, atol=1e-9)


@pytest.mark.parametrize("gamma", [1e-4, 3e-3, 0.2, 0.9])
@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_fofo_path_is_the_per_row_recurrence(gamma, beta):
    rng = np.random.default_rng(int(gamma * 1e4) + int(beta * 10))
    eta = rng.random(3000) ** 3
    y = (rng.random(3000) < eta).astype(float)
    pi = np.cumsum(y) / np.arange(1, 3001)
    b2 = beta * beta
    lo, hi = 0.05, 1 / (1 + b2) - 0.01
    theta, expected = 0.1, [0.1]
    for e, p in zip(eta, pi):
        theta = min(max(theta - gamma * (-max(e - theta, 0.0) + b2 * p * theta), lo), hi)
        expected.append(theta)
    path, iterations = fofo_path(0.1, eta, pi=pi, gamma=gamma, b2=b2, lo=lo, hi=hi)
    np.testing.assert_allclose(path, expected, rtol=0, atol=1e-10)
    assert iterations < 50  # the Newton-like re-solve needs few passes, not one per row


@pytest.mark.parametrize("beta", [1.0, 2.0])
def test_ofo_predictions_are_the_per_row_rule(beta):
    eta, y = stream(5000, 0.05, 3)
    pred, _, _ = ofo_predictions(eta, y, tp0=0, pos0=0, predicted0=0, b2=beta * beta)
    assert pred.astype(int).tolist() == reference_ofo(eta, y, beta)
    # carried counts: two halves give the same predictions as one call
    first, _, _ = ofo_predictions(eta[:2000], y[:2000], tp0=0, pos0=0, predicted0=0, b2=beta * beta)
    tp, pos, predicted = int((first & (y[:2000] == 1)).sum()), int(y[:2000].sum()), int(first.sum())
    second, _, _ = ofo_predictions(eta[2000:], y[2000:], tp0=tp, pos0=pos, predicted0=predicted, b2=beta * beta)
    assert np.concatenate([first, second]).tolist() == pred.tolist()


def test_schedule_matches_algorithm_1():
    s = Schedule.for_rows(2_000_000)
    assert s.stages == math.floor(0.5 * math.log2(4_000_000 / math.log2(2_000_000))) - 1 == 7
    assert s.stage_rows == 2_000_000 // 7
    assert s.stage_end(s.stages) == 2_000_000  # the last stage takes the leftover rows
    assert Schedule.for_rows(10).stages == 1


@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("n", [3000, 20000])
def test_fofo_threshold_is_algorithm_1_row_by_row(n, beta):
    eta, y = stream(n, 0.05, n)
    expected = reference_fofo(eta, y, beta, n)
    for chunk in (n, 777):  # record batches of any size, across stage boundaries
        used = feed(FofoThreshold(beta, n), eta, y, chunk)
        np.testing.assert_allclose(used, expected, rtol=0, atol=1e-9)


def test_doubling_scheme_row_by_row():
    eta, y = stream(30000, 0.1, 7)
    expected = reference_fofo(eta, y, 1.0, None, first_horizon=4096)
    used = feed(FofoThreshold(1.0, None, first_horizon=4096), eta, y, 5000)
    np.testing.assert_allclose(used, expected, rtol=0, atol=1e-9)


def test_predictions_never_see_their_own_label():
    """Changing the labels from row k on leaves the thresholds of rows 0..k unchanged."""
    eta, y = stream(6000, 0.05, 11)
    base = feed(FofoThreshold(1.0, 6000), eta, y, 1000)
    flipped = y.copy()
    flipped[2500:] = 1 - flipped[2500:]
    other = feed(FofoThreshold(1.0, 6000), eta, flipped, 1000)
    np.testing.assert_array_equal(base[:2501], other[:2501])
    assert not np.allclose(base[2502:], other[2502:])
