"""Exact (Clopper-Pearson) binomial bounds of precision and recall, and how many rows a bound needs.

Precision at a cut is TP out of the k rows predicted positive and recall is TP
out of the n+ positive rows; given k (or n+), TP is binomial when rows are
exchangeable, so the Clopper-Pearson bounds below hold for new data from the
same distribution. docs/operating-points.md explains how the search uses them.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

REPORT_LEVEL = 0.95  # the level of the intervals every report gives


def clopper_pearson_lower(successes: np.ndarray, trials: np.ndarray, confidence: float) -> np.ndarray:
    """One-sided lower bound: P(true rate >= bound) >= confidence (0 where there is no success)."""
    from scipy.special import betaincinv  # on use: scipy adds a quarter second to every command's start-up

    successes = np.asarray(successes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bound = betaincinv(successes, trials - successes + 1, 1.0 - confidence)  # the Beta(k, n-k+1) quantile
    return np.where(successes > 0, np.nan_to_num(bound, nan=0.0), 0.0)


def clopper_pearson_upper(successes: np.ndarray, trials: np.ndarray, confidence: float) -> np.ndarray:
    """One-sided upper bound: P(true rate <= bound) >= confidence (1 where every trial succeeded)."""
    successes = np.asarray(successes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    return 1.0 - clopper_pearson_lower(trials - successes, trials, confidence)


def clopper_pearson_interval(successes: int, trials: int, level: float = REPORT_LEVEL) -> list[float] | None:
    """The two-sided interval [lower, upper] at `level` (each side (1 - level)/2); None without trials."""
    if trials <= 0:
        return None
    side = 1.0 - (1.0 - level) / 2.0
    lower = float(clopper_pearson_lower(successes, trials, side))
    upper = float(clopper_pearson_upper(successes, trials, side))
    return [lower, upper]


def fewest_certifying_trials(rate: float, target: float, confidence: float) -> int | None:
    """The fewest trials at which a success rate of `rate` has its one-sided lower bound at `target` or above:
    how many validation positives (recall) or predicted positives (precision) a certificate needs at the rate
    observed. None when the rate does not exceed the target (no number of rows would certify it)."""
    if not rate > target:
        return None
    # the bound grows with the trials at a fixed rate, up to the flooring of successes
    return fewest_passing(
        lambda trials: float(clopper_pearson_lower(math.floor(rate * trials), trials, confidence)) >= target, 1 << 40
    )


def fewest_passing(passing: Callable[[int], bool], limit: int) -> int | None:
    """The least n >= 1 with `passing(n)`, for a predicate that stays true once it holds: doubling until it
    holds (None past `limit`), then bisection."""
    low, high = 1, 2
    while not passing(high):
        low, high = high, high * 2
        if high > limit:
            return None
    return least_passing(passing, low, high)


def first_holding(
    start: int, size: int, holds: Callable[[np.ndarray], np.ndarray], *, smallest: int, largest: int
) -> int:
    """The first index from `start` on where `holds` (given an array of indices), `size` when none; tested in
    chunks that double from `smallest` up to `largest` indices. The tests this scans (new-sample certificates)
    cost most where they pass, and a scan wants only the first pass: small chunks first waste few passing tests
    after it, and the doubling keeps long runs of failures vectorized."""
    first, chunk = start, min(smallest, largest)
    while first < size:
        indices = np.arange(first, min(first + chunk, size))
        hits = np.flatnonzero(holds(indices))
        if hits.size:
            return int(indices[hits[0]])
        first, chunk = first + chunk, min(2 * chunk, largest)
    return size


def least_passing(passing: Callable[[int], bool], low: int, high: int) -> int:
    """The least n in [low, high] with `passing(n)`, given that `passing(high)` holds and stays true above its
    least n (bisection)."""
    while low < high:
        middle = (low + high) // 2
        if passing(middle):
            high = middle
        else:
            low = middle + 1
    return high


FIXED_SEQUENCE_STARTS = 2  # label-free starting cuts of the precision test sequences, each at an equal share of 1 - C


def fixed_sequence_level(confidence: float) -> float:
    """The confidence each of the FIXED_SEQUENCE_STARTS sequences is tested at, so that together (a union bound)
    they keep the family-wise error at 1 - confidence."""
    return 1.0 - (1.0 - confidence) / FIXED_SEQUENCE_STARTS


def fixed_sequence_starts(target: float, confidence: float) -> list[int]:
    """Predicted positives at which the fixed-sequence tests of precision >= target start (at the level of
    `fixed_sequence_level`). Both depend on the target and level alone, never on the labels, so the procedure
    stays valid:

    - the fewest at which even a perfect record certifies (target^k <= 1 - level): the earliest start, which
      small validation sets need, but one negative among the first rows stops it;
    - the fewest at which a precision halfway between the target and 1 certifies: a start a model comfortably
      above the target passes even with a few negatives among its top-scored rows.
    """
    level = fixed_sequence_level(confidence)
    earliest = max(1, math.ceil(math.log(1.0 - level) / math.log(target)))
    return [earliest, fewest_certifying_trials((1.0 + target) / 2.0, target, level) or earliest]
