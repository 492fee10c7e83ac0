"""Vectorized, exact solutions of the per-row threshold recurrences of FOFO and OFO.

Both recurrences are sequential: row t's threshold depends on row t-1's.
A Python loop over rows would cap throughput near 1M rows/s, so each is
solved over a whole chunk of rows with numpy, exactly:

* FOFO's step theta' = clip(theta - gamma * g(theta), lo, hi) is, for a given
  row, one of four affine maps (eta above/below theta, clipped low/high).
  Guess which piece every row takes (from the previous trajectory), solve the
  resulting affine recurrence with a parallel prefix scan (O(L log L) numpy
  work), then check every row against the true nonlinear step. All rows up
  to the first mismatch are certified exact; the solve restarts there with the
  new trajectory as its guess (Newton's method on a piecewise-affine system),
  so every iteration certifies at least one more row and few are needed.
* OFO's threshold is a ratio of running counts of past predictions; guess the
  predictions, recompute thresholds with cumulative sums, keep the prefix up
  to the first prediction that changes, and repeat from there.

Both return exactly what the per-row loop would (FOFO to ~1e-12, OFO bit for
bit); tests/solvers/online/test_online_threshold.py checks them against such a loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RESIDUAL_TOL = 1e-12
CHUNK_ROWS = 8192


def affine_scan(a: np.ndarray, c: np.ndarray, x0: float) -> np.ndarray:
    """x_1..x_L of x_{j+1} = a_j x_j + c_j from x_0, by a Hillis-Steele scan of affine compositions."""
    A = a.astype(np.float64, copy=True)
    C = c.astype(np.float64, copy=True)
    k = 1
    while k < A.size:
        C[k:] += A[k:] * C[:-k]
        A[k:] *= A[:-k]  # numpy buffers overlapping operands, so this reads the old A[:-k]
        k *= 2
    return A * x0 + C


def fofo_step(
    theta: np.ndarray, eta: np.ndarray, *, pi: np.ndarray, gamma: float, b2: float, lo: float, hi: float
) -> np.ndarray:
    """One projected SGD step on Q_t: theta - gamma * (-(eta - theta)_+ + b^2 pi theta), clipped to [lo, hi]."""
    return np.clip(theta - gamma * (b2 * pi * theta - np.maximum(eta - theta, 0.0)), lo, hi)


def fofo_path(
    theta0: float, eta: np.ndarray, *, pi: np.ndarray, gamma: float, b2: float, lo: float, hi: float
) -> tuple[np.ndarray, int]:
    """theta_0..theta_L of the FOFO recurrence (theta_{j+1} = fofo_step(theta_j, row j)); and iterations used."""
    L = eta.size
    path = np.full(L + 1, float(theta0))
    if L == 0:
        return path, 0
    slope_below = 1.0 - gamma * b2 * pi  # eta <= theta: only the b^2 pi theta term acts
    slope_above = slope_below - gamma  # eta > theta: theta also moves toward eta
    offset_above = gamma * eta
    start, iterations = 0, 0
    while start < L:
        iterations += 1
        guess = path[start:-1]
        above = eta[start:] > guess
        a = np.where(above, slope_above[start:], slope_below[start:])
        c = np.where(above, offset_above[start:], 0.0)
        free = a * guess + c
        low, high = free < lo, free > hi
        a[low | high] = 0.0
        c[low] = lo
        c[high] = hi
        path[start + 1 :] = affine_scan(a, c, path[start])
        exact = fofo_step(path[start:-1], eta[start:], pi=pi[start:], gamma=gamma, b2=b2, lo=lo, hi=hi)
        bad = np.abs(exact - path[start + 1 :]) > RESIDUAL_TOL
        if not bad.any():
            break
        first = int(np.argmax(bad))
        path[start + 1 + first] = exact[first]  # rows before `first` matched, so this value is exact
        start += first + 1
    return path, iterations


def ofo_predictions(
    eta: np.ndarray, y: np.ndarray, *, tp0: int, pos0: int, predicted0: int, b2: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """OFO (Busa-Fekete et al. 2015): predict 1{eta_t >= theta_t}, theta_t = TP/(b^2 P + TP + FP) of earlier rows.

    tp0, pos0, predicted0: counts over rows before this chunk. Returns the
    predictions, the thresholds used, and the iterations needed.
    """
    L = eta.size
    y = y.astype(np.int64)
    prior_pos = pos0 + np.concatenate(([0], np.cumsum(y)[:-1])) if L else np.zeros(0, np.int64)
    guess = eta >= _ratio(tp0, b2 * pos0 + predicted0)
    start, iterations = 0, 0
    while start < L:
        iterations += 1
        pred = guess.astype(np.int64)
        tp_before = tp0 + _exclusive_cumsum(pred * y)
        predicted_before = predicted0 + _exclusive_cumsum(pred)
        theta = _ratios(tp_before, b2 * prior_pos + predicted_before)
        new = eta >= theta
        changed = new[start:] != guess[start:]
        if not changed.any():
            return guess, theta, iterations
        first = start + int(np.argmax(changed))
        guess[first:] = new[first:]
        start = first + 1
    pred = guess.astype(np.int64)
    theta = _ratios(tp0 + _exclusive_cumsum(pred * y), b2 * prior_pos + predicted0 + _exclusive_cumsum(pred))
    return guess, theta, iterations


def _exclusive_cumsum(v: np.ndarray) -> np.ndarray:
    out = np.zeros(v.size, dtype=np.float64)
    if v.size > 1:
        np.cumsum(v[:-1], out=out[1:])
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _ratios(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(num.size)
    np.divide(num, den, out=out, where=den > 0)
    return out


# ---- FOFO's stage schedule (Algorithm 1) -------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """m stages of n0 rows each (the last stage also takes the n - m n0 leftover rows)."""

    n: int
    stages: int
    stage_rows: int

    @classmethod
    def for_rows(cls, n: int) -> "Schedule":
        """m = floor(1/2 log2(2n / log2 n)) - 1 (at least 1), n0 = floor(n / m)."""
        n = max(int(n), 1)
        m = 1
        if n > 2:
            m = max(1, math.floor(0.5 * math.log2(2 * n / math.log2(n))) - 1)
        return cls(n=n, stages=m, stage_rows=max(1, n // m))

    def stage_end(self, k: int) -> int:
        """Rows (from the schedule's start) after which stage k (1-based) ends."""
        return self.n if k >= self.stages else k * self.stage_rows


class FofoThreshold:
    """The threshold learner of FOFO over a stream, fed chunk by chunk (memory O(1)).

    Known horizon n: Algorithm 1's m stages; stage k uses step
    gamma_k = R_{k-1} / sqrt(10 n0) and the ball B(theta_1, R_{k-1}) with
    R_k = R_{k-1}/2, starting at the previous stage's average. Unknown n
    (horizon=None): a doubling scheme, horizons n_j = first * 2^j, each run
    as a fresh schedule started from the running average threshold.
    """

    def __init__(self, beta: float, horizon: int | None, first_horizon: int = 4096, theta0: float = 0.0):
        self.b2 = beta * beta
        self.top = 1.0 / (1.0 + self.b2)  # W = [0, 1/(1+b^2)]
        self.doubling = horizon is None
        self._next_horizon = first_horizon
        self.pos = 0
        self.seen = 0
        self.iterations = 0
        self.restarts = 0
        self._start_schedule(horizon if horizon is not None else self._take_doubling_horizon(), theta0)

    def _take_doubling_horizon(self) -> int:
        horizon = self._next_horizon
        self._next_horizon *= 2
        return horizon

    def _start_schedule(self, n: int, theta0: float) -> None:
        self.schedule = Schedule.for_rows(n)
        self.in_schedule = 0
        self.radius = self.top
        self.stage = 0
        self._start_stage(theta0)

    def _start_stage(self, theta1: float) -> None:
        self.stage += 1
        self.gamma = self.radius / math.sqrt(10.0 * self.schedule.stage_rows)
        self.lo = max(0.0, theta1 - self.radius)
        self.hi = min(self.top, theta1 + self.radius)
        self.theta = theta1  # theta_tau for the next row
        self.theta_sum = 0.0  # sum of theta_1..theta_{tau-1}
        self.tau = 0  # rows done in this stage

    @property
    def average(self) -> float:
        """thetabar: the stage's running average including the current iterate (what predicts the next row)."""
        return (self.theta_sum + self.theta) / (self.tau + 1)

    def restart(self, n: int | None) -> None:
        """A new pass: a fresh schedule over n rows (or doubling) from the current average threshold."""
        self.restarts += 1
        if n is None:
            self.doubling = True
            self._next_horizon = max(self._next_horizon, 4096)
        self._start_schedule(n if n is not None else self._take_doubling_horizon(), self.average)

    def process(self, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Thresholds thetabar_t used to predict each row (before its label), then learn from the labels."""
        out = np.empty(eta.size)
        done = 0
        while done < eta.size:
            left_in_stage = self.schedule.stage_end(self.stage) - self.in_schedule
            if left_in_stage <= 0:
                self._end_stage()
                continue
            take = min(left_in_stage, eta.size - done)
            out[done : done + take] = self._run(eta[done : done + take], y[done : done + take])
            done += take
            self.in_schedule += take
        return out

    def _end_stage(self) -> None:
        average = self.average
        if self.stage >= self.schedule.stages:  # schedule exhausted: only the doubling scheme gets here
            self._start_schedule(self._take_doubling_horizon(), average)
            return
        self.radius /= 2.0
        self._start_stage(average)

    def _run(self, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Rows of one stage, in chunks of CHUNK_ROWS so each scan and its re-solves stay short."""
        if eta.size > CHUNK_ROWS:
            return np.concatenate(
                [self._run(eta[i : i + CHUNK_ROWS], y[i : i + CHUNK_ROWS]) for i in range(0, eta.size, CHUNK_ROWS)]
            )
        L = eta.size
        pi = (self.pos + np.cumsum(y, dtype=np.float64)) / (self.seen + np.arange(1, L + 1))
        path, iterations = fofo_path(
            self.theta, eta.astype(np.float64), pi=pi, gamma=self.gamma, b2=self.b2, lo=self.lo, hi=self.hi
        )
        self.iterations += iterations
        averages = (self.theta_sum + np.cumsum(path[:-1])) / (self.tau + np.arange(1, L + 1))
        self.theta_sum += float(path[:-1].sum())
        self.theta = float(path[-1])
        self.tau += L
        self.pos += int(y.sum())
        self.seen += L
        return averages
