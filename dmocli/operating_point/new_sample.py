"""What a certificate must prove for the metric *measured on a new sample* of N rows to meet the target.

`--confidence C` alone bounds the population value of precision or recall: the
value on infinitely many new rows. A user who checks the operating point on a
test split, or on a week of traffic, sees that sample's value, which scatters
around the population value; with a population value just above the target it
reads below the target about half the time. `--new-rows N` makes the guarantee
about that measured value: P(metric on N new rows >= target) >= C.

The error 1 - C is split, in shares fixed in advance, over two events (a union
bound), neither of which may happen:

1. the new sample counts fewer than m_lo rows (its positives for recall, its
   predicted positives for precision): m_lo is the COUNT_SHARE / 2 quantile of
   Binomial(N, rate_lo), where rate_lo is a Clopper-Pearson lower bound, at
   COUNT_SHARE / 2, of the positive rate or of the cut's predicted-positive
   rate (fewest_predicted says why a per-cut bound is enough);
2. the new sample counts m >= m_lo rows and fewer than target x m of them are
   successes (true positives), yet the cut passed the exchangeable test below at
   level TEST_SHARE x (1 - C).

**The exchangeable test.** The n rows counted here at a cut and the m counted
in the new sample are exchangeable, so given the total T of successes among the
n + m, the successes K here are hypergeometric, Hyper(n + m, T, n). A miss
(X <= x_m = ceil(target x m) - 1 successes in the new sample) means
T <= k + x_m, so seeing k or more successes here has probability at most
P(K >= k | T = k + x_m), which must be at most the test's level for every m
from m_lo to N. One exact test covers both the scatter here and the new
sample's, where a population certificate followed by a separate binomial margin
paid for each on its own. For a recall cut at the k-th highest positive score
the same number is the exact, distribution-free probability that the new
sample's recall misses (ranks of exchangeable scores).

Evaluating every m up to N for every cut would be slow; over a block of counts
[m1, m2] the pool holds at most k + x_{m2} successes and at least n - k + m1 - x_{m1}
failures, and that pool's tail bounds every m in it (_tail), so a block is split only
where that bound is above the level (branch and bound); a single count is evaluated
exactly.
"""

from __future__ import annotations

import math

import numpy as np

COUNT_SHARE = 0.25  # of 1 - C: the counted rows of the new sample (half for the rate's bound, half for the draw)
TEST_SHARE = 0.75  # of 1 - C: the exchangeable test of the successes among them


def sequence_start_rates(target: float) -> list[float]:
    """The precisions whose records define where the fixed sequences of new-sample precision tests start (the
    first cut where such a record would pass; search.py): a perfect record, which small validation sets need but
    one negative among the top rows stops, and two records a model comfortably above the target passes with some
    negatives among its top-scored rows. Three, not the population certificate's two, because here the new
    sample's own scatter at a cut's small m_lo keeps any record short of perfect from passing until many rows
    are predicted positive: halfway between the target and 1 alone starts too late for a strong model."""
    return [1.0, (3.0 + target) / 4.0, (1.0 + target) / 2.0]


SEQUENCES = len(sequence_start_rates(0.5))  # each sequence's tests and rate bounds get an equal share


def exchangeable_level(confidence: float, sequences: int = 1) -> float:
    """The error each exchangeable test may make: TEST_SHARE of 1 - C, shared over the fixed sequences."""
    return TEST_SHARE * (1.0 - confidence) / sequences


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
    (search.py) need each test valid at its own level, and a cut's test may wrongly pass only if its exchangeable
    test or its rate bound is wrong, so the rate bound's error (COUNT_SHARE / 2 x (1 - C), shared out over the
    sequences as the test's is) is added to each test's level."""
    from dmocli.operating_point.bounds import clopper_pearson_lower

    half = COUNT_SHARE / 2.0 * (1.0 - confidence)
    rates = clopper_pearson_lower(predicted, np.full_like(predicted, n), 1.0 - half / SEQUENCES)
    return _lower_quantile(new_rows, rates, half)


def _lower_quantile(trials: int, rates: np.ndarray, share: float) -> np.ndarray:
    """The largest m with P(Binomial(trials, rate) < m) <= share, per rate (0 for a rate of 0)."""
    from scipy.stats import binom

    safe = np.where(rates > 0, rates, 0.5)
    return np.where(rates > 0, binom.ppf(share, trials, safe), 0).astype(np.int64)


def passes(
    trials: np.ndarray, successes: np.ndarray, *, fewest: np.ndarray, target: float, new_rows: int, level: float
) -> np.ndarray:
    """Per cut, whether `successes` out of `trials` counted here pass the exchangeable test (module docstring)
    for every count of the new sample from `fewest` to `new_rows`. A cut with no success, or a new sample that
    may count no row (`fewest` 0), never passes."""
    trials, successes, fewest = np.broadcast_arrays(
        np.asarray(trials, dtype=np.int64), np.asarray(successes, dtype=np.int64), np.asarray(fewest, dtype=np.int64)
    )
    shape = trials.shape
    trials, successes, fewest = trials.ravel(), successes.ravel(), fewest.ravel()
    out = np.zeros(trials.size, dtype=bool)
    open_cuts = np.flatnonzero((successes > 0) & (fewest > 0) & (fewest <= new_rows))
    if open_cuts.size:
        n, k, m_lo = trials[open_cuts], successes[open_cuts], fewest[open_cuts]
        # the first count, exactly: most failing cuts fail here
        first = _tail(n, k, first=m_lo, last=m_lo, target=target) <= level
        out[open_cuts[first]] = _every_count_passes(
            n[first], k[first], fewest=m_lo[first], target=target, new_rows=new_rows, level=level
        )
    return out.reshape(shape)


def least_successes(trials: int, *, fewest: int, target: float, new_rows: int, level: float) -> int | None:
    """The fewest successes out of `trials` that pass (more successes only pass more easily); None if none do."""
    from dmocli.operating_point.bounds import least_passing

    def passing(successes: int) -> bool:
        return bool(passes(trials, successes, fewest=fewest, target=target, new_rows=new_rows, level=level)[()])

    return least_passing(passing, 1, trials) if passing(trials) else None


def fewest_passing_trials(rate: float, *, fewest: int, target: float, new_rows: int, level: float) -> int | None:
    """The fewest rows counted here at which a success rate of `rate` passes (the new sample's m_lo held fixed):
    how many predicted positives or positives a certificate needs at the rate observed. None when no number of
    rows would do (the new sample's own scatter at m_lo already misses too often)."""
    from dmocli.operating_point.bounds import fewest_passing

    if not rate > target:
        return None

    def passing(trials: int) -> bool:
        return bool(
            passes(trials, math.floor(rate * trials), fewest=fewest, target=target, new_rows=new_rows, level=level)[()]
        )

    return fewest_passing(passing, 1 << 24)


def _every_count_passes(
    n: np.ndarray, k: np.ndarray, *, fewest: np.ndarray, target: float, new_rows: int, level: float
) -> np.ndarray:
    """Branch and bound over the new sample's counts, for many cuts at once: a block whose bound passes is done,
    a count that fails exactly fails its cut, and the other blocks are halved (one vectorized tail a round).

    The first blocks double in width from the fewest counts on (_first_blocks), where the tail is largest and
    changes fastest; with _tail's bound they settle most cuts in the first round (about 17 tails a passing cut
    for 1,000 new rows, where halving one block of every count with the looser bound of rows at their least
    took about a hundred)."""
    alive = np.ones(n.size, dtype=bool)
    owner, first, last = _first_blocks(fewest, new_rows)
    while owner.size:
        failed = _tail(n[owner], k[owner], first=first, last=last, target=target) > level
        alive[owner[failed & (first == last)]] = False
        split = failed & (first < last) & alive[owner]
        owner, first, last = owner[split], first[split], last[split]
        middle = (first + last) // 2
        owner, first, last = (
            np.concatenate([owner, owner]),
            np.concatenate([first, middle + 1]),
            np.concatenate([middle, last]),
        )
    return alive


def _first_blocks(fewest: np.ndarray, new_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner cut, first count, last count) of blocks of width 1, 2, 4, ... covering each cut's counts from
    `fewest` to `new_rows`."""
    widths = 1 << np.arange(max(new_rows, 1).bit_length() + 1)
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    first = fewest[:, None] + starts[None, :]
    last = np.minimum(first + widths[None, :] - 1, new_rows)
    kept = first <= new_rows
    owner = np.broadcast_to(np.arange(fewest.size)[:, None], first.shape)
    return owner[kept], first[kept], last[kept]


def _tail(n: np.ndarray, k: np.ndarray, *, first: np.ndarray, last: np.ndarray, target: float) -> np.ndarray:
    """P(K >= k) for K ~ Hyper(n + first + x_last - x_first, k + x_last, n), x_m = ceil(target x m) - 1: the
    exact miss bound at one count when first == last, an upper bound over the block otherwise.

    Over the block the pool of n + m rows holds k + x_m successes and n - k + m - x_m failures; the successes
    are at most k + x_last and the failures at least n - k + first - x_first (m - x_m never falls as m grows),
    and the tail grows with the successes and falls with the failures, so that pool bounds every count in the
    block. Keeping the failures, not the rows, at their least is what lets a wide block pass."""
    from scipy.stats import hypergeom

    misses_first, misses_last = _misses(first, target), _misses(last, target)
    successes = k + misses_last
    population = n + first + misses_last - misses_first
    return hypergeom.sf(k - 1, population, successes, n)


def _misses(counts: np.ndarray, target: float) -> np.ndarray:
    """x_m: the most successes a new sample of m counted rows may hold and still miss the target."""
    return np.ceil(target * counts - 1e-9).astype(np.int64) - 1
