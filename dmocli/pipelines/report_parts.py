"""The sections of the train and threshold reports, as typed parts assembled once into the report.

The training tail used to build its report by writing keys into one dict as each step ran (the splits here, more
warnings there), so what a report holds could only be learned by reading every step, and a later step could
overwrite an earlier one's key unseen. Here each section is a frozen dataclass whose `to_dict` gives exactly
the report keys its definition in dmocli/schema/report.schema.json describes (docs/report-schema.md), and
`assemble` merges the envelope's fields and the parts once, refusing a key two of them would both write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.class_offsets import ClassOperatingPoint, ClassProblem
from dmocli.operating_point.class_offsets_guard import GuardChoice
from dmocli.operating_point.multiclass_calibration import MulticlassCalibration
from dmocli.operating_point.search import OperatingPoint
from dmocli.report import envelope


class ReportPart(Protocol):
    """A section of a report: the top-level keys it writes."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, kw_only=True)
class OperatingPointSection:
    """The cut the exact search chose (`operating_point`) and whether it met the target (`feasible`).

    `split` names the held-out split training searched on; `dmo threshold` searches DATA or the stored curve, which
    its report names in `data`, so its section has no `split` (None)."""

    point: OperatingPoint
    split: str | None = None

    def to_dict(self) -> dict[str, Any]:
        section = self.point.to_dict()
        return {
            "operating_point": section if self.split is None else {"split": self.split, **section},
            "feasible": self.point.feasible,
        }


@dataclass(frozen=True, kw_only=True)
class ClassOperatingPointSection:
    """A multi-class operating point: the offsets and per-class figures on the held-out `split`
    (`class_operating_point`), and whether every floor was met (`feasible`). Its problem fields are the envelope's
    (pipelines/multiclass.py:problem_report_fields)."""

    problem: ClassProblem
    point: ClassOperatingPoint
    classes: list[Any]
    split: str
    guard: GuardChoice | None  # None: --focus, where the do-no-harm rule does not apply

    def to_dict(self) -> dict[str, Any]:
        return {
            "class_operating_point": {
                "split": self.split,
                **self.point.to_dict(self.problem, self.classes),
                "guard": None if self.guard is None else self.guard.to_dict(self.problem),
            },
            "feasible": self.point.feasible,
        }


@dataclass(frozen=True, kw_only=True)
class SplitsSection:
    """Every split's metrics at the decision kept (`threshold`: null for a multi-class model, `splits`), and, when
    the solver had a threshold of its own that a search replaced, the splits at that one (`before_adjustment`)."""

    threshold: float | None
    splits: Mapping[str, dict[str, Any]]
    before_adjustment: Mapping[str, dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"before_adjustment": dict(self.before_adjustment)} if self.before_adjustment is not None else {}),
            "threshold": self.threshold,
            "splits": dict(self.splits),
        }


@dataclass(frozen=True, kw_only=True)
class CalibrationSection:
    """The probability map (`calibration`), absent where none was fitted or given."""

    calibration: Calibration | MulticlassCalibration | None

    def to_dict(self) -> dict[str, Any]:
        return {} if self.calibration is None else {"calibration": self.calibration.to_dict()}


@dataclass(frozen=True, kw_only=True)
class BinaryCvSection:
    """--cv K of a binary model (`cv`): each fold's own operating point on its out-of-fold scores (`folds`, from
    pipelines/cross_fit.py:cv_report), how the pooled out-of-fold threshold was carried to the saved model, and
    that threshold."""

    folds: Mapping[str, Any]
    transfer: str
    pooled_val: bool
    oof_threshold: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "cv": {
                **self.folds,
                "transfer": self.transfer,
                "pooled_val": self.pooled_val,
                "oof_threshold": self.oof_threshold,
            }
        }


@dataclass(frozen=True, kw_only=True)
class MulticlassCvSection:
    """--cv K of a multi-class model (`cv`): each fold's arg-max figures on its out-of-fold logits."""

    per_fold: list[dict[str, Any]]
    fit_seconds: float
    pooled_val: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "cv": {
                "folds": len(self.per_fold),
                "per_fold": self.per_fold,
                "fit_seconds": self.fit_seconds,
                "pooled_val": self.pooled_val,
            }
        }


@dataclass(frozen=True, kw_only=True)
class TrainingRunSection:
    """How the fit went: a streaming solver's online figures (`online`), the solver's trace (`solver_trace`), the
    fit's seconds, and the fields only one fit strategy reports after them (`path_fields`: the streaming pre-pass)."""

    solver_trace: dict[str, Any]
    fit_seconds: float
    online: dict[str, Any] | None = None
    path_fields: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"online": self.online} if self.online is not None else {}),
            "solver_trace": self.solver_trace,
            "fit_seconds": self.fit_seconds,
            **self.path_fields,
        }


@dataclass(frozen=True, kw_only=True)
class CandidateModel:
    """One candidate of `--model auto`: its kind and its out-of-fold operating point (objective, whether it met
    the target, threshold)."""

    model: str
    objective: float
    feasible: bool
    threshold: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "objective": self.objective,
            "feasible": self.feasible,
            "threshold": self.threshold,
        }


@dataclass(frozen=True, kw_only=True)
class ModelSelectionSection:
    """`--model auto` (`model_selection`): the rule, each candidate's out-of-fold operating point, the one kept, and
    the confidence asked and the level each candidate was certified at to keep it (pipelines/model_choice.py)."""

    rule: str
    candidates: tuple[CandidateModel, ...]
    chosen: str
    confidence: float | None
    confidence_per_candidate: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_selection": {
                "rule": self.rule,
                "candidates": [candidate.to_dict() for candidate in self.candidates],
                "chosen": self.chosen,
                "confidence": self.confidence,
                "confidence_per_candidate": self.confidence_per_candidate,
            }
        }


def assemble(command: str, *parts: ReportPart, **fields: Any) -> dict[str, Any]:
    """The report of `command`: the envelope with `fields` in the caller's order, then each part's keys in order.

    Each key is written once: a key two parts (or a part and `fields`) would both write is a bug of the caller,
    raised here rather than left to whichever came last."""
    return extended(envelope(command, **fields), *parts)


def extended(report: dict[str, Any], *parts: ReportPart) -> dict[str, Any]:
    """`report` with the keys of `parts` known only once the tail has assembled it (`--model auto` chooses between
    two finished candidates' reports), under `assemble`'s rule: a key already written is a bug, raised here."""
    report = dict(report)
    for part in parts:
        section = part.to_dict()
        twice = sorted(report.keys() & section.keys())
        if twice:
            raise ValueError(f"{type(part).__name__} writes report keys already written: {', '.join(twice)}")
        report.update(section)
    return report
