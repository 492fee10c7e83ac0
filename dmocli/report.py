"""JSON reports (stable keys, the same for every command) and the precision-recall plot.

Every report follows dmocli/schema/report.schema.json (documented in docs/report-schema.md); its
`schema_version` changes with that file: the minor number when keys are added, the major one when a key is
removed or changes type, so a CI script can check the one number it was written against.
"""

from __future__ import annotations

import json
import math
import platform
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

SCHEMA_VERSION = "1.7"  # the `version` of dmocli/schema/report.schema.json (tests check that they agree)


def binary_split_report(
    logits: np.ndarray,
    y: np.ndarray,
    *,
    threshold: float,
    problem: Problem | None,
    beta: float = 1.0,
    calibration: Calibration | None = None,
) -> dict[str, Any]:
    """Counts and metrics at `threshold`, their Clopper-Pearson intervals (two-sided, at REPORT_LEVEL: the range
    of precision and recall to expect on new data from the same distribution), and threshold-free AP and ROC AUC."""
    beta = problem.beta if problem else beta
    scores = binary_scores(y, logits >= threshold, beta)
    curve = ScoreCurve.from_scores(logits, y) if logits.size else None
    feasible = problem.feasible(scores["tp"], scores["fp"], scores["n_pos"]) if problem else None
    tp, fp, n_pos = int(scores["tp"]), int(scores["fp"]), int(scores["n_pos"])
    return {
        **scores,
        "precision_interval": clopper_pearson_interval(tp, tp + fp),  # where precision on new data lies
        "recall_interval": clopper_pearson_interval(tp, n_pos),
        "interval_level": REPORT_LEVEL,
        "beta": beta,
        "threshold": float(threshold),
        "threshold_probability": float(probability(np.asarray([threshold]), calibration)[0]),
        "feasible": feasible,
        "average_precision": curve.average_precision() if curve and scores["n_pos"] else None,
        "roc_auc": curve.roc_auc() if curve else None,
        "calibration": calibration_figures(probability(logits, calibration), y),
    }


def multiclass_split_report(
    logits: np.ndarray,
    y: np.ndarray,
    classes: list[Any],
    *,
    calibration: MulticlassCalibration | None = None,
    offsets: np.ndarray | None = None,
) -> dict[str, Any]:
    """Metrics of the decision (the arg-max of the logits, plus the class offsets of an operating point where there
    are), each class's precision and recall with their Clopper-Pearson intervals, and log loss and calibration
    figures of the class probabilities (through `calibration` where there is one)."""
    proba = class_probabilities(logits, calibration)
    predicted = decide(logits, offsets)
    out = multiclass_scores(y, predicted, len(classes), proba)
    out["classes"] = classes
    per_class, tp = out["per_class"], np.diag(np.asarray(out["confusion_matrix"]))
    per_class["predicted"] = np.asarray(out["confusion_matrix"]).sum(axis=0).tolist()
    per_class["precision_interval"] = [
        clopper_pearson_interval(int(hit), int(made)) for hit, made in zip(tp, per_class["predicted"])
    ]
    per_class["recall_interval"] = [
        clopper_pearson_interval(int(hit), int(rows)) for hit, rows in zip(tp, per_class["support"])
    ]
    out["macro_precision"] = float(np.mean(per_class["precision"]))
    out["macro_recall"] = float(np.mean(per_class["recall"]))
    out["calibration"] = multiclass_calibration_figures(proba, y, predicted)
    return out


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
