"""What the training page draws, kept in the train report so that `dmo report train.json` draws, from the JSON
alone, the page `dmo train --html` drew at the run; and made the same way from a model file (`dmo report MODEL`).

Both come from the held-out curve the model file keeps (operating_point/heldout.py: each distinct held-out score
with its positive and negative rows), expanded back to its rows: the precision-recall curve thinned to at most
report_figures.CURVE_POINTS cuts, the reliability bins after the probability map and before it (the logit's
sigmoid), and the scores per class (report_figures.ScoreFigures makes each, as for the evaluate report). A train
report and its model file therefore give the same figures. The train report also keeps the IMPORTANCE_TOP most
important feature columns (`TopImportance`, models/importance.py) of a linear or gbdt model, which cost
milliseconds; an mlp's take integrated gradients over drawn rows, seconds per member, so its train report has none
and the page drawn from a model file (or `dmo info --features`) shows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.models.importance import feature_importance
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.report import ReportRecord, omitted
from dmocli.report_figures import ReliabilityBins, ScoreFigures

IMPORTANCE_TOP = 20  # the columns a page shows: the rest of a wide table add length, not insight


@dataclass(frozen=True, kw_only=True)
class HeldOutFigures(ScoreFigures):
    """The held-out rows' figures (train report `figures`): ScoreFigures' curve, reliability and histogram, which
    rows they are (`split`: cv, val, data or train, as the held-out curve says) and the reliability bins of the
    uncalibrated probabilities (each logit's sigmoid: `uncalibrated`), beside the calibrated ones."""

    split: str
    uncalibrated: ReliabilityBins

    @classmethod
    def of_curve(cls, heldout: HeldOutCurve, calibration: Calibration | None) -> HeldOutFigures | None:
        """The figures of a held-out curve's rows under `calibration`; None for a curve without rows."""
        scores = heldout.scores.astype(np.float64)
        positives, negatives = heldout.positives.astype(np.int64), heldout.negatives.astype(np.int64)
        logits = np.concatenate([np.repeat(scores, positives), np.repeat(scores, negatives)])
        labels = np.concatenate([np.ones(int(positives.sum()), np.int64), np.zeros(int(negatives.sum()), np.int64)])
        calibrated = ScoreFigures.of(logits, labels, calibration)
        raw = ScoreFigures.of(logits, labels, None)
        if calibrated is None or raw is None:
            return None
        return cls(
            curve=calibrated.curve,
            reliability=calibrated.reliability,
            histogram=calibrated.histogram,
            split=heldout.split,
            uncalibrated=raw.reliability,
        )


@dataclass(frozen=True, kw_only=True)
class ImportantColumn(ReportRecord):
    """One feature column's importance (models/importance.py), and a binary linear model's coefficient per
    training standard deviation (its sign: which way the column pushes the logit; absent for other models and
    for a categorical column, whose levels each have their own)."""

    name: str
    kind: str
    importance: float | None
    coefficient: float | None = omitted()


@dataclass(frozen=True, kw_only=True)
class TopImportance(ReportRecord):
    """The train report's `importance`: how it was measured and the most important columns, first first."""

    method: str
    columns: list[ImportantColumn]

    @classmethod
    def of(cls, model: DmoModel) -> TopImportance:
        found = feature_importance(model)
        return cls(method=found["method"], columns=[_column(entry) for entry in found["columns"][:IMPORTANCE_TOP]])


def _column(entry: dict[str, Any]) -> ImportantColumn:
    coefficient = entry.get("coefficient")
    return ImportantColumn(
        name=str(entry["name"]),
        kind=str(entry["kind"]),
        importance=entry["importance"],
        coefficient=coefficient if isinstance(coefficient, float) else None,
    )


def top_importance(model: DmoModel) -> TopImportance | None:
    """The train report's importance of a linear or gbdt model; None for an mlp, whose integrated gradients over
    REFERENCE_ROWS drawn rows cost seconds per member (`dmo info MODEL --features` and `dmo report MODEL` make it)."""
    return None if model.architecture.kind == "mlp" else TopImportance.of(model)


@dataclass(frozen=True, kw_only=True)
class FiguresSection:
    """The train report's `figures`: a binary model's held-out figures, absent while None (a multi-class model, a
    model without a held-out curve)."""

    figures: HeldOutFigures | None

    def to_dict(self) -> dict[str, Any]:
        return {} if self.figures is None else {"figures": self.figures.to_dict()}


@dataclass(frozen=True, kw_only=True)
class ImportanceSection:
    """The train report's `importance`, absent while None (see top_importance)."""

    importance: TopImportance | None

    def to_dict(self) -> dict[str, Any]:
        return {} if self.importance is None else {"importance": self.importance.to_dict()}
