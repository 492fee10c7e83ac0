"""What `dmo threshold --adapt NEW | --prior R --confidence C --new-rows N` certifies: the metric measured on the
next N rows at the new positive rate, not its population value there.

A test split or a week of traffic of a few dozen positives scatters far around the population precision, so a
cut certified for the population at the rate's low end still reads below the target on such a sample about as
often as not when its population precision sits near the target. train's `--new-rows` (new_sample.py) answers
this with one exchangeable test of the held-out rows against the new ones; under label shift the two are not
exchangeable as wholes (their mix of classes differs), but each class is: the held-out positives with the new
sample's positives, the held-out negatives with its negatives (the class-conditional score distributions are what
label shift keeps). So the precision test is built per class.

Let r_lo be a lower bound of the new rate (the rate interval's low end when it is estimated, the rate itself when
given), M the new sample's positives. The sample's error budget is split, in shares fixed in advance:

1. COUNT_SHARE: M < m_lo, m_lo the COUNT_SHARE quantile of Binomial(N, r_lo) (one event for every cut). A sample
   with more positives only does better (its first m_lo positives are a sample of m_lo positives, the further
   ones add true positives, and its N - M negatives are part of N - m_lo: a coupling), so each cut is judged
   with m_lo positives and N - m_lo negatives.
2. The rest, over the fixed sequences: at a cut with tp of the n_pos held-out positives and fp of the n_neg
   negatives above it, the new sample's true positives are Beta-binomial(m_lo, tp + 1, n_pos - tp + 1) and its
   false positives Beta-binomial(N - m_lo, fp + 1, n_neg - fp + 1), independent: the posterior predictive under a
   uniform prior (outlook.py's, per class). The cut passes when the probability of a miss, TP (1 - a) < a FP (no
   true positive at all is a miss), is at most the level.

This is a predictive probability, not an exact frequentist bound. The exact version (per-class exchangeable
prediction bounds, hypergeometric as new_sample.py's, joined by a union bound) answered none of 10 simulated
curves at 5,000 new rows, where the predictive answers most; tests/operating_point/test_adapted_sample.py measures the
predictive's coverage over held-out curves and new samples drawn from known distributions.

Precision is not monotone in the threshold, so the cuts are tested in search.py's fixed sequences (from label-free
starts: the first cut where a record at each of new_sample.sequence_start_rates of the target mapped to the
held-out rate would pass). Recall (FROP) does not depend on the negatives: new_sample.py's exact exchangeable
recall test over every count of new positives from m_lo to N applies as it is.
"""

from __future__ import annotations

import numpy as np

from dmocli.operating_point.bounds import first_holding
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.new_sample import SEQUENCES, least_successes, sequence_start_rates

COUNT_SHARE = 0.2  # of the sample's error: too few positives in the new sample; the rest goes to the tests
CHUNK = 32  # cuts first tested at a time: a sequence ends at its first failure, so most cuts are never tested
ELEMENTS = 1 << 22  # the most (cut, count) terms one chunk's test holds at once (32 MB of float64 a matrix)


def fewest_new_positives(new_rows: int, rate_low: float, error: float) -> int:
    """m_lo: the positives N new rows at a rate of at least `rate_low` hold but for COUNT_SHARE x `error`."""
    from scipy.stats import binom

    return int(binom.ppf(COUNT_SHARE * error, new_rows, rate_low)) if rate_low > 0 else 0


def certified_precision_cuts(
    curve: ScoreCurve, *, target: float, mapped_target: float, rate_low: float, new_rows: int, error: float
) -> np.ndarray:
    """Per cut of `curve` (the empty cut first, as search.py indexes them), whether the fixed sequences certify
    that the precision measured on `new_rows` new rows at a rate of at least `rate_low` reaches `target`, with
    the sample's error at most `error` (module docstring). `mapped_target` is the target at the curve's own rate,
    where the label-free starts are found."""
    tp = np.concatenate(([0], curve.tp)).astype(np.int64)
    fp = np.concatenate(([0], curve.fp)).astype(np.int64)
    m_lo = fewest_new_positives(new_rows, rate_low, error)
    certified = np.zeros(tp.size, dtype=bool)
    if m_lo == 0:
        return certified
    test = _PrecisionTest(
        int(curve.n_pos), int(curve.n_neg), m_pos=m_lo, m_neg=new_rows - m_lo, target=target, level=_test_level(error)
    )
    predicted = tp + fp
    largest = max(1, ELEMENTS // test.width)  # a chunk's cuts: memory stays bounded however large N is
    for rate in sequence_start_rates(mapped_target):
        record = np.minimum(np.floor(predicted * rate + 1e-9).astype(np.int64), curve.n_pos)
        start = first_holding(
            0,
            tp.size,
            lambda cuts, r=record: test.passes(r[cuts], predicted[cuts] - r[cuts]),
            smallest=CHUNK,
            largest=largest,
        )
        end = first_holding(
            start, tp.size, lambda cuts: ~test.passes(tp[cuts], fp[cuts]), smallest=CHUNK, largest=largest
        )
        certified[start:end] = True
    return certified


def best_certified_cut(
    curve: ScoreCurve, *, target: float, mapped_target: float, rate_low: float, new_rows: int, error: float
) -> int | None:
    """The certified cut with the most recall (ties to the higher precision, then the higher threshold), as an
    index for curve.cut_threshold; None when no cut that predicts a positive is certified."""
    ok = certified_precision_cuts(
        curve, target=target, mapped_target=mapped_target, rate_low=rate_low, new_rows=new_rows, error=error
    )
    tp = np.concatenate(([0], curve.tp))
    ok &= tp > 0
    if not ok.any():
        return None
    predicted = np.maximum(tp + np.concatenate(([0], curve.fp)), 1)
    candidates = np.flatnonzero(ok & (tp == tp[ok].max()))
    return int(candidates[np.argmax(tp[candidates] / predicted[candidates])]) - 1


def recall_passes(curve: ScoreCurve, *, tp: int, target: float, rate_low: float, new_rows: int, error: float) -> bool:
    """Whether `tp` of the curve's positives above a cut certify recall >= `target` measured on `new_rows` new
    rows at a rate of at least `rate_low`: new_sample.py's exchangeable test over every count of new positives
    from m_lo to `new_rows` (recall falls with the threshold: no selection among cuts)."""
    m_lo = fewest_new_positives(new_rows, rate_low, error)
    if m_lo == 0:
        return False
    level = (1.0 - COUNT_SHARE) * error
    least = least_successes(int(curve.n_pos), fewest=m_lo, target=target, new_rows=new_rows, level=level)
    return least is not None and tp >= least


def _test_level(error: float) -> float:
    """Each precision test's level: the tests' share of the error, over the fixed sequences."""
    return (1.0 - COUNT_SHARE) * error / SEQUENCES


class _PrecisionTest:
    """The per-cut test: the predictive probability that `m_pos` new positives and `m_neg` new negatives miss."""

    def __init__(self, n_pos: int, n_neg: int, *, m_pos: int, m_neg: int, target: float, level: float):
        self.n_pos, self.n_neg, self.m_pos, self.m_neg = n_pos, n_neg, m_pos, m_neg
        self.target, self.level = target, level
        x = np.arange(m_pos + 1)
        # A sample with x true positives misses when its false positives reach the least y with a y > (1 - a) x:
        # y > (1 - a) x / a; x = 0 misses whatever y is (no precision at all).
        self.x = x
        self.least_missing = np.where(x > 0, np.floor((1.0 - target) * x / target + 1e-9).astype(np.int64) + 1, 0)
        self.width = x.size + min(int(self.least_missing.max()), m_neg) + 1  # the terms one cut's test sums

    def passes(self, tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
        """Whether held-out counts (tp, fp) above a cut certify the new sample's precision, per cut."""
        return self.miss_probability(tp, fp) <= self.level

    def miss_probability(self, tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
        """P(TP (1 - a) < a FP) on the new sample, TP ~ BetaBinomial(m_pos, tp + 1, n_pos - tp + 1) and FP ~
        BetaBinomial(m_neg, fp + 1, n_neg - fp + 1) independent, per cut. FP's distribution is needed only up to
        the most false positives a miss can start at, (1 - a) m_pos / a + 1: a cumulative sum of its terms."""
        tp = np.asarray(tp, dtype=np.int64)[:, None]
        fp = np.asarray(fp, dtype=np.int64)[:, None]
        p_x = _beta_binomial_pmf(self.x[None, :], self.m_pos, tp + 1, self.n_pos - tp + 1)
        y = np.arange(min(int(self.least_missing.max()), self.m_neg) + 1)
        below = np.cumsum(_beta_binomial_pmf(y[None, :], self.m_neg, fp + 1, self.n_neg - fp + 1), axis=1)
        reach = np.minimum(self.least_missing, self.m_neg + 1)  # more than m_neg false positives: never a miss
        at_most = np.where(reach > 0, np.take(below, np.minimum(reach, y.size) - 1, axis=1), 0.0)
        missing = np.where(reach > self.m_neg, 0.0, 1.0 - at_most)
        return np.minimum((p_x * np.maximum(missing, 0.0)).sum(axis=1), 1.0)


def _beta_binomial_pmf(k: np.ndarray, m: int, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Beta-binomial(m, alpha, beta) probabilities of k, from log-gamma terms (scipy's betabinom sums its cdf
    term by term, too slow for a matrix of cuts by counts)."""
    from scipy.special import betaln, gammaln

    log_choose = gammaln(m + 1.0) - gammaln(k + 1.0) - gammaln(m - k + 1.0)
    return np.exp(log_choose + betaln(k + alpha, m - k + beta) - betaln(alpha, beta))
