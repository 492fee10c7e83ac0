"""The positive rate of unlabeled new rows under label shift, with an interval, from the model's stored held-out
curve alone (issue 35).

Label shift: the positive rate moves from the training rate pi to r, the score distribution of each class does
not. Every interval here has two sources of error: the new rows (a sample of the new population) and the stored
curve (a finite sample of the held-out population, whose TPR, FPR and class means are estimates too). One bootstrap
resamples both (`CurveReplicates`); the metrics at a threshold (expected.py) reuse the rate's replicates, so their
intervals carry the rate's uncertainty and its correlation with the curve's. A bootstrap of few new rows cannot
show their own spread (one row resamples to itself: an interval of width zero), so every interval also holds an
exact one: the Clopper-Pearson interval of the new rows flagged at a cut, mapped through the rate formula
(exact_rate_interval). A section too small for that interval ever to exclude the training rate says nothing of
its rate (`rows_needed`).

Decisions are `logit >= threshold`, compared as the model file compares them (a Python float against the
scores' own type).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dmocli.constraints import failure
from dmocli.errors import DmoError
from dmocli.operating_point.bounds import clopper_pearson_lower, clopper_pearson_upper
from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import safe_div
from dmocli.options import CONFIDENCE
from dmocli.shift.at_rate import flagged_share

METHODS = ("cc", "acc", "pacc", "emq")
DEFAULT_METHOD = "pacc"  # the simulation in bench/label_shift.py decided it; estimate_prevalence says why
REPLICATES = 200  # bootstrap replicates: the 2.5% and 97.5% quantiles rest on 5 replicates each
BINS = 256  # score bins of the bootstrap: half at count quantiles, half evenly spaced in logit
_TINY = 1e-12


@dataclass(frozen=True)
class CurveReplicates:
    """Bootstrap replicates of the stored curve, kept as counts in bins of its scores.

    The positives and the negatives are resampled apart (multinomially, P and N held: the held-out split fixes
    them), over contiguous bins of curve points. Given a bin's resampled count, the rows above a threshold inside
    it are binomial with the bin's original share above it, so the counts above any threshold are drawn exactly
    as a row-level resample would give them, in O(B) instead of O(B * M).

    Attributes
    ----------
    curve : HeldOutCurve
        The curve resampled.
    starts : ndarray of int64, shape (K + 1,)
        Bin k holds curve points starts[k] .. starts[k + 1] - 1; starts[K] = M.
    positives, negatives : ndarray of int64, shape (B, K)
        Resampled positive and negative rows per bin, one row per replicate.
    seed : int
        Seeds the binomial split of the bin holding a threshold, so repeated calls agree.
    """

    curve: HeldOutCurve
    starts: np.ndarray
    positives: np.ndarray
    negatives: np.ndarray
    seed: int

    @classmethod
    def draw(cls, curve: HeldOutCurve, replicates: int, rng: np.random.Generator, seed: int) -> "CurveReplicates":
        """`replicates` resamples of `curve`'s positives and negatives."""
        starts = _bin_starts(curve.scores, curve.positives + curve.negatives)
        positives = np.add.reduceat(curve.positives, starts[:-1])
        negatives = np.add.reduceat(curve.negatives, starts[:-1])
        return cls(
            curve,
            starts,
            rng.multinomial(curve.n_pos, positives / curve.n_pos, size=replicates),
            rng.multinomial(curve.n_neg, negatives / curve.n_neg, size=replicates),
            seed,
        )

    def bin_means(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, the mean of `values` (M,) over the original positives and over the original negatives, shape
        (K,) each (0 in a bin without rows of the class: no replicate draws any there)."""
        curve, first = self.curve, self.starts[:-1]
        return (
            safe_div(np.add.reduceat(curve.positives * values, first), np.add.reduceat(curve.positives, first)),
            safe_div(np.add.reduceat(curve.negatives * values, first), np.add.reduceat(curve.negatives, first)),
        )

    def counts_at(self, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(TP, FP) of every replicate at `score >= threshold`, shape (B,) each."""
        first = self.curve.first_at(threshold)
        k = int(np.searchsorted(self.starts, first, side="right")) - 1  # the bin holding point `first`
        rng = np.random.default_rng((self.seed, first))
        return (
            self._above(self.positives, self.curve.positives, first=first, k=k, rng=rng),
            self._above(self.negatives, self.curve.negatives, first=first, k=k, rng=rng),
        )

    def _above(
        self, resampled: np.ndarray, counts: np.ndarray, *, first: int, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Resampled rows from point `first` on: the bins above bin k whole, bin k's part by a binomial split."""
        if k >= resampled.shape[1]:
            return np.zeros(resampled.shape[0], dtype=np.int64)
        whole = resampled[:, k + 1 :].sum(axis=1)
        in_bin = counts[self.starts[k] : self.starts[k + 1]].sum()
        share = counts[first : self.starts[k + 1]].sum() / in_bin if in_bin else 0.0
        return whole + rng.binomial(resampled[:, k], share)


@dataclass(frozen=True)
class PrevalenceEstimate:
    """The positive rate of new rows with its bootstrap interval.

    Attributes
    ----------
    rate, low, high : float
        Point estimate and two-sided interval at `confidence`, all in [0, 1].
    method : str
        One of METHODS.
    iterations : int
        Newton steps EMQ took to its fixed point (0 for the closed-form methods).
    confidence : float
        The interval's level.
    threshold : float or None
        The cut cc and acc counted at (None for pacc and emq, which use every score).
    replicates : ndarray, shape (B,)
        The rate in each bootstrap replicate; row b goes with row b of `curve_replicates`.
    curve_replicates : CurveReplicates
        The curve resamples the replicates used, for the metrics at a threshold (metrics_under_label_shift).
    rows : int
        The new rows the estimate rests on.
    rows_needed : int
        The fewest new rows whose exact interval could exclude the training rate both ways (all rows flagged at the
        cut, or none): fewer say nothing of the rate (exact_rate_interval).
    """

    rate: float
    low: float
    high: float
    method: str
    iterations: int
    confidence: float
    threshold: float | None
    replicates: np.ndarray = field(repr=False)
    curve_replicates: CurveReplicates = field(repr=False)
    rows: int = 0
    rows_needed: int = 0

    @property
    def usable(self) -> float:
        """The rate to move a threshold for: `rate` within half a row of 0 and 1 (usable_rate). The one estimate
        serves both of its readers: `dmo monitor` reports `rate` as estimated (an estimate of 0 says the rows show
        fewer positives than they can count), `dmo threshold --adapt` re-targets for `usable` (at exactly 0 no cut
        has any precision to search for)."""
        return usable_rate(self.rate, self.rows)

    @property
    def too_few_rows(self) -> bool:
        """Whether the rows are too few for any outcome of theirs to tell their rate from the training rate."""
        return self.rows < self.rows_needed

    def to_dict(self) -> dict:
        return {
            "rate": self.rate,
            "interval": [self.low, self.high],
            "method": self.method,
            "iterations": self.iterations,
            "confidence": self.confidence,
            "threshold": self.threshold,
            "replicates": int(self.replicates.size),
        }


def _both_classes(curve: HeldOutCurve) -> None:
    """TPR and FPR, which every estimate here rests on, need held-out rows of both classes."""
    if curve.n_pos == 0 or curve.n_neg == 0:
        raise DmoError("the held-out curve has rows of one class only: TPR and FPR, and so any rate, need both")


def estimate_prevalence(
    curve: HeldOutCurve,
    new_scores: np.ndarray,
    calibration: Calibration | None,
    confidence: float = 0.95,
    *,
    method: str = DEFAULT_METHOD,
    threshold: float | None = None,
    replicates: int = REPLICATES,
    seed: int = 0,
) -> PrevalenceEstimate:
    """The positive rate of unlabeled new rows under label shift, with an interval: `method` one of METHODS
    (cc, acc, pacc, emq), `threshold` the cut of cc and acc (by default the curve's largest TPR - FPR, where acc
    is most precise), the interval a percentile bootstrap of `replicates` draws over the new rows and the curve
    together (seeded by `seed`), so the curve's own uncertainty is carried, not only the new rows'. What each
    method does, and the simulation (bench/label_shift.py) that made pacc the default because its coverage holds
    whatever the Platt map: docs/monitoring.md#how-the-positive-rate-is-estimated. The interval holds the exact one
    of exact_rate_interval too, so it keeps its level on few new rows, where a bootstrap of them collapses."""
    _both_classes(curve)
    if method not in METHODS:
        raise DmoError(f"prevalence method {method!r} is not known (use one of {', '.join(METHODS)})")
    problem = failure(f"confidence {confidence}", confidence, CONFIDENCE)
    if problem is not None:
        raise DmoError(problem)
    if replicates < 1:
        raise DmoError(f"replicates {replicates} must be at least 1")
    new_scores = checked_scores(new_scores)
    if method in ("cc", "acc") and threshold is None:
        threshold = _youden_threshold(curve)
    rng = np.random.default_rng(seed)
    resampled = CurveReplicates.draw(curve, replicates, rng, seed)
    evidence = _Evidence(curve, resampled, new_scores, calibration or Calibration.identity(""), threshold, rng)
    rate, rates, iterations = _ESTIMATORS[method](evidence)
    low, high = percentile_interval(rates, confidence)
    exact = exact_rate_interval(curve, new_scores, confidence, cut=threshold)
    if method != "cc":  # cc reports the flagged share itself, not a rate through the curve
        low, high = min(low, exact.low), max(high, exact.high)
    return PrevalenceEstimate(
        rate=float(rate),
        low=low,
        high=high,
        method=method,
        iterations=iterations,
        confidence=confidence,
        threshold=None if method in ("pacc", "emq") else float(threshold),
        replicates=rates,
        curve_replicates=resampled,
        rows=int(new_scores.size),
        rows_needed=exact.rows_needed,
    )


@dataclass(frozen=True)
class ExactRate:
    """The rate interval of exact_rate_interval, and the fewest rows for which it could exclude the training rate."""

    low: float
    high: float
    rows_needed: int


def exact_rate_interval(
    curve: HeldOutCurve, new_scores: np.ndarray, confidence: float, *, cut: float | None = None
) -> ExactRate:
    """The new rows' rate from the share they flag at `cut` (by default the curve's largest TPR - FPR), with no
    large-sample assumption: the flagged count is binomial(N, q) under label shift, q = r TPR + (1 - r) FPR, so the
    two-sided Clopper-Pearson interval of q at `confidence`, mapped through r = (q - FPR) / (TPR - FPR) with the
    curve's TPR and FPR there, covers r at least as often whatever N (one row: about [0, 1]). It leaves out the
    curve's own error, which the bootstrap carries and which matters only where N is large.

    `rows_needed`: the fewest N for which both extremes (no row flagged, every row flagged) give an interval
    without the training rate; a section of fewer rows can never tell its rate from the training one."""
    cut = _youden_threshold(curve) if cut is None else cut
    n = int(new_scores.size)
    flagged = int(np.count_nonzero(new_scores >= float(cut)))
    tp, fp = curve.counts_at(cut)
    tpr, fpr = tp / curve.n_pos, fp / curve.n_neg
    side = 1.0 - (1.0 - confidence) / 2.0
    q_low = float(clopper_pearson_lower(flagged, n, side))
    q_high = float(clopper_pearson_upper(flagged, n, side))
    low, high = (float(v) for v in _adjust(np.array([q_low, q_high]), tpr, fpr))
    return ExactRate(low, high, _rows_needed(flagged_share(curve.rate, tpr, fpr), 1.0 - side))


def _rows_needed(share: float, tail: float) -> int:
    """The fewest N with tail**(1/N) > max(share, 1 - share): then none of N rows flagged puts the upper bound of
    the flagged share below `share` (the training rate's), and all of them the lower bound above it."""
    widest = max(share, 1.0 - share)
    if not 0.0 < widest < 1.0:
        return 1
    return int(math.floor(math.log(tail) / math.log(widest))) + 1


@dataclass(frozen=True)
class _Evidence:
    """What every estimator reads: the curve and its replicates, the new rows, the map, the cut, the generator."""

    curve: HeldOutCurve
    resampled: CurveReplicates
    new_scores: np.ndarray
    calibration: Calibration
    threshold: float | None
    rng: np.random.Generator

    @property
    def replicates(self) -> int:
        return self.resampled.positives.shape[0]

    def new_share(self) -> tuple[float, np.ndarray]:
        """Share of new rows at `logit >= threshold`, and its replicates (binomial: exact for that count)."""
        n = self.new_scores.size
        share = np.count_nonzero(self.new_scores >= float(self.threshold)) / n
        return share, self.rng.binomial(n, share, self.replicates) / n

    def new_bins(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The new rows' counts in BINS score bins, resampled (B, K), and each bin's mean of `values` (N,) (K,)."""
        edges = _bin_edges(self.new_scores, None)
        index = np.searchsorted(edges, self.new_scores, side="right")
        counts = np.bincount(index, minlength=edges.size + 1)
        resampled = self.rng.multinomial(self.new_scores.size, counts / self.new_scores.size, size=self.replicates)
        return resampled, safe_div(np.bincount(index, weights=values, minlength=edges.size + 1), counts)


def _classify_and_count(evidence: _Evidence) -> tuple[float, np.ndarray, int]:
    share, shares = evidence.new_share()
    return share, shares, 0


def _adjusted_count(evidence: _Evidence) -> tuple[float, np.ndarray, int]:
    curve = evidence.curve
    share, shares = evidence.new_share()
    tp, fp = curve.counts_at(evidence.threshold)
    tps, fps = evidence.resampled.counts_at(evidence.threshold)
    rate = _adjust(share, tp / curve.n_pos, fp / curve.n_neg)
    return rate, _adjust(shares, tps / curve.n_pos, fps / curve.n_neg), 0


def _probabilistic_adjusted_count(evidence: _Evidence) -> tuple[float, np.ndarray, int]:
    curve, resampled = evidence.curve, evidence.resampled
    p_curve = evidence.calibration.probability(curve.scores)
    positive_mean = float(curve.positives @ p_curve) / curve.n_pos
    negative_mean = float(curve.negatives @ p_curve) / curve.n_neg
    p_new = evidence.calibration.probability(evidence.new_scores)
    rate = _adjust(float(p_new.mean()), positive_mean, negative_mean)
    p_pos, p_neg = resampled.bin_means(p_curve)
    new_counts, p_bins = evidence.new_bins(p_new)
    new_means = new_counts @ p_bins / evidence.new_scores.size
    rates = _adjust(new_means, resampled.positives @ p_pos / curve.n_pos, resampled.negatives @ p_neg / curve.n_neg)
    return rate, rates, 0


def _expectation_maximization(evidence: _Evidence) -> tuple[float, np.ndarray, int]:
    curve, resampled, calibration = evidence.curve, evidence.resampled, evidence.calibration
    p_new = calibration.probability(evidence.new_scores)[None, :]
    rate, iterations = _emq_rate(p_new, np.ones_like(p_new), curve.rate)
    slopes, intercepts = _refit_platt(resampled)
    new_counts, new_logits = evidence.new_bins(evidence.new_scores.astype(np.float64))
    slopes = calibration.slope + slopes[1:] - slopes[0]  # each replicate moves the map as its refit moved
    intercepts = calibration.intercept + intercepts[1:] - intercepts[0]
    p_replicates = _sigmoid(slopes[:, None] * new_logits[None, :] + intercepts[:, None])
    rates, _ = _emq_rate(p_replicates, new_counts.astype(np.float64), curve.rate)
    return float(rate[0]), rates, iterations


_ESTIMATORS: dict[str, Callable[[_Evidence], tuple[float, np.ndarray, int]]] = {
    "cc": _classify_and_count,
    "acc": _adjusted_count,
    "pacc": _probabilistic_adjusted_count,
    "emq": _expectation_maximization,
}


def _adjust(observed, positive_level, negative_level):
    """(observed - negative) / (positive - negative) clipped to [0, 1]: the rate r at which a mixture
    r * positive + (1 - r) * negative gives `observed`. A replicate whose classes do not separate (denominator
    <= 0) lands on 0 or 1, which widens the interval rather than hide that the curve cannot tell them apart."""
    spread = np.maximum(np.asarray(positive_level) - np.asarray(negative_level), _TINY)
    return np.clip((np.asarray(observed) - np.asarray(negative_level)) / spread, 0.0, 1.0)


def _emq_rate(p: np.ndarray, weights: np.ndarray, prior: float, tol: float = 1e-10) -> tuple[np.ndarray, int]:
    """The fixed point of Saerens et al.'s EM for each row of `p`.

    EM's update q <- mean_i q*a_i / (q*a_i + (1-q)*b_i), with a_i = p_i / pi and b_i = (1 - p_i) / (1 - pi),
    stops where sum_i w_i (a_i - b_i) / (b_i + q (a_i - b_i)) = 0: the score of the log-likelihood
    sum_i w_i log(q a_i + (1-q) b_i), which is concave in q. Newton steps inside a shrinking bracket reach it
    in a handful of iterations; the ends 0 and 1 are the answer when the score does not change sign.

    Parameters
    ----------
    p : ndarray, shape (B, K)
        Calibrated probabilities at the training prior, one row per problem.
    weights : ndarray, shape (B, K)
        Rows behind each probability.
    prior : float
        The training positive rate pi.

    Returns
    -------
    rates : ndarray, shape (B,)
    iterations : int
        Newton steps of the slowest row.
    """
    p = np.clip(p, _TINY, 1.0 - _TINY)
    b = (1.0 - p) / (1.0 - prior)
    d = p / prior - b

    def score(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ratio = d / (b + q[:, None] * d)
        return np.sum(weights * ratio, axis=1), -np.sum(weights * ratio * ratio, axis=1)

    low, high = np.zeros(p.shape[0]), np.ones(p.shape[0])
    q = np.clip(np.sum(weights * p, axis=1) / np.sum(weights, axis=1), 0.01, 0.99)
    iterations = 0
    while iterations < 100:
        iterations += 1
        gradient, curvature = score(q)
        rising = gradient > 0
        low, high = np.where(rising, q, low), np.where(rising, high, q)
        step = q - gradient / np.minimum(curvature, -_TINY)
        step = np.where((step > low) & (step < high), step, (low + high) / 2)
        converged = np.abs(step - q) < tol
        q = step
        if converged.all():
            break
    at_ends = np.where(score(np.zeros_like(q))[0] <= 0, 0.0, np.where(score(np.ones_like(q))[0] >= 0, 1.0, q))
    return at_ends, iterations


def _refit_platt(resampled: CurveReplicates, steps: int = 25) -> tuple[np.ndarray, np.ndarray]:
    """Platt's (slope, intercept) fitted on the binned curve (row 0) and on each replicate (rows 1..B).

    A vectorized Newton fit of the label on the bins' mean logits, so that the bootstrap carries the map's own
    uncertainty: with few held-out positives the intercept is uncertain, and EMQ's rate moves with it.
    Binning shifts the fit a little; the replicates are used as moves from row 0, so the shift cancels.
    """
    z_pos, z_neg = resampled.bin_means(resampled.curve.scores.astype(np.float64))
    first = resampled.starts[:-1]
    w_pos = np.vstack([np.add.reduceat(resampled.curve.positives, first), resampled.positives]).astype(np.float64)
    w_neg = np.vstack([np.add.reduceat(resampled.curve.negatives, first), resampled.negatives]).astype(np.float64)
    slope, intercept = np.ones(w_pos.shape[0]), np.zeros(w_pos.shape[0])
    for _ in range(steps):
        p_pos = _sigmoid(slope[:, None] * z_pos + intercept[:, None])
        p_neg = _sigmoid(slope[:, None] * z_neg + intercept[:, None])
        r_pos, r_neg = w_pos * (1.0 - p_pos), w_neg * p_neg
        g_slope = r_pos @ z_pos - r_neg @ z_neg
        g_intercept = r_pos.sum(axis=1) - r_neg.sum(axis=1)
        h_pos, h_neg = w_pos * p_pos * (1.0 - p_pos), w_neg * p_neg * (1.0 - p_neg)
        h_ss = h_pos @ (z_pos * z_pos) + h_neg @ (z_neg * z_neg)
        h_si = h_pos @ z_pos + h_neg @ z_neg
        h_ii = h_pos.sum(axis=1) + h_neg.sum(axis=1)
        det = np.maximum(h_ss * h_ii - h_si * h_si, _TINY)
        slope = slope + np.clip((h_ii * g_slope - h_si * g_intercept) / det, -1.0, 1.0)
        intercept = intercept + np.clip((h_ss * g_intercept - h_si * g_slope) / det, -1.0, 1.0)
    return slope, intercept


def _youden_threshold(curve: HeldOutCurve) -> float:
    """The cut of the curve with the largest TPR - FPR (ties to the higher threshold)."""
    scored = curve.score_curve()
    return scored.cut_threshold(int(np.argmax(scored.tp / scored.n_pos - scored.fp / scored.n_neg)))


def _bin_edges(scores: np.ndarray, weights: np.ndarray | None, bins: int = BINS) -> np.ndarray:
    """Interior bin edges: half at (weighted) count quantiles, so every bin holds rows, half evenly spaced in
    logit, so that the sparse tails, where the probabilities change fastest, are not lumped into one bin."""
    levels = np.linspace(0.0, 1.0, bins // 2 + 1)[1:-1]
    if weights is None:
        quantiles = np.quantile(scores, levels)
    else:
        cumulative = np.cumsum(weights)
        quantiles = scores[np.minimum(np.searchsorted(cumulative, levels * cumulative[-1]), scores.size - 1)]
    even = np.linspace(float(scores.min()), float(scores.max()), bins // 2 + 1)[1:-1]
    return np.unique(np.concatenate([quantiles, even]).astype(np.float64))


def _bin_starts(scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Contiguous bins of the ascending curve points, as start indices (K + 1,), ending with M: one point a
    bin when there are at most BINS points (then the bootstrap is exactly row-level)."""
    if scores.size <= BINS:
        return np.arange(scores.size + 1)
    index = np.searchsorted(_bin_edges(scores, weights), scores, side="right")
    return np.concatenate(([0], np.flatnonzero(np.diff(index)) + 1, [scores.size]))


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The two-sided percentile interval of bootstrap replicates at `confidence`."""
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def checked_scores(scores: np.ndarray) -> np.ndarray:
    """New rows' logits as a 1-D float array, refused when empty or not finite (no estimate can rest on them)."""
    scores = np.asarray(scores)
    if scores.dtype not in (np.float32, np.float64):
        scores = scores.astype(np.float64)
    if scores.ndim != 1 or scores.size == 0 or not np.isfinite(scores).all():
        raise DmoError("new scores must be a non-empty 1-D array of finite logits")
    return scores


def usable_rate(rate: float, rows: int) -> float:
    """An estimated rate as a rate to re-target for: within half a row of 0 and 1 (an estimate clipped to 0 means
    fewer positives than the sample can show, not none at all; at exactly 0 no cut has any precision)."""
    floor = 0.5 / max(rows, 1)
    return float(min(max(rate, floor), 1.0 - floor))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))
