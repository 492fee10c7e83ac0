"""The figures' data of a binary split, kept in a report (its `figures`) so that a page drawn later from the report
JSON alone (`dmo report eval.json`) shows what `--html` showed at the run: the precision-recall curve thinned to at
most CURVE_POINTS cuts, the reliability bins of the probabilities, and the score histogram per class.

Everything is counts and cut values, so a reader derives precision, recall, F-beta and their Clopper-Pearson
intervals at every point exactly, and the same rows give the same numbers (no sampling, no clock).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dmocli.operating_point.calibration import CALIBRATION_BINS, Calibration, probability
from dmocli.operating_point.curve import ScoreCurve
from dmocli.report import ReportRecord

CURVE_POINTS = 200  # cuts kept of the tie-grouped curve: enough for a smooth line, a few kilobytes of JSON
HISTOGRAM_BINS = 30  # equal-width bins of the logits between the lowest and the highest
DIGITS = 7  # significant digits a cut value or a probability is written with: the JSON stays short, the page exact


@dataclass(frozen=True, kw_only=True)
class CurvePoints(ReportRecord):
    """Cuts of the precision-recall curve, highest score first: each cut's logit (`threshold`, predict positive at or
    above it), its calibrated probability, and the true and false positives it flags (lists of equal length)."""

    threshold: list[float]
    probability: list[float]
    tp: list[int]
    fp: list[int]


@dataclass(frozen=True, kw_only=True)
class ReliabilityBins(ReportRecord):
    """The probabilities in CALIBRATION_BINS equal-width bins (the bins of the split's ECE): each bin's rows, positive
    rows and mean probability (None for an empty bin)."""

    rows: list[int]
    positives: list[int]
    mean_probability: list[float | None]


@dataclass(frozen=True, kw_only=True)
class ScoreHistogram(ReportRecord):
    """The logits per class in equal-width bins: the edges (one more than the bins) and each bin's negative and
    positive rows."""

    edges: list[float]
    negatives: list[int]
    positives: list[int]


@dataclass(frozen=True, kw_only=True)
class ScoreFigures(ReportRecord):
    """A binary split's figures' data (report `score_figures`)."""

    curve: CurvePoints
    reliability: ReliabilityBins
    histogram: ScoreHistogram

    @classmethod
    def of(cls, logits: np.ndarray, y: np.ndarray, calibration: Calibration | None) -> ScoreFigures | None:
        """The figures of labeled rows' logits (labels 0/1); None without rows."""
        if logits.size == 0:
            return None
        return cls(
            curve=_curve(logits, y, calibration),
            reliability=_reliability(probability(logits, calibration), y),
            histogram=_histogram(np.asarray(logits, dtype=np.float64), y),
        )


def _short(values: np.ndarray) -> list[float]:
    """Floats written with DIGITS significant digits (a figure needs no more, and the JSON stays short)."""
    return [float(f"{value:.{DIGITS}g}") for value in np.asarray(values, dtype=np.float64)]


def _curve(logits: np.ndarray, y: np.ndarray, calibration: Calibration | None) -> CurvePoints:
    """At most CURVE_POINTS cuts, evenly spaced in rank among the distinct scores, the first and last always kept."""
    curve = ScoreCurve.from_scores(logits, y)
    count = curve.values.size
    kept = np.unique(np.linspace(0, count - 1, min(count, CURVE_POINTS)).round().astype(np.int64))
    cuts = curve.values[kept]
    return CurvePoints(
        threshold=_short(cuts),
        probability=_short(probability(cuts, calibration)),
        tp=curve.tp[kept].tolist(),
        fp=curve.fp[kept].tolist(),
    )


def _reliability(probabilities: np.ndarray, y: np.ndarray) -> ReliabilityBins:
    """Rows, positives and mean probability per bin, binned as calibration_figures bins for the ECE."""
    bins = np.minimum((probabilities * CALIBRATION_BINS).astype(np.int64), CALIBRATION_BINS - 1)
    rows = np.bincount(bins, minlength=CALIBRATION_BINS)
    sums = np.bincount(bins, probabilities, CALIBRATION_BINS)
    positives = np.bincount(bins, (np.asarray(y) == 1).astype(np.int64), CALIBRATION_BINS).astype(np.int64)
    means = [None if n == 0 else float(f"{total / n:.{DIGITS}g}") for total, n in zip(sums, rows)]
    return ReliabilityBins(rows=rows.tolist(), positives=positives.tolist(), mean_probability=means)


def _histogram(logits: np.ndarray, y: np.ndarray) -> ScoreHistogram:
    """HISTOGRAM_BINS equal-width bins from the lowest logit to the highest (one bin where they are equal)."""
    low, high = float(logits.min()), float(logits.max())
    count = HISTOGRAM_BINS if high > low else 1
    edges = np.linspace(low, high if high > low else low + 1.0, count + 1)
    positive = np.asarray(y) == 1
    negatives, _ = np.histogram(logits[~positive], bins=edges)
    positives, _ = np.histogram(logits[positive], bins=edges)
    return ScoreHistogram(edges=_short(edges), negatives=negatives.tolist(), positives=positives.tolist())
