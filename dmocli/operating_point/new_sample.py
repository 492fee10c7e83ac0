"""What a certificate must prove for the metric *measured on a new sample* of N rows to meet the target.

`--confidence C` alone bounds the population value of precision or recall: the
value on infinitely many new rows. A user who checks the operating point on a
test split, or on a week of traffic, sees that sample's value, which scatters
around the population value; with a population value just above the target it
reads below the target about half the time. `--new-rows N` makes the guarantee
about that measured value: P(metric on N new rows >= target) >= C.

The error 1 - C is split, in shares fixed in advance, over three events (a
union bound), none of which may happen:

1. the population certificate is wrong (NOISE_SHARE of the error is left for
   the others; the certificate runs at level 1 - CERTIFICATE_SHARE (1 - C));
2. the new sample holds fewer than m_lo positives (recall) or predicted
   positives (precision): m_lo is the COUNT_SHARE / 2 quantile of
   Binomial(N, rate_lo), where rate_lo is a Clopper-Pearson lower bound, at
   COUNT_SHARE / 2, of the positive rate or of the cut's predicted-positive
   rate (fewest_predicted says why a per-cut bound is enough);
3. given m >= m_lo counted rows, the binomial true positives fall below
   target x m although the population rate reaches `required_rate`: at most
   NOISE_SHARE for every m >= m_lo.

So the population certificate is asked for `required_rate(m_lo)` instead of the
target. All of it is exact binomial arithmetic over every count, no normal
approximation. A new sample with no counted row (no positive, or nothing
predicted positive) counts as a miss.
"""

from __future__ import annotations

import functools
import math

import numpy as np

CERTIFICATE_SHARE = 0.5  # of 1 - C: the population certificate
COUNT_SHARE = 0.25  # of 1 - C: the counted rows of the new sample (half for the rate's bound, half for the draw)
NOISE_SHARE = 0.25  # of 1 - C: the binomial scatter of the true positives among them


def certificate_confidence(confidence: float) -> float:
    """The level the population certificate runs at."""
    return 1.0 - CERTIFICATE_SHARE * (1.0 - confidence)


def fewest_positives(new_rows: int, n_pos: int, n: int, confidence: float) -> int:
    """m_lo for recall: the positives a new sample of `new_rows` rows holds but for COUNT_SHARE x (1 - C), from
    the Clopper-Pearson lower bound of the positive rate among the `n` rows counted here."""
    from dmocli.operating_point.bounds import clopper_pearson_lower

    half = COUNT_SHARE / 2.0 * (1.0 - confidence)
    rate = float(clopper_pearson_lower(n_pos, n, 1.0 - half))
    return int(_lower_quantile(new_rows, np.array([rate]), half)[0])


def fewest_predicted(new_rows: int, predicted: np.ndarray, n: int, confidence: float) -> np.ndarray:
    """m_lo for precision, per cut: the rows a new sample of `new_rows` rows predicts positive but for
    COUNT_SHARE / 2 x (1 - C), from each cut's own Clopper-Pearson lower bound of its predicted-positive rate.

    The threshold is chosen after looking, yet a per-cut bound is enough: the fixed-sequence tests of precision
    (search.py) need each test valid at its own level, and a cut's test may wrongly pass only if its precision
    bound or its rate bound is wrong, so the rate bound's error (COUNT_SHARE / 2 x (1 - C), shared out over the
    sequences as the precision bound's is) is added to each test's level."""
    from dmocli.operating_point.bounds import FIXED_SEQUENCE_STARTS, clopper_pearson_lower

    half = COUNT_SHARE / 2.0 * (1.0 - confidence)
    rates = clopper_pearson_lower(predicted, np.full_like(predicted, n), 1.0 - half / FIXED_SEQUENCE_STARTS)
    return _lower_quantile(new_rows, rates, half)


def _lower_quantile(trials: int, rates: np.ndarray, share: float) -> np.ndarray:
    """The largest m with P(Binomial(trials, rate) < m) <= share, per rate (0 for a rate of 0)."""
    from scipy.stats import binom

    safe = np.where(rates > 0, rates, 0.5)
    return np.where(rates > 0, binom.ppf(share, trials, safe), 0).astype(np.int64)


def required_rates(fewest: np.ndarray, target: float, new_rows: int, confidence: float) -> np.ndarray:
    """required_rate of every count in `fewest` (each distinct count solved once)."""
    counts = np.asarray(fewest, dtype=np.int64)
    distinct, where = np.unique(counts, return_inverse=True)
    solved = np.array([required_rate(int(m), target, new_rows, confidence) for m in distinct])
    return solved[where].reshape(counts.shape)


def required_rate(fewest: int, target: float, new_rows: int, confidence: float) -> float:
    """The smallest population rate r with P(Binomial(m, r) < target x m) <= NOISE_SHARE x (1 - C) for every
    count m from `fewest` to `new_rows`; above 1 (nothing certifies) when `fewest` is 0."""
    if fewest <= 0:
        return math.inf
    return _required_rate(_on_grid(int(fewest)), float(target), int(new_rows), NOISE_SHARE * (1.0 - confidence))


def _on_grid(count: int) -> int:
    """`count` rounded down to every integer up to 100, then steps of 2 %: fewer counts to solve for, and a
    smaller count asks a higher rate, so the rounding errs on the safe side."""
    if count <= 100:
        return count
    return max(100, math.floor(100 * 1.02 ** math.floor(math.log(count / 100) / math.log(1.02) + 1e-9)))


@functools.lru_cache(maxsize=4096)
def _required_rate(fewest: int, target: float, new_rows: int, miss: float) -> float:
    if _misses(fewest, target, new_rows, np.nextafter(1.0, 0.0), miss):
        return math.inf  # even a rate of almost 1 misses too often at `fewest` rows
    low, high = target, 1.0
    for _ in range(40):  # bisection to about 1e-12
        middle = (low + high) / 2.0
        if _misses(fewest, target, new_rows, middle, miss):
            low = middle
        else:
            high = middle
    return high


def _misses(fewest: int, target: float, new_rows: int, rate: float, miss: float) -> bool:
    """Whether P(Binomial(m, rate) < target x m) exceeds `miss` for some count m in [fewest, new_rows]. Only
    counts below ln(1/miss) / KL(target || rate) can: the Chernoff bound exp(-m KL) caps the rest."""
    from scipy.stats import binom

    if rate <= target:
        return True
    divergence = target * math.log(target / rate) + (1 - target) * math.log((1 - target) / (1 - rate))
    last = min(new_rows, max(fewest, math.ceil(math.log(1.0 / miss) / divergence)))
    start, stop = fewest, fewest
    while start <= last:  # in doubling blocks: a rate that misses usually does so near `fewest`
        counts = np.arange(start, min(last, stop) + 1)
        needed = np.ceil(target * counts - 1e-9)  # true positives that meet the target
        if float(binom.cdf(needed - 1, counts, rate).max()) > miss:
            return True
        start, stop = int(counts[-1]) + 1, 2 * int(counts[-1]) + 1
    return False
