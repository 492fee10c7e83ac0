"""A scikit-learn estimator over the `dmo train` pipeline, for use in notebooks, pipelines and CV.

`DmoClassifier(problem="frop", target=0.8).fit(X, y)` runs exactly what
`dmo train` runs (same preprocessing, solver, exact threshold adjustment and
report), on arrays or DataFrames instead of files, and keeps the model in
memory; `save(path)` writes the usual model file. Rows whose label is
missing (None/NaN) are the unlabeled rows of the semi-supervised solvers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .errors import DmoError
from .modelfile import DmoModel
from .training import TrainOptions, train

LABEL = "label"


class DmoClassifier(ClassifierMixin, BaseEstimator):
    """Train any dmocli solver at one operating point; predict with its threshold.

    Parameters mirror `dmo train` options (`params` is the `--param` dict).
    After fit: `model_` (DmoModel), `report_` (the train report dict),
    `classes_`, `threshold_` (logit scale, binary problems), `n_features_in_`.
    """

    def __init__(self, problem: str | None = None, target: float | None = None, beta: float = 1.0,
                 solver: str = "wce", model: str = "linear", width: int = 100, depth: int = 2,
                 positive: Any = None, val_frac: float = 0.0, confidence: float | None = None,
                 adjust: bool | None = None, allow_infeasible: bool = False, impute: str = "none",
                 epochs: int | None = None, device: str = "cpu", seed: int = 0,
                 params: dict[str, Any] | None = None):
        self.problem = problem
        self.target = target
        self.beta = beta
        self.solver = solver
        self.model = model
        self.width = width
        self.depth = depth
        self.positive = positive
        self.val_frac = val_frac
        self.confidence = confidence
        self.adjust = adjust
        self.allow_infeasible = allow_infeasible
        self.impute = impute
        self.epochs = epochs
        self.device = device
        self.seed = seed
        self.params = params

    def fit(self, X: Any, y: Any) -> "DmoClassifier":
        features = _feature_table(X)
        if LABEL in features.schema.names:
            raise DmoError(f"X has a column named {LABEL!r}; rename it (the label is passed as y)")
        labels = pa.array(pd.Series(np.asarray(y, dtype=object) if not isinstance(y, pd.Series) else y), from_pandas=True)
        if len(labels) != features.num_rows:
            raise DmoError(f"X has {features.num_rows} rows and y has {len(labels)}; give one label per row")
        options = TrainOptions(
            problem=self.problem, target=self.target, beta=self.beta, solver=self.solver, model=self.model,
            width=self.width, depth=self.depth, label_col=LABEL,
            positive=None if self.positive is None else str(self.positive), val_frac=self.val_frac,
            confidence=self.confidence, adjust=self.adjust, allow_infeasible=self.allow_infeasible,
            impute=self.impute, epochs=self.epochs, device=self.device, seed=self.seed,
            params={k: str(v) for k, v in (self.params or {}).items()},
        )
        model, report = train(features.append_column(LABEL, labels), options)
        self.model_: DmoModel = model
        self.report_: dict[str, Any] = report
        self.classes_ = np.asarray(model.labels.classes)
        self.threshold_ = model.threshold
        self.n_features_in_ = features.num_columns
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Logits: (n,) for binary problems (the decision is logit >= threshold_), (n, K) otherwise."""
        check_is_fitted(self, "model_")
        logits, _ = self.model_.logits(_feature_table(X, self.model_.preprocessor.input_columns))
        return logits.reshape(-1) if self.model_.binary else logits

    def predict(self, X: Any) -> np.ndarray:
        decision = self.model_.decide(self.decision_function(X))
        return self.classes_[np.asarray(decision, dtype=np.int64)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Model probabilities (columns in classes_ order); note the binary decision uses threshold_, not 0.5."""
        logits = self.decision_function(X).astype(np.float64)
        if self.model_.binary:
            positive = 1.0 / (1.0 + np.exp(-logits))
            return np.column_stack([1.0 - positive, positive])
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)

    def save(self, path: str | Path) -> None:
        """Write the model file `dmo evaluate/predict` read."""
        check_is_fitted(self, "model_")
        self.model_.save(path)


def _feature_table(X: Any, columns: list[str] | None = None) -> pa.Table:
    """A DataFrame keeps its column names; an array gets x0..x{d-1}, as at fit time."""
    if isinstance(X, pa.Table):
        return X
    if isinstance(X, pd.DataFrame):
        return pa.Table.from_pandas(X, preserve_index=False)
    array = np.asarray(X)
    if array.ndim != 2:
        raise DmoError(f"X must be 2-D (rows x features); got shape {array.shape}")
    names = columns if columns is not None and len(columns) == array.shape[1] else [f"x{j}" for j in range(array.shape[1])]
    return pa.table({name: array[:, j] for j, name in enumerate(names)})
