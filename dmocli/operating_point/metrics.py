"""Confusion counts and scores for binary and multi-class predictions.

Ranking metrics (average precision, ROC AUC) come from the exact,
tie-grouped precision-recall curve of `curve.py`, so they agree with
scikit-learn's definitions (checked in tests) at a fraction of the cost.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.problems import f_beta, precision, recall, safe_div


def confusion(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, int]:
    y_true = np.asarray(y_true).astype(bool)
    y_pred = np.asarray(y_pred).astype(bool)
    tp = int(np.count_nonzero(y_true & y_pred))
    fp = int(np.count_nonzero(~y_true & y_pred))
    fn = int(np.count_nonzero(y_true & ~y_pred))
    tn = int(y_true.size - tp - fp - fn)
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn}


def binary_scores(y_true: np.ndarray, y_pred: np.ndarray, beta: float = 1.0) -> dict[str, float]:
    c = confusion(y_true, y_pred)
    n_pos = c["tp"] + c["fn"]
    return {
        **c,
        "n": int(np.size(y_true)),
        "n_pos": n_pos,
        "precision": float(precision(c["tp"], c["fp"])),
        "recall": float(recall(c["tp"], n_pos)),
        "f_beta": float(f_beta(c["tp"], c["fp"], n_pos, beta)),
        "f1": float(f_beta(c["tp"], c["fp"], n_pos, 1.0)),
    }


def average_precision(y_true: np.ndarray, scores: np.ndarray) -> float:
    """Step-wise AP, sum_k (R_k - R_{k-1}) P_k over distinct thresholds (scikit-learn's definition)."""
    return ScoreCurve.from_scores(scores, y_true).average_precision()


def roc_auc(y_true: np.ndarray, scores: np.ndarray) -> float:
    return ScoreCurve.from_scores(scores, y_true).roc_auc()


def multiclass_scores(
    y_true: np.ndarray, y_pred: np.ndarray, n_classes: int, proba: np.ndarray | None = None
) -> dict[str, Any]:
    """Per-class precision/recall/F1, accuracy, balanced accuracy, macro F1 and (with probabilities) log loss."""
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    matrix = np.bincount(y_true * n_classes + y_pred, minlength=n_classes * n_classes).reshape(n_classes, n_classes)
    tp = np.diag(matrix).astype(np.float64)
    support = matrix.sum(axis=1)
    predicted = matrix.sum(axis=0)
    prec = safe_div(tp, predicted)
    rec = safe_div(tp, support)
    f1 = safe_div(2 * prec * rec, prec + rec)
    present = support > 0
    out: dict[str, Any] = {
        "n": int(y_true.size),
        "accuracy": float(tp.sum() / max(y_true.size, 1)),
        "balanced_accuracy": float(rec[present].mean()) if present.any() else 0.0,
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "per_class": {
            "support": support.tolist(),
            "precision": np.asarray(prec).tolist(),
            "recall": np.asarray(rec).tolist(),
            "f1": np.asarray(f1).tolist(),
        },
        "confusion_matrix": matrix.tolist(),
    }
    if proba is not None:
        p = np.clip(proba[np.arange(y_true.size), y_true], 1e-15, 1.0)
        out["log_loss"] = float(-np.log(p).mean())
    return out
