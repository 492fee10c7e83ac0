"""Class probabilities that are probabilities: a multi-class model's logits (n, K) mapped to P(class | x) under the
training class prior, and the figures that say how well it is (multi-class Brier score, top-class ECE).

`wce` weighs every class alike, so its softmax answers as if the classes were
equally frequent: a weighted likelihood shifts each class's log-odds by a
constant (the log of its weight), which inflates the rare classes. The map is
softmax(logits / temperature + bias): the per-class bias undoes that shift, the
one temperature corrects over- or under-confidence (an MLP, early stopping, a
metric-optimizing solver). Both are fitted by maximum likelihood on held-out
logits (out-of-fold with --cv, else the validation split); docs/operating-points.md
has the measurements that chose this form over temperature alone, bias alone and
per-class scales.

The bias can move the arg-max, so the decision stays the arg-max of the raw logits
(what the model was trained to decide, a balanced decision under class weights);
only the probabilities go through this map.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.operating_point.calibration import CALIBRATION_BINS

METHOD = "temperature-bias"


@dataclass(frozen=True)
class MulticlassCalibration:
    """P(class | x) = softmax(logits / temperature + bias), fitted on the held-out logits named by `fitted_on`."""

    temperature: float
    bias: tuple[float, ...]  # one per class, centred (softmax ignores a common shift)
    fitted_on: str

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        z = np.asarray(logits, dtype=np.float64)
        return softmax(z / self.temperature + np.asarray(self.bias))

    def to_dict(self) -> dict[str, Any]:
        return {"method": METHOD, "temperature": self.temperature, "bias": list(self.bias), "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, values: Any, n_classes: int) -> "MulticlassCalibration | None":
        """The stored map, checked as a model file must be before it scores a row (ValueError naming what is
        wrong): a hand-edited or foreign file gets one message at load time, not NaN probabilities."""
        if values is None:
            return None
        if not isinstance(values, dict) or values.get("method") != METHOD:
            raise ValueError(f"the probability calibration of a multi-class model must be method {METHOD!r}")
        temperature, bias = values.get("temperature"), values.get("bias")
        if not _is_number(temperature) or not temperature > 0:
            raise ValueError(f"the calibration temperature {temperature!r} is not a positive number")
        if not isinstance(bias, list) or len(bias) != n_classes or not all(_is_number(b) for b in bias):
            raise ValueError(f"the calibration bias must be {n_classes} finite numbers, one per class")
        return cls(float(temperature), tuple(float(b) for b in bias), str(values.get("fitted_on", "")))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.asarray(logits, dtype=np.float64)
    shifted = shifted - shifted.max(axis=1, keepdims=True)
    proba = np.exp(shifted)
    return proba / proba.sum(axis=1, keepdims=True)


def class_probabilities(logits: np.ndarray, calibration: MulticlassCalibration | None) -> np.ndarray:
    """P(class | x) of multi-class logits: through `calibration` where there is one, else the plain softmax (what
    model files written before it existed keep)."""
    return calibration.probabilities(logits) if calibration is not None else softmax(logits)


def fit_temperature_bias(logits: np.ndarray, labels: np.ndarray, fitted_on: str) -> MulticlassCalibration | None:
    """The maximum-likelihood (temperature, bias); None when a class has no held-out row (its rate cannot be
    learned). The negative log-likelihood is convex in (1 / temperature, bias), so L-BFGS from the identity map
    finds the one optimum, the same on every run."""
    from scipy.optimize import minimize  # on use: scipy's start-up is paid only by training

    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    n, k = z.shape
    if n == 0 or np.bincount(y, minlength=k).min() == 0:
        return None
    onehot = np.zeros_like(z)
    onehot[np.arange(n), y] = 1.0
    z_true = z[np.arange(n), y]

    def loss_and_gradient(params: np.ndarray) -> tuple[float, np.ndarray]:
        scale, bias = params[0], params[1:]
        a = scale * z + bias
        top = a.max(axis=1, keepdims=True)
        e = np.exp(a - top)
        total = e.sum(axis=1, keepdims=True)
        log_norm = np.log(total[:, 0]) + top[:, 0]
        loss = float(np.mean(log_norm - scale * z_true - bias[y]))
        residual = e / total - onehot
        gradient = np.concatenate([[np.sum(residual * z) / n], residual.sum(axis=0) / n])
        return loss, gradient

    start = np.concatenate([[1.0], np.zeros(k)])
    bounds = [(1e-6, None)] + [(None, None)] * k
    fit = minimize(loss_and_gradient, start, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 1000})
    scale, bias = float(fit.x[0]), fit.x[1:] - fit.x[1:].mean()
    return MulticlassCalibration(1.0 / scale, tuple(float(b) for b in bias), fitted_on)


def multiclass_calibration_figures(proba: np.ndarray, labels: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """Multi-class Brier score (the squared distance to the one-hot label, summed over classes: 0 to 2), the
    expected calibration error of the predicted class's probability against how often it is right
    (CALIBRATION_BINS equal-width bins, weighted by their rows), and each class's mean probability, to read
    against its rate."""
    y = np.asarray(labels, dtype=np.int64)
    if y.size == 0:
        return {}
    rows = np.arange(y.size)
    onehot = np.zeros_like(proba, dtype=np.float64)
    onehot[rows, y] = 1.0
    confidence = proba[rows, predicted]
    correct = (predicted == y).astype(np.float64)
    bins = np.minimum((confidence * CALIBRATION_BINS).astype(np.int64), CALIBRATION_BINS - 1)
    gaps = np.abs(np.bincount(bins, confidence, CALIBRATION_BINS) - np.bincount(bins, correct, CALIBRATION_BINS))
    return {
        "brier": float(np.mean(np.sum((proba - onehot) ** 2, axis=1))),
        "ece": float(gaps.sum() / y.size),
        "mean_probability": proba.mean(axis=0).tolist(),
        "class_rate": onehot.mean(axis=0).tolist(),
    }
