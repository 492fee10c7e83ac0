"""`dmo info MODEL`: what a model file holds, as a typed result (use/results/info.py) whose report a script (or
a person) reads to check which problem, threshold, classes and features a model has before using it, without
reading the safetensors header by hand.

The file is opened with the same loader as predict (load_model), so a malformed file is refused here with the
same one-line message, not described as if it were usable.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np

from dmocli.errors import DmoError
from dmocli.models.importance import feature_importance
from dmocli.models.modelfile import DmoModel, load_stored_model
from dmocli.operating_point.alert_budget import AlertBudget, BudgetReport
from dmocli.operating_point.gain import CELLS
from dmocli.prep.features import Preprocessor
from dmocli.use.recertify import DROPPED
from dmocli.use.results.common import Envelope, LabelFields, ProblemFields
from dmocli.use.results.info import (
    Adapted,
    BudgetInfo,
    FeatureColumn,
    Features,
    GainInfo,
    Importance,
    InfoResult,
    ReviewBand,
    Training,
)


def model_info(path: str | Path, *, features: bool = False) -> InfoResult:
    """The `info` result of the model file at `path` (docs/report-schema.md#info); `features` adds the columns'
    importance (and a linear model's coefficients: dmocli/models/importance.py)."""
    model, stored = load_stored_model(path)  # every check a model file goes through before it scores a row
    meta = stored.metadata  # the header as stored: the dmocli version that wrote it
    binary = model.binary
    threshold = model.threshold if binary else None
    info = model.info
    adapted = info.get("adapted")  # dmo threshold --adapt/--prior: the rate it was moved to, and how
    return InfoResult(
        envelope=Envelope.of("info"),
        model=str(path),
        format_version=meta["format_version"],
        labels=LabelFields.of(model.labels),
        problem=ProblemFields.of(model.problem),
        confidence=info.get("confidence"),
        new_rows=info.get("new_rows") if info.get("confidence") is not None else None,
        certified=info.get("certified"),
        dropped_confidence=info.get(DROPPED),  # dmo threshold moved the threshold without the certificate
        threshold=threshold,
        threshold_probability=None if threshold is None else float(model.probability(np.asarray([threshold]))[0]),
        decision_rule=meta.get("decision_rule"),
        review_band=_review_band(model),
        gain=_gain(model),
        alert_budget=_alert_budget(model),
        adapted=None if adapted is None else Adapted.of(adapted),
        model_selection=info.get("model_selection"),  # dmo train --model auto: the candidates and the one kept
        features=_features(model.preprocessor),
        architecture=model.architecture,
        **_size(model),
        training=Training(
            solver=model.solver,
            rows=info.get("rows"),  # None in files written before it was stored
            seed=info.get("seed"),
            params=info.get("params"),
            epochs=info.get("epochs"),
            dmocli_version=meta.get("dmocli_version"),
            date=_written_at(stored.modified),
            threshold_fitted_on=info.get("threshold_fitted_on"),
            calibration=info.get("calibration"),
            summary=info.get("summary", {}),
        ),
        importance=Importance.of(feature_importance(model)) if features else None,
    )


def _review_band(model: DmoModel) -> ReviewBand | None:
    """The model's review band as its file keeps it (the header's review_threshold, info.review_band)."""
    lower, stored = model.review_threshold, model.info.get("review_band")
    if lower is None or stored is None:
        return None
    return ReviewBand(
        review_threshold=lower,
        review_probability=float(model.probability(np.asarray([lower]))[0]),
        budget=stored["budget"],
        confidence=stored["confidence"],
        next_rows=stored.get("next_rows"),
        volume=stored["volume"],
        volume_bound=stored["volume_bound"],
    )


def _gain(model: DmoModel) -> GainInfo | None:
    """A `--problem value` model's gain matrix and the columns its held-out curve keeps the sums of."""
    curve = model.heldout
    if curve is None or curve.gain is None or curve.column_sums is None:
        return None
    cells = dict(zip(CELLS, (cell.text for cell in curve.gain.cells)))
    return GainInfo(gain=curve.gain.text, cells=cells, columns=list(curve.column_sums.columns))


def _alert_budget(model: DmoModel) -> BudgetInfo | None:
    """The model's alert budget with its certificate, as the train report gave it: the held-out rows the threshold
    flags on the stored curve, certified at the file's confidence for the sample it names (None: no budget; a
    file whose curve is not on the model's scale keeps the budget alone, refused as unreadable)."""
    try:
        budget = AlertBudget.from_info(model.info.get("alert_budget"))
    except ValueError as exc:
        raise DmoError(f"the model file's alert budget cannot be read ({exc}); retrain it") from exc
    curve = model.heldout
    if budget is None or curve is None or model.threshold is None:
        return None
    tp, fp = curve.counts_at(model.threshold)
    confidence = model.info.get("confidence")
    new_rows = model.info.get("new_rows") if confidence is not None else None
    section = BudgetReport(
        budget=budget, flagged=tp + fp, rows=curve.n_pos + curve.n_neg, confidence=confidence, new_rows=new_rows
    ).to_dict()["alert_budget"]
    return BudgetInfo(**section)


def _size(model: DmoModel) -> dict[str, int]:
    """The network's weights; a tree model's nodes, and its trees (an ensemble's: all its members')."""
    if model.architecture.kind != "gbdt":
        return {"n_parameters": model.architecture.parameters * model.architecture.members}
    sizes = [member.size() for member in model.members()]  # a loaded file's boosters: no torch
    return {"n_parameters": sum(nodes for _, nodes in sizes), "n_trees": sum(trees for trees, _ in sizes)}


def _features(pre: Preprocessor) -> Features:
    """The input columns a table must have, each with its kind, and the width of the encoded input."""
    if pre.embedding:
        columns = [FeatureColumn(name=pre.embedding, kind="embedding", dim=pre.embedding_dim)]
    else:
        columns = [FeatureColumn(name=name, kind="numeric") for name in pre.numeric]
        columns += [
            FeatureColumn(name=name, kind="categorical", levels=len(levels)) for name, levels in pre.categorical.items()
        ]
    return Features(n_columns=len(columns), n_inputs=pre.n_features, impute=pre.impute, columns=columns)


def _written_at(modified: float) -> str:
    """When the model file was written (its modification time, UTC, as read with its contents): the file stores no
    date, so that the same data, options and seed give the same bytes."""
    stamp = datetime.datetime.fromtimestamp(modified, tz=datetime.timezone.utc)
    return stamp.isoformat(timespec="seconds")
