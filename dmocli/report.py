"""JSON reports (stable keys, the same for every command) and the precision-recall plot.

Every report follows dmocli/schema/report.schema.json (documented in docs/report-schema.md); its
`schema_version` changes with that file: the minor number when keys are added, the major one when a key is
removed or changes type, so a CI script can check the one number it was written against.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dmocli.data.outputs import atomic_path, write_text
from dmocli.data.sources import describe
from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_interval
from dmocli.operating_point.calibration import Calibration, calibration_figures, probability
from dmocli.operating_point.class_offsets import decide
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.metrics import binary_scores, multiclass_scores
from dmocli.operating_point.multiclass_calibration import (
    MulticlassCalibration,
    class_probabilities,
    multiclass_calibration_figures,
)
from dmocli.operating_point.problems import Problem
from dmocli.version import __version__

if TYPE_CHECKING:
    from dmocli.prep.labels import LabelSpec

SCHEMA_VERSION = "1.9"  # the `version` of dmocli/schema/report.schema.json (tests check that they agree)


def written_now() -> str:
    """When a report is written, as its `written_at` keeps it: UTC, ISO 8601, to the second. The one clock a
    report carries, so the page drawn from it says when its input was made (never the clock at render time), and
    anything comparing two reports' bytes drops this key."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def omitted(default: Any = None) -> Any:
    """A field whose key the report leaves out while its value is None: an optional key of its schema definition."""
    return field(default=default, metadata={"report": "omitted"})


def inlined(default: Any = MISSING) -> Any:
    """A record whose keys the report writes at this level, as the schema's `allOf` of a shared definition does
    (the envelope, the label and problem fields); nothing while it is None."""
    return field(default=default, metadata={"report": "inlined"})


class ReportRecord:
    """A frozen dataclass that is one section of a report: `to_dict` writes each field under its name, in field
    order (the order the report shows), a nested record (or a mapping or list of them) as its own `to_dict`.
    The fields are the keys of the section's schema definition: tests/use/test_result_schema.py checks that
    both say the same, name by name, type by type."""

    def to_dict(self) -> dict[str, Any]:
        section: dict[str, Any] = {}
        for entry in fields(self):  # type: ignore[arg-type]  # every ReportRecord is a dataclass
            value, how = getattr(self, entry.name), entry.metadata.get("report")
            if how == "inlined":
                section.update({} if value is None else value.to_dict())
            elif not (how == "omitted" and value is None):
                section[entry.name] = plain(value)
        return section


def plain(value: Any) -> Any:
    """A report value with its records (any dataclass instance: they all have `to_dict`) written as dicts."""
    if is_dataclass(value) and not isinstance(value, type):
        return value.to_dict()  # type: ignore[attr-defined]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


@dataclass(frozen=True, kw_only=True)
class SplitCalibration(ReportRecord):
    """How well a binary split's probabilities are calibrated (report `split_calibration`): no key at all on a
    split without rows."""

    brier: float | None = omitted()
    ece: float | None = omitted()
    mean_probability: float | None = omitted()
    positive_rate: float | None = omitted()


@dataclass(frozen=True, kw_only=True)
class BinarySplit(ReportRecord):
    """A binary split at one threshold (report `binary_split`): the counts, the metrics and their intervals,
    the threshold-free AP and ROC AUC, and the calibration of its probabilities."""

    tp: int
    fp: int
    tn: int
    fn: int
    n: int
    n_pos: int
    precision: float
    recall: float
    f_beta: float
    f1: float
    precision_interval: list[float] | None
    recall_interval: list[float] | None
    interval_level: float
    beta: float
    threshold: float
    threshold_probability: float
    feasible: bool | None
    average_precision: float | None
    roc_auc: float | None
    calibration: SplitCalibration

    @classmethod
    def of(cls, split: dict[str, Any]) -> BinarySplit:
        """The record of a split report written as a dict (the train and threshold reports keep theirs so)."""
        return cls(**{**split, "calibration": SplitCalibration(**split["calibration"])})

    def summary_line(self, name: str, constrained: str | None) -> str:
        """The split in one line of the commands' summaries: its metrics (the `constrained` one, precision or
        recall, with its interval), its counts, and whether it met the target."""
        feasible = "" if self.feasible is None else f"  feasible={self.feasible}"
        return (
            f"{name:>6}: {self.figure('precision', constrained)}  {self.figure('recall', constrained)}  "
            f"F{self.beta:g} {self.f_beta:.4f}  (tp {self.tp}, fp {self.fp}, fn {self.fn}, n {self.n}){feasible}"
        )

    def figure(self, metric: str, constrained: str | None) -> str:
        """`recall 0.4120`; the constrained metric with its interval, where its value on new data lies (`precision
        0.9050 [0.879, 0.927] 95%`): a figure alone reads as more certain than a few hundred rows allow. No interval
        without trials (no predicted positive)."""
        value, interval = self.measured(metric)
        interval = interval if metric == constrained else None
        shown = "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}] {self.interval_level:.0%}"
        return f"{metric} {value:.4f}{shown}"

    def measured(self, metric: str) -> tuple[float, list[float] | None]:
        """Precision or recall, and its interval."""
        if metric == "precision":
            return self.precision, self.precision_interval
        return self.recall, self.recall_interval


@dataclass(frozen=True, kw_only=True)
class ClassCalibration(ReportRecord):
    """How well a multi-class split's class probabilities are calibrated (report `multiclass_split_calibration`):
    no key at all on a split without rows."""

    brier: float | None = omitted()
    ece: float | None = omitted()
    mean_probability: list[float] | None = omitted()
    class_rate: list[float] | None = omitted()


@dataclass(frozen=True, kw_only=True)
class ClassFigures(ReportRecord):
    """Each class's figures of a multi-class split (its `per_class`), lists in `classes` order."""

    support: list[int]
    precision: list[float]
    recall: list[float]
    f1: list[float]
    predicted: list[int]
    precision_interval: list[list[float] | None]
    recall_interval: list[list[float] | None]


@dataclass(frozen=True, kw_only=True)
class MulticlassSplit(ReportRecord):
    """A multi-class split (report `multiclass_split`): the decision's metrics, each class's, the confusion
    matrix, log loss and the calibration of the class probabilities."""

    n: int
    accuracy: float
    balanced_accuracy: float
    macro_f1: float
    per_class: ClassFigures
    confusion_matrix: list[list[int]]
    log_loss: float
    classes: list[Any]
    macro_precision: float
    macro_recall: float
    calibration: ClassCalibration

    @classmethod
    def of(cls, split: dict[str, Any]) -> MulticlassSplit:
        """The record of a split report written as a dict (the train and threshold reports keep theirs so)."""
        parts = {
            "per_class": ClassFigures(**split["per_class"]),
            "calibration": ClassCalibration(**split["calibration"]),
        }
        return cls(**{**split, **parts})

    def summary_line(self, name: str, constrained: str | None = None) -> str:
        """The split in one line of the commands' summaries (`constrained` is a binary split's)."""
        return (
            f"{name:>6}: accuracy {self.accuracy:.4f}  balanced accuracy {self.balanced_accuracy:.4f}  "
            f"macro F1 {self.macro_f1:.4f}  (n {self.n})  min recall {min(self.per_class.recall):.4f}"
        )


Split = BinarySplit | MulticlassSplit


def split_record(split: dict[str, Any]) -> Split:
    """The record of a split report written as a dict, of its kind."""
    return MulticlassSplit.of(split) if "per_class" in split else BinarySplit.of(split)


def binary_split(
    logits: np.ndarray,
    y: np.ndarray,
    *,
    threshold: float,
    problem: Problem | None,
    beta: float = 1.0,
    calibration: Calibration | None = None,
) -> BinarySplit:
    """Counts and metrics at `threshold`, their Clopper-Pearson intervals (two-sided, at REPORT_LEVEL: the range
    of precision and recall to expect on new data from the same distribution), and threshold-free AP and ROC AUC."""
    beta = problem.beta if problem else beta
    scores = binary_scores(y, logits >= threshold, beta)
    curve = ScoreCurve.from_scores(logits, y) if logits.size else None
    feasible = problem.feasible(scores["tp"], scores["fp"], scores["n_pos"]) if problem else None
    tp, fp, n_pos = int(scores["tp"]), int(scores["fp"]), int(scores["n_pos"])
    return BinarySplit(
        **scores,
        precision_interval=clopper_pearson_interval(tp, tp + fp),  # where precision on new data lies
        recall_interval=clopper_pearson_interval(tp, n_pos),
        interval_level=REPORT_LEVEL,
        beta=beta,
        threshold=float(threshold),
        threshold_probability=float(probability(np.asarray([threshold]), calibration)[0]),
        feasible=feasible,
        average_precision=curve.average_precision() if curve and scores["n_pos"] else None,
        roc_auc=curve.roc_auc() if curve else None,
        calibration=SplitCalibration(**calibration_figures(probability(logits, calibration), y)),
    )


def binary_split_report(
    logits: np.ndarray,
    y: np.ndarray,
    *,
    threshold: float,
    problem: Problem | None,
    beta: float = 1.0,
    calibration: Calibration | None = None,
) -> dict[str, Any]:
    """binary_split, as the dict the train and threshold reports keep."""
    return binary_split(logits, y, threshold=threshold, problem=problem, beta=beta, calibration=calibration).to_dict()


def multiclass_split(
    logits: np.ndarray,
    y: np.ndarray,
    classes: list[Any],
    *,
    calibration: MulticlassCalibration | None = None,
    offsets: np.ndarray | None = None,
) -> MulticlassSplit:
    """Metrics of the decision (the arg-max of the logits, plus the class offsets of an operating point where there
    are), each class's precision and recall with their Clopper-Pearson intervals, and log loss and calibration
    figures of the class probabilities (through `calibration` where there is one)."""
    proba = class_probabilities(logits, calibration)
    predicted = decide(logits, offsets)
    scores = multiclass_scores(y, predicted, len(classes), proba)
    matrix = np.asarray(scores["confusion_matrix"])
    tp, made = np.diag(matrix), matrix.sum(axis=0).tolist()
    per_class = ClassFigures(
        **scores.pop("per_class"),
        predicted=made,
        precision_interval=[clopper_pearson_interval(int(hit), int(n)) for hit, n in zip(tp, made)],
        recall_interval=[clopper_pearson_interval(int(hit), int(n)) for hit, n in zip(tp, matrix.sum(axis=1))],
    )
    return MulticlassSplit(
        **scores,
        per_class=per_class,
        classes=classes,
        macro_precision=float(np.mean(per_class.precision)),
        macro_recall=float(np.mean(per_class.recall)),
        calibration=ClassCalibration(**multiclass_calibration_figures(proba, y, predicted)),
    )


def multiclass_split_report(
    logits: np.ndarray,
    y: np.ndarray,
    classes: list[Any],
    *,
    calibration: MulticlassCalibration | None = None,
    offsets: np.ndarray | None = None,
) -> dict[str, Any]:
    """multiclass_split, as the dict the train and threshold reports keep."""
    return multiclass_split(logits, y, classes, calibration=calibration, offsets=offsets).to_dict()


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of every command's report, as shipped in the package: what a CI script can
    validate a report against (`jsonschema.validate(report, dmocli.report_schema())`)."""
    from importlib import resources

    return json.loads((resources.files("dmocli") / "schema" / "report.schema.json").read_text(encoding="utf-8"))


def envelope(command: str, **fields: Any) -> dict[str, Any]:
    """Keys every report carries (torch's version read from its metadata: importing it costs seconds)."""
    return {
        "command": command,
        "schema_version": SCHEMA_VERSION,
        "dmocli_version": __version__,
        "python": platform.python_version(),
        "torch": _installed_version("torch"),
        **fields,
    }


ErrorKind = Literal["bad_input", "unreachable", "machine", "unexpected", "usage", "interrupted"]


def failure(code: int, kind: ErrorKind, message: str) -> dict[str, Any]:
    """The keys a report gains when its command fails with exit status `code`: a script reading --json learns why
    from stdout alone, as a person does from the one line on stderr (`message`, that line without its `dmo: `)."""
    return {"message": message, "error": {"code": code, "kind": kind, "message": message}}


def label_fields(labels: LabelSpec) -> dict[str, Any]:
    """The label keys of every report about one model (train, threshold, evaluate, info): which column holds the
    label, its classes in the model's order, and the positive class (None for a multi-class model)."""
    return {"label_col": labels.column, "classes": labels.classes, "positive": labels.positive}


def model_summary(splits: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The few numbers of a report's splits worth keeping inside the model file (at its threshold)."""
    keep = ("precision", "recall", "f_beta", "feasible", "accuracy", "balanced_accuracy", "macro_f1")
    return {split: {k: v for k, v in values.items() if k in keep} for split, values in splits.items()}


def unlabeled_warning(n_unlabeled: int, source: object) -> list[str]:
    """The report's warning for rows of `source` without a label (none when every row has one)."""
    if not n_unlabeled:
        return []
    return [
        f"{n_unlabeled} rows of {describe(source)} have no label and are left out of its metrics "
        "(give every row a label to count them)"
    ]


def empty_prediction_warnings(splits: dict[str, dict[str, Any]]) -> list[str]:
    """A warning for each binary split where the threshold predicts no row positive: its precision is 0/0,
    which the report writes as 0 (scikit-learn's zero_division default), so a script reading the bare number
    would mistake "no prediction" for "every prediction wrong"."""
    return [
        f"no row of the {name} split is predicted positive at the threshold, so its precision is 0/0 (reported "
        "as 0, with no precision_interval): lower the target or check that the data matches the model"
        for name, split in splits.items()
        if "tp" in split and split["n"] and split["tp"] + split["fp"] == 0
    ]


@cache
def _installed_version(package: str) -> str | None:
    """The package's version, looked up once a process (reading the installed metadata takes milliseconds)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def dumps(report: dict[str, Any]) -> str:
    """Strict JSON: a NaN or infinite figure (an F-beta of no prediction, a loss never computed) is null,
    which every JSON reader accepts; json's own NaN/Infinity tokens are not JSON."""
    return json.dumps(_finite(report), indent=2, default=_default, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return None
    return value


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    write_text(path, dumps(report))


def plot_pr_curve(
    path: str | Path, logits: np.ndarray, y: np.ndarray, *, threshold: float, problem: Problem | None, title: str
) -> None:
    """Precision-recall curve with the operating point and the target line marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = ScoreCurve.from_scores(logits, y)
    rec, prec = curve.pr_points()
    point = binary_scores(y, logits >= threshold)
    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=120)
    ax.step(rec, prec, where="post", color="tab:blue", label=f"PR curve (AP {curve.average_precision():.3f})")
    ax.plot(
        [point["recall"]],
        [point["precision"]],
        "o",
        color="tab:red",
        markersize=8,
        label=f"operating point (P {point['precision']:.3f}, R {point['recall']:.3f})",
    )
    if problem and problem.kind == "fpor":
        ax.axhline(
            problem.target, color="gray", linestyle="--", linewidth=1, label=f"precision target {problem.target:g}"
        )
    elif problem and problem.kind == "frop":
        ax.axvline(problem.target, color="gray", linestyle="--", linewidth=1, label=f"recall target {problem.target:g}")
    ax.set_xlim(0, 1.01)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=8)
    save_figure(fig, path)


def save_figure(fig, path: str | Path) -> None:
    """Write a matplotlib figure as PNG atomically and release it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
