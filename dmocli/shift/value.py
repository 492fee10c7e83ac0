"""The value per row a model's threshold is expected to bring on new rows under label shift (issue 48), from its
stored held-out curve's gains alone: `dmo monitor`'s `value`.

Label shift moves the positive rate r and keeps each class's scores, and so each class's gains at the cut: the
value per row at rate r is r A + (1 - r) B, with A the held-out positives' mean gain at the cut (tp where flagged,
fn where not) and B the negatives' (fp, tn), operating_point/gain.py `value_under_rate`. At the held-out rate it is
the held-out rows' own value per row.

Its interval holds the uncertainty of the rate (the estimate's interval) and of the two class means (their normal
intervals from the curve's sums of squares, at the same level): the value is linear in each of r, A and B, so its
extremes over the box of the three intervals lie at the box's corners. The curve keeps the sums of the rows' squares
(gain.ColumnSums), not of the bins', so the spread is the rows' own where scores tie or bins were merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from dmocli.operating_point.gain import CurveGains, value_under_rate
from dmocli.operating_point.heldout import HeldOutCurve


@dataclass(frozen=True)
class ExpectedValue:
    """The value per row expected at a cut at positive rate `rate`, with its interval, and its total on `rows`."""

    rate: float
    per_row: float
    per_row_interval: tuple[float, float]
    rows: int

    @property
    def total(self) -> float:
        return self.rows * self.per_row

    @property
    def total_interval(self) -> tuple[float, float]:
        return self.rows * self.per_row_interval[0], self.rows * self.per_row_interval[1]


def cut_index(curve: HeldOutCurve, cut: float) -> int:
    """The cut's index in value_under_rate's order: how many of the curve's distinct scores it flags."""
    return int(curve.scores.size - curve.first_at(cut))


def expected_value(
    curve: HeldOutCurve, cut: float, rate: float, interval: tuple[float, float], *, rows: int, confidence: float
) -> ExpectedValue:
    """The value per row expected at `cut` (on the curve's scale) at positive rate `rate`, whose interval is
    `interval`; its own interval at `confidence` (module docstring); `rows` the rows it is expected on."""
    index = cut_index(curve, cut)
    point = float(value_under_rate(curve, rate)[index])
    positives, negatives = _class_means(curve, index, confidence)
    corners = [r * a + (1 - r) * b for r in interval for a in positives for b in negatives]
    return ExpectedValue(rate=rate, per_row=point, per_row_interval=(min(corners), max(corners)), rows=rows)


def value_at_rate(curve: HeldOutCurve, cut: float, rate: float) -> float:
    """The value per row expected at `cut` at positive rate `rate` (no interval): the reference's."""
    return float(value_under_rate(curve, rate)[cut_index(curve, cut)])


def _class_means(curve: HeldOutCurve, index: int, confidence: float) -> tuple[tuple[float, float], ...]:
    """The normal intervals of the positives' and the negatives' mean gain at the cut flagging the `index` highest
    distinct scores."""
    gains = curve.gains
    assert gains is not None, "a curve without gains has no value"  # callers check curve.gain first
    flagged = np.arange(curve.scores.size) >= curve.scores.size - index  # ascending scores: the top `index`
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return (
        _mean_interval(gains, "tp", "fn", flagged, rows=curve.n_pos, z=z),
        _mean_interval(gains, "fp", "tn", flagged, rows=curve.n_neg, z=z),
    )


def _mean_interval(
    gains: CurveGains, if_flagged: str, if_not: str, flagged: np.ndarray, *, rows: int, z: float
) -> tuple[float, float]:
    """One class's mean gain at the cut with its normal interval: the sum and sum of squares of its rows' gains, the
    flagged rows' `if_flagged` cell and the others' `if_not`."""
    if rows == 0:
        return 0.0, 0.0
    total = float(getattr(gains, if_flagged)[flagged].sum() + getattr(gains, if_not)[~flagged].sum())
    squares = float(getattr(gains, f"{if_flagged}_sq")[flagged].sum() + getattr(gains, f"{if_not}_sq")[~flagged].sum())
    mean = total / rows
    variance = max(squares / rows - mean * mean, 0.0) * rows / max(rows - 1, 1)
    half = z * float(np.sqrt(variance / rows))
    return mean - half, mean + half
