"""The exact, tie-grouped operating curve of a score vector.

Every distinct score value v is one possible cut (predict positive when
score >= v). One sort gives cumulative TP and FP at every cut, from which
precision, recall, F-beta, AP and ROC AUC of *every* threshold follow in
O(n log n). float32 scores (what dmo's models emit) are sorted as packed
64-bit keys (order-preserving score bits + label bit), which is much faster
than an argsort and still exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.gain import CurveGains, RowGains


def _sort_desc(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scores (as float64) and labels, sorted by score descending."""
    if scores.dtype == np.float32:
        bits = scores.view(np.uint32).astype(np.uint64)
        negative = (bits >> np.uint64(31)).astype(bool)
        # Order-preserving map of IEEE floats to unsigned ints: flip all bits of
        # negatives, set the sign bit of non-negatives.
        key = np.where(negative, bits ^ np.uint64(0xFFFFFFFF), bits | np.uint64(0x80000000))
        key <<= np.uint64(1)
        key |= labels.astype(np.uint64)
        key.sort()
        key = key[::-1]
        sorted_labels = (key & np.uint64(1)).astype(np.int8)
        ordered = key >> np.uint64(1)
        negative = ordered < np.uint64(0x80000000)
        raw = np.where(negative, ordered ^ np.uint64(0xFFFFFFFF), ordered ^ np.uint64(0x80000000))
        return raw.astype(np.uint32).view(np.float32).astype(np.float64), sorted_labels
    scores = scores.astype(np.float64, copy=False)
    order = np.argsort(-scores, kind="stable")
    return scores[order], labels[order].astype(np.int8)


def _strictly_between(low: float, high: float, dtype: type) -> float:
    """The midpoint of low < high as a value of `dtype` that is above low and at most high: `x >= it` then tells
    high from low in that type and in float64 alike."""
    middle = dtype(low / 2 + high / 2)  # halves first: no overflow near the largest floats
    if not middle > dtype(low):  # neighbours: no value of the type lies strictly between them
        middle = np.nextafter(dtype(low), dtype(np.inf))
    return float(min(middle, dtype(high)))


@dataclass
class ScoreCurve:
    """Cumulative counts at each distinct score, from the highest score down.

    values[k] is the k-th largest distinct score; tp[k], fp[k] count rows with
    score >= values[k]. The empty cut (nothing predicted positive) is implicit.
    """

    values: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    n_pos: int
    n_neg: int
    dtype: type = np.float64  # the scores' own type, in which a decision rule will compare them
    gains: CurveGains | None = None  # --problem value: the cells' gains summed at each distinct score (gain.py)

    @classmethod
    def from_scores(cls, scores: np.ndarray, labels: np.ndarray, *, gains: RowGains | None = None) -> "ScoreCurve":
        """The curve of (scores, labels); with `gains`, each row's gains summed at its distinct score too."""
        scores = np.asarray(scores)
        if scores.dtype not in (np.float32, np.float64):
            scores = scores.astype(np.float64)
        labels = np.asarray(labels)
        if scores.shape != labels.shape or scores.ndim != 1:
            raise DmoError("scores and labels must be 1-D arrays of the same length")
        if scores.size == 0:
            raise DmoError("no rows to compute a curve on")
        if not np.isfinite(scores).all():
            raise DmoError("scores contain NaN or infinite values")
        if not np.isin(labels, (0, 1)).all():
            raise DmoError("labels must be 0 (negative) or 1 (positive)")
        s, y = _sort_desc(scores, labels)
        tp = np.cumsum(y, dtype=np.int64)
        positions = np.arange(1, s.size + 1, dtype=np.int64)
        last_of_group = np.empty(s.size, dtype=bool)
        last_of_group[:-1] = s[1:] != s[:-1]
        last_of_group[-1] = True
        tp = tp[last_of_group]
        fp = positions[last_of_group] - tp
        n_pos = int(tp[-1])
        values = s[last_of_group]
        summed = None
        if gains is not None:  # each row's distinct score, counted from the highest (the same distinct values)
            index = values.size - 1 - np.unique(scores, return_inverse=True)[1].reshape(-1)
            summed = CurveGains.of_rows(gains, labels, index, values.size)
        return cls(values, tp, fp, n_pos, int(s.size - n_pos), scores.dtype.type, summed)

    def cut_threshold(self, k: int) -> float:
        """A decision threshold that reproduces cut k (k = -1: predict nothing).

        The midpoint to the next lower distinct score, so that the rule
        `score >= threshold` gives exactly these counts here and sits in the
        gap for new data. It is rounded to the scores' own type (float32
        logits compare in float32: a float64 midpoint of two neighbouring
        float32 values would round onto the lower one and take it in).
        """
        if k < 0:
            return float(self.values[0] + max(1.0, abs(self.values[0])))
        if k + 1 < self.values.size:
            return _strictly_between(self.values[k + 1], self.values[k], self.dtype)
        return float(self.values[k] - max(1.0, abs(self.values[k])))

    def average_precision(self) -> float:
        if self.n_pos == 0:
            return 0.0
        precision = self.tp / (self.tp + self.fp)
        recall_steps = np.diff(np.concatenate(([0], self.tp))) / self.n_pos
        return float(np.sum(recall_steps * precision))

    def roc_auc(self) -> float | None:
        """Trapezoidal area under (FPR, TPR) with ties grouped; None when one class is absent."""
        if self.n_pos == 0 or self.n_neg == 0:
            return None
        tpr = np.concatenate(([0.0], self.tp / self.n_pos))
        fpr = np.concatenate(([0.0], self.fp / self.n_neg))
        return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))

    def pr_points(self, max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
        """(recall, precision) at the cuts, thinned to at most max_points for plots and JSON."""
        precision = self.tp / np.maximum(self.tp + self.fp, 1)
        recall = self.tp / max(self.n_pos, 1)
        if recall.size > max_points:
            idx = np.unique(np.linspace(0, recall.size - 1, max_points).astype(np.int64))
            return recall[idx], precision[idx]
        return recall, precision
