"""The report's `value` section of `--problem value`: what the decision is worth on the held-out rows.

A team that states its decision in money wants the money: the expected value per row and in total at the threshold
kept, with an interval, against the two decisions it would make without dmo, the model's default cut (calibrated
probability 0.5) and flagging nothing. Every figure is read off the held-out curve the model file keeps (its gain
columns' sums and sums of squares per score, operating_point/gain.py), so `dmo threshold` re-targeting from that
curve reports the same figures as training.

The interval is the normal (central limit) interval of the mean of the held-out rows' values, mean +- z * s /
sqrt(n) at VALUE_LEVEL, from the exact sum and sum of squares of the rows' values at that decision; the total's is
n times it (the value of n rows like these). It is an approximation: with few rows and a gain dominated by a few
large amounts, it is narrower than the truth (docs/operating-points.md, "Value").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.operating_point.calibration import Calibration, probability
from dmocli.operating_point.gain import VALUE_LEVEL, ValueAt, squares_at_cuts, value_at_cuts, value_where
from dmocli.operating_point.heldout import HeldOutCurve

DEFAULT_PROBABILITY = 0.5  # the model's default cut: flag where the calibrated probability is at least a half


@dataclass(frozen=True, kw_only=True)
class ValueSection:
    """The `value` section: the gain matrix, the held-out rows it was measured on, and the value at the threshold,
    at the default cut and of flagging nothing."""

    gain: str
    split: str
    rows: int
    at_threshold: ValueAt
    at_default_cut: ValueAt
    default_cut: str  # how the default cut was read: through the probability map, or the logit's sigmoid
    flag_nothing: ValueAt

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": {
                "gain": self.gain,
                "split": self.split,
                "rows": self.rows,
                "level": VALUE_LEVEL,
                "interval": "normal (CLT) interval of the mean value of the held-out rows",
                "at_threshold": self.at_threshold.to_dict(),
                "at_default_cut": {**self.at_default_cut.to_dict(), "rule": self.default_cut},
                "flag_nothing": self.flag_nothing.to_dict(),
                "over_default_cut": self.at_threshold.total - self.at_default_cut.total,
                "over_flag_nothing": self.at_threshold.total - self.flag_nothing.total,
            }
        }


def default_cut(scores: np.ndarray, calibration: Calibration | None) -> tuple[np.ndarray, str]:
    """The rows the model's default cut flags (calibrated probability at least DEFAULT_PROBABILITY), and how it
    was read: training's held-out rows here, `dmo evaluate`'s labeled rows (use/evaluate.py)."""
    rule = "calibrated probability >= 0.5" if calibration is not None else "sigmoid(logit) >= 0.5"
    return probability(scores, calibration) >= DEFAULT_PROBABILITY, rule


def at_cut(curve: HeldOutCurve, threshold: float) -> ValueAt:
    """The value at the threshold as the search computed it (gain.value_at_cuts' cumulative sum over the curve's
    gains from the highest score down, and squares_at_cuts' for the interval), so the operating point's `objective`
    and `at_threshold.per_row` are the same number to the last digit, not a direct sum that rounds differently."""
    index = int(curve.scores.size - curve.first_at(threshold))  # the distinct scores the cut flags, from the top
    rows = curve.n_pos + curve.n_neg
    counts = curve.positives.astype(np.int64) + curve.negatives
    flagged = int(counts[curve.scores.size - index :].sum())
    return ValueAt.of(float(value_at_cuts(curve)[index]), float(squares_at_cuts(curve)[index]), rows, flagged)


def value_section(curve: HeldOutCurve, threshold: float, calibration: Calibration | None) -> ValueSection | None:
    """The section of a curve that keeps gains (None for one without: no --problem value)."""
    gains = curve.gains
    if gains is None or curve.gain is None:
        return None
    rows = curve.n_pos + curve.n_neg
    counts = curve.positives.astype(np.int64) + curve.negatives

    def at(flagged: np.ndarray) -> ValueAt:
        total, squares = value_where(gains, flagged)
        return ValueAt.of(total, squares, rows, int(counts[flagged].sum()))

    default, rule = default_cut(curve.scores, calibration)
    return ValueSection(
        gain=curve.gain.text,
        split=curve.split,
        rows=rows,
        at_threshold=at_cut(curve, threshold),
        at_default_cut=at(default),
        default_cut=rule,
        flag_nothing=at(np.zeros(curve.scores.size, dtype=bool)),
    )
