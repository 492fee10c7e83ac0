"""Probabilities that are probabilities: a binary model's logit mapped to P(positive | x) under the training
class prior, and the figures that say how well it is (Brier score, expected calibration error).

The solvers' logits are not probabilities: `wce` weighs the classes equally, so
its sigmoid answers as if half the rows were positive, and ERO or the smoothed
solvers optimize a metric, not a likelihood. A one-dimensional logistic fit of
the label on the logit (Platt scaling) on held-out scores (out-of-fold with
--cv, else the validation split) corrects both; the decision stays the
operating point's threshold, which this map does not move in rank.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np

CALIBRATION_BINS = 10
# The logits' standard deviations that L-BFGS fits as they are: exact from 2e-3 to 2e6 on a known logistic link
# (tests/operating_point/test_calibration.py), with a decade's margin on each side.
PLAIN_SPREAD = (1e-2, 1e4)


@dataclass(frozen=True)
class Calibration:
    """P(positive | x) = sigmoid(slope * logit + intercept), fitted on the scores named by `fitted_on`."""

    slope: float
    intercept: float
    fitted_on: str

    def probability(self, logits: np.ndarray) -> np.ndarray:
        return _sigmoid(self.slope * np.asarray(logits, dtype=np.float64) + self.intercept)

    def to_dict(self) -> dict[str, float | str]:
        return {"method": "platt", **asdict(self)}

    @classmethod
    def identity(cls, fitted_on: str) -> "Calibration":
        """For logits that are calibrated already (an ensemble averaging its members' mapped probabilities)."""
        return cls(1.0, 0.0, fitted_on)

    @classmethod
    def from_dict(cls, values: dict | None) -> "Calibration | None":
        if not values:
            return None
        return cls(float(values["slope"]), float(values["intercept"]), str(values.get("fitted_on", "")))


def probability(logits: np.ndarray, calibration: Calibration | None) -> np.ndarray:
    """P(positive | x) of binary logits: through `calibration` where there is one, else the logit's sigmoid (what
    model files written before calibration existed keep)."""
    z = np.asarray(logits, dtype=np.float64)
    return calibration.probability(z) if calibration is not None else _sigmoid(z)


def fit_platt(logits: np.ndarray, labels: np.ndarray, fitted_on: str) -> Calibration | None:
    """The maximum-likelihood (slope, intercept); None when one class is missing (nothing to calibrate to)."""
    labels = np.asarray(labels)
    if labels.size == 0 or labels.min() == labels.max():
        return None
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression  # on use: a quarter second of start-up

    z = np.asarray(logits, dtype=np.float64).reshape(-1, 1)
    spread = float(np.std(z))
    # Outside PLAIN_SPREAD L-BFGS stops at the start or short of the optimum (slope 0 or half of it, every
    # probability the base rate's), silently or with scikit-learn's warning on the user's stderr: the logits of
    # a feature of size 1e30, or of a model whose scores barely move. There the logits are fitted over their
    # spread and the slope scaled back (the same link); inside, as they are.
    scale = spread if spread > 0 and not PLAIN_SPREAD[0] <= spread <= PLAIN_SPREAD[1] else 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # its advice (scale the data) is not the user's to take
        fit = LogisticRegression(C=1e6, max_iter=1000).fit(z / scale, labels)
    return Calibration(float(fit.coef_[0, 0]) / scale, float(fit.intercept_[0]), fitted_on)


def calibration_figures(probability: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Brier score, expected calibration error (CALIBRATION_BINS equal-width bins, weighted by their rows) and
    the mean probability, to read against the split's positive rate."""
    y = (np.asarray(labels) == 1).astype(np.float64)
    if y.size == 0:
        return {}
    bins = np.minimum((probability * CALIBRATION_BINS).astype(np.int64), CALIBRATION_BINS - 1)
    gaps = np.abs(np.bincount(bins, probability, CALIBRATION_BINS) - np.bincount(bins, y, CALIBRATION_BINS))
    return {
        "brier": float(np.mean((probability - y) ** 2)),
        "ece": float(gaps.sum() / y.size),
        "mean_probability": float(probability.mean()),
        "positive_rate": float(y.mean()),
    }


def _sigmoid(z: np.ndarray) -> np.ndarray:
    out = np.empty_like(z)
    positive = z >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-z[positive]))
    e = np.exp(z[~positive])
    out[~positive] = e / (1.0 + e)
    return out
