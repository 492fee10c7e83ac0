"""A scikit-learn estimator over the `dmo train` pipeline, for use in notebooks, pipelines and CV.

`DmoClassifier(problem="frop", target=0.8).fit(X, y)` runs exactly what
`dmo train` runs (same preprocessing, solver, exact threshold adjustment and
report), on arrays or DataFrames instead of files, and keeps the model in
memory; `save(path)` writes the usual model file. Rows whose label is
missing (None/NaN) are the unlabeled rows of the semi-supervised solvers.

It follows scikit-learn's estimator contract (checked by
`sklearn.utils.estimator_checks` in tests/test_estimator.py) where that does
not change what the tool computes; `expected_failed_checks` lists, with the
reason, the checks it fails by design.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import Tags, get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, check_is_fitted, column_or_1d, validate_data

from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.options import TrainOptions, estimator_fields, flag_of, problem_kind
from dmocli.pipelines.train import train
from dmocli.solvers import available, solver_class

LABEL = "label"  # the column y becomes, as `dmo train` names it by default (saved models evaluate on files)


def _init_signature() -> inspect.Signature:
    """DmoClassifier's constructor parameters: the TrainOptions fields marked `estimator`, with their defaults
    (a dict default becomes None, as scikit-learn wants immutable defaults)."""
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for spec in estimator_fields():
        default = None if spec.default is dataclasses.MISSING else spec.default
        parameters.append(inspect.Parameter(spec.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    return inspect.Signature(parameters)


def _parameters_doc() -> str:
    """The numpydoc Parameters section, from the same help texts `dmo train --help` shows."""
    lines = ["Parameters", "----------"]
    for spec in estimator_fields():
        flag = flag_of(spec)
        lines += [
            f"{spec.name} : default={spec.default if spec.default is not dataclasses.MISSING else None!r}",
            f"    {spec.metadata['help']} (`dmo train {flag}`)",
        ]
    return "\n".join("    " + line if line else line for line in lines)


_INIT_SIGNATURE = _init_signature()


class DmoClassifier(ClassifierMixin, BaseEstimator):
    """Train any dmocli solver at one operating point; predict with its threshold.

        The constructor parameters are `dmo train`'s options, taken from their one
        declaration (dmocli/options.py) so that defaults, choices and ranges cannot
        drift between the two; `params` is the `--param` dict, `positive` may be any
        label value. After fit: `model_` (DmoModel), `report_` (the train report dict),
        `classes_` (sorted, as scikit-learn orders them), `threshold_` (binary
        problems: on the logit scale of the positive class `model_.labels.positive`),
        `n_features_in_`, and `feature_names_in_` for DataFrames with string column names.

        X is a DataFrame or pyarrow Table (numeric columns, text/categorical columns
        one-hot encoded, one embedding list column, as `dmo train` reads a file) or
        any numeric array-like (columns named x0..x{d-1} in the model file).

        Cost inside model selection: with the default `cv=None`, every `fit` fits the
        model 5 times on folds (to fit the threshold on out-of-fold scores) and keeps
        their average, so one fit costs about five, and `cross_val_score` or
        `GridSearchCV` multiply that again by their own folds and candidates. The
        cheap settings: `cv="auto"` keeps the 5 folds only when a held-out fifth would
        hold too few positives for a precise threshold and otherwise fits once on
        four fifths (docs/training.md#cv-auto); `val_frac=0.2` always fits once, the
        threshold on a held-out fifth; `cv=0` fits once, the threshold on the training
        rows (optimistic, fine for ranking candidates). Refit the chosen candidate
        with the default for the model you keep.

    {parameters}
    """

    def __init__(self, *args: Any, **kwargs: Any):
        bound = _INIT_SIGNATURE.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    __init__.__signature__ = _INIT_SIGNATURE  # type: ignore[attr-defined]  # what get_params and help() read
    __doc__ = __doc__.replace("{parameters}", _parameters_doc())

    def __sklearn_tags__(self) -> Tags:
        """What X and y this configuration accepts, so sklearn's checks and meta-estimators ask the right things."""
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.impute == "median"  # the training medians fill NaN; otherwise refused
        tags.input_tags.categorical = True  # text and categorical DataFrame columns are one-hot encoded
        # Several classes need a solver with K logits and no binary problem: fpor/frop/ofbs need `positive` for
        # them and then predict "not <positive>" for the other classes. An unknown solver fits nothing (fit says so).
        multiclass_problem = problem_kind(self.problem) in (None, "multiclass")
        tags.classifier_tags.multi_class = (
            multiclass_problem and self.solver in available() and solver_class(self.solver).multiclass
        )
        return tags

    def fit(self, X: Any, y: Any) -> "DmoClassifier":
        features = self._feature_table(X, reset=True)
        clash = [name for name in features.schema.names if name.casefold() == LABEL]
        if clash:  # `label` would be replaced; `Label` is refused by train as a likely copy of the label
            raise DmoError(
                f"X has a column named {clash[0]!r}, which dmocli takes for the label column {LABEL!r}; "
                "rename it (the label is passed as y)"
            )
        labels = self._label_array(y, features)
        values = {spec.name: getattr(self, spec.name) for spec in estimator_fields()}
        values["positive"] = None if self.positive is None else str(self.positive)  # any label value: compared as text
        values["params"] = {key: str(value) for key, value in (self.params or {}).items()}
        options = TrainOptions(**values, label_col=LABEL)
        model, report = train(features.append_column(LABEL, labels), options)
        self._set_model(model, report)
        return self

    @classmethod
    def load(cls, path: str | Path) -> "DmoClassifier":
        """A fitted estimator from a model file (`dmo train -o`, `dmo threshold`, `save`): predict, predict_proba,
        decision_function and explain take DataFrames as `dmo predict` reads files (the model's columns picked by
        name, in any order, others ignored) or numeric arrays (columns in the model's order, `dmo info`). Its
        constructor parameters are the defaults, not the training options (those are in `model_.info`); `fit`
        trains anew. The file is read as `dmo predict` reads it: never unpickled."""
        from dmocli.models.modelfile import load_model

        estimator = cls()
        estimator._set_model(load_model(path), None)
        estimator._from_file = True
        columns = estimator.model_.preprocessor.input_columns
        estimator._fit_columns = columns
        estimator.n_features_in_ = len(columns)
        estimator.feature_names_in_ = np.asarray(columns, dtype=object)
        return estimator

    def explain(self, X: Any, k: int | None = None) -> pd.DataFrame:
        """Each row's contribution per input column to the logit it is decided on (binary: the positive class's;
        multi-class: the predicted class's), plus a `bias` column: they add up to that logit (exactly for linear
        and gbdt models, to an integral's accuracy for mlp: dmocli/models/explain.py). With `k`, the k largest
        by absolute value instead (at most every column), as `dmo predict --explain k` writes them
        (explain_<i>_feature/_contribution)."""
        from dmocli.models.explain import check_k, contributions

        if k is not None:
            check_k(k)
        check_is_fitted(self, "model_")
        features, _ = self.model_.preprocessor.transform(self._feature_table(X, reset=False))
        found = contributions(self.model_, features)
        index = X.index if isinstance(X, pd.DataFrame) else None
        if k is None:
            frame = pd.DataFrame(found.values, columns=found.columns, index=index)
            frame["bias"] = found.bias
            return frame
        return pd.DataFrame(found.top_columns(k), index=index)

    def _set_model(self, model: DmoModel, report: dict[str, Any] | None) -> None:
        """The fitted attributes of a trained or loaded model."""
        self.model_: DmoModel = model
        self.report_: dict[str, Any] | None = report
        classes = list(model.labels.classes)
        if model.labels.two_class and classes[1] < classes[0]:  # [negative, positive]: a minority "fraud" after "ok"
            classes.reverse()
        # One-vs-rest classes are ["not 3", 3]: an object array keeps 3 an int, as in y, not the text "3".
        self.classes_ = np.array(classes, dtype=object if len({type(c) for c in classes}) > 1 else None)
        self.threshold_ = model.threshold

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores as sklearn defines them: (n, K) class logits, or for two classes (n,) the score of classes_[1].

        For a binary problem that is the positive class's logit, negated when the positive class sorts first
        (is classes_[0]); the decision is positive logit >= threshold_, not score > 0, so use this for ranking
        (ROC, precision-recall curves) and predict() for the operating point.
        """
        logits = self._logits(X)
        if self.model_.binary:
            return -logits if self._positive_first() else logits
        if logits.shape[1] == 2:  # --problem multiclass on two classes: argmax is the sign of the difference
            return logits[:, 1] - logits[:, 0]
        return logits

    def predict(self, X: Any) -> np.ndarray:
        """Class labels: the threshold_ operating point (binary problems) or the argmax class."""
        logits = self._logits(X)  # first: it checks that the estimator is fitted before model_ is read
        decision = self.model_.decide(logits)
        spec_order = self.classes_[::-1] if self._positive_first() else self.classes_
        return spec_order[np.asarray(decision, dtype=np.int64)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Model probabilities (columns in classes_ order), calibrated where the model says how. The decision is not
        their arg-max: a binary one is threshold_, not 0.5, and a multi-class one the arg-max of the class-weighted
        logits (the balanced decision), while the probabilities estimate each class at its training rate."""
        logits = self._logits(X).astype(np.float64)
        if not self.model_.binary:
            return self.model_.class_probabilities(logits)
        positive = self.model_.probability(logits)  # calibrated to P(positive | x) where the model says how
        proba = np.column_stack([1.0 - positive, positive])  # [negative, positive]
        return proba[:, ::-1] if self._positive_first() else proba

    def save(self, path: str | Path) -> None:
        """Write the model file `dmo evaluate/predict` read."""
        check_is_fitted(self, "model_")
        self.model_.save(path)

    def _logits(self, X: Any) -> np.ndarray:
        """The model's logits: (n,) of the positive class for binary problems, (n, K) otherwise."""
        check_is_fitted(self, "model_")
        logits, _ = self.model_.logits(self._feature_table(X, reset=False))
        return logits.reshape(-1) if self.model_.binary else logits

    def _positive_first(self) -> bool:
        """Whether the positive class is classes_[0], so sklearn's classes_[1] outputs are for the negative class."""
        return self.model_.binary and self.classes_[0] == self.model_.labels.positive

    def _feature_table(self, X: Any, reset: bool) -> pa.Table:
        """X as the table `dmo train` reads, validated as sklearn does (reset=True in fit records the features).

        DataFrames and arrow tables keep their columns and types, so text columns are one-hot encoded as in the
        CLI; their names are checked against fit's. Anything else must be a dense numeric matrix; its columns are
        matched to fit's by position (x0..x{d-1}, or the DataFrame's names). NaN and inf pass through: the
        preprocessor refuses or imputes them (--impute) with the same message as `dmo train`.
        """
        if not reset and getattr(self, "_from_file", False):
            return self._file_table(X)
        if isinstance(X, (pd.DataFrame, pa.Table)):
            validate_data(self, X, reset=reset, skip_check_array=True)
            table = X if isinstance(X, pa.Table) else pa.Table.from_pandas(X, preserve_index=False)
        else:
            array = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=False)
            names = [f"x{j}" for j in range(array.shape[1])] if reset else self._fit_columns
            table = pa.table({name: array[:, j] for j, name in enumerate(names)})
        if reset:
            self._fit_columns: list[str] = table.schema.names
        return table

    def _file_table(self, X: Any) -> pa.Table:
        """X for a model loaded from a file, read as `dmo predict` reads a table: a DataFrame or arrow table as
        it is (the preprocessor picks the model's columns by name and names any missing), a numeric matrix as
        the model's columns in order (float32 kept: the same arithmetic as a float32 column of a file)."""
        if isinstance(X, (pd.DataFrame, pa.Table)):
            return X if isinstance(X, pa.Table) else pa.Table.from_pandas(X, preserve_index=False)
        array = np.asarray(X)
        array = array if array.dtype.kind == "f" else array.astype(np.float64)  # float32 stays as a file's would
        if array.ndim != 2 or array.shape[1] != len(self._fit_columns):
            raise DmoError(
                f"X has shape {array.shape}; the model reads {len(self._fit_columns)} columns "
                f"({', '.join(self._fit_columns)}): give a 2-D array of that width, or a DataFrame"
            )
        return pa.table({name: array[:, j] for j, name in enumerate(self._fit_columns)})

    def _label_array(self, y: Any, features: pa.Table) -> pa.Array:
        """y as the label column: 1-D, one per row of X, missing values (None/NaN/NA) null (unlabeled rows).

        The labeled values must be classes by sklearn's rule (type_of_target): a continuous or infinite y is
        refused as for every sklearn classifier (StratifiedKFold would refuse it anyway). Typed by arrow first,
        so an object array of ints and None is a class column, not sklearn's "unknown" label type.
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        if not isinstance(y, pd.Series):  # a Series is 1-D already and keeps its type (nullable Int64 stays ints)
            y = column_or_1d(y, warn=True)
        check_consistent_length(features, y)
        labels = pa.array(y, from_pandas=True)
        check_classification_targets(labels.drop_null().to_numpy(zero_copy_only=False))
        return labels


def expected_failed_checks(estimator: DmoClassifier) -> dict[str, str]:
    """The scikit-learn estimator checks this configuration fails by design, each with why.

    For `check_estimator(est, expected_failed_checks=expected_failed_checks(est))` and
    `parametrize_with_checks(..., expected_failed_checks=expected_failed_checks)`. An ofbs operating point
    (the default for two classes) agrees with decision_function > 0 on sklearn's well-separated test data
    once the model has trained; on overlapping classes it need not, for the same reason as fpor/frop.
    """
    failures: dict[str, str] = {}
    if not get_tags(estimator).classifier_tags.multi_class:
        failures["check_classifier_not_supporting_multiclass"] = (
            "a binary problem refuses several classes with a DmoError asking for `positive` (then it trains "
            "one-vs-rest), not sklearn's 'Only binary classification is supported.'"
        )
    if problem_kind(estimator.problem) in ("fpor", "frop"):
        failures["check_classifiers_train"] = (
            "the operating point meets the problem's target (a precision or a recall), so predict is "
            "positive logit >= threshold_: it aims at neither accuracy nor agreement with decision_function > 0 "
            "or probability 0.5"
        )
    return failures
