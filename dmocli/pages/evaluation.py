"""The evaluation page (`dmo evaluate --html`, `dmo report eval.json`): a model's figures on the evaluated rows, drawn
from the evaluate report alone, so the page made at the run and the page made later from its JSON are the same bytes.

It says first, in words, whether the target is met (and the gate's verdict where `--gate` was asked), then shows
the confusion matrix at the threshold, the precision-recall curve with the operating point and its intervals, the
metrics against the threshold, the reliability diagram and the scores per class (a binary model: the report's
`figures`), or each class's precision and recall with their intervals against the floors (a multi-class model),
and the data: rows, unseen levels and warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dmocli.pages.document import Figure, Page, Table
from dmocli.pages.score_plots import (
    CURVE_COLOUR,
    POSITIVE_COLOUR,
    TARGET_COLOUR,
    Curve,
    confusion_figure,
    histogram_figure,
    matrix_figure,
    pr_curve_figure,
    reliability_figure,
    threshold_figure,
)
from dmocli.pages.svg import new_figure
from dmocli.use.verdicts import Gate, gate_line


def evaluation_page(report: Mapping[str, Any], *, model_sha256: str | None = None) -> str:
    """The page of an evaluate report (the dict `dmo evaluate --report` writes); the model file's sha256 is the
    report's own unless given."""
    split = report["splits"]["data"]
    page = Page(
        f"Evaluation of {report['model']} on {report['data']}", kind="evaluation", facts=facts(report, model_sha256)
    )
    page.section("The target", anchor="verdict")
    for line, css in verdict_lines(report):
        page.text(line, css_class=css)
    if "per_class" in split:
        _multiclass(page, report, split)
    else:
        _binary(page, report, split)
    _data(page, report, split)
    return page.html()


def facts(report: Mapping[str, Any], model_sha256: str | None) -> dict[str, str]:
    """The header: what was evaluated, on what, by which dmo, and when the report was written (its `written_at`;
    the page adds no date of its own)."""
    return {
        "model file": str(report["model"]),
        "model sha256": model_sha256 or report.get("model_sha256") or "not known (a model object was evaluated)",
        "data": str(report["data"]),
        "made": report_written(report),
        "operating point": _problem_words(report),
        "dmo version": str(report["dmocli_version"]),
        "report schema": str(report["schema_version"]),
    }


def report_written(report: Mapping[str, Any]) -> str:
    """When an evaluate or monitor report was written, from its `written_at` (a report of an older dmo has none)."""
    written = report.get("written_at")
    return f"report written {written}" if written else "not recorded: the report keeps no date (an older dmo's)"


def _problem_words(report: Mapping[str, Any]) -> str:
    problem, target = report.get("problem"), report.get("target")
    if problem == "fpor":
        return f"fpor: precision >= {target:g}, most recall"
    if problem == "frop":
        return f"frop: recall >= {target:g}, most precision"
    if problem == "ofbs":
        return f"ofbs: the best F{report.get('beta') or 1:g}"
    return str(problem)


def verdict_lines(report: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The target met or missed in words (a `met` or `missed` paragraph), and the gate's verdict where it ran."""
    split, gate = report["splits"]["data"], report.get("gate")
    lines = _class_verdicts(report, split) if "per_class" in split else [_binary_verdict(report, split)]
    if gate is not None:
        line = gate_line(Gate(**gate), str(report["data"]))
        lines.append((line, None if gate["passed"] is None else "met" if gate["passed"] else "missed"))
    return lines


def _binary_verdict(report: Mapping[str, Any], split: Mapping[str, Any]) -> tuple[str, str | None]:
    metric = {"fpor": "precision", "frop": "recall"}.get(report.get("problem"))
    level = float(split["interval_level"])
    if metric is None:
        return (
            f"The model has no target (ofbs): F{split['beta']:g} is {split['f_beta']:.4f} at its threshold, with "
            f"precision {split['precision']:.4f} and recall {split['recall']:.4f} on {split['n']:,} rows.",
            "note",
        )
    value, interval, target = split[metric], split.get(f"{metric}_interval"), report["target"]
    shown = "" if interval is None else f" ({level:.0%} interval {interval[0]:.3f} to {interval[1]:.3f})"
    met = bool(split.get("feasible"))
    words = f"The target is {'met' if met else 'missed'}: {metric} is {value:.4f}{shown} on {split['n']:,} rows, "
    words += f"{'at or above' if met else 'below'} the target {target:g}."
    if interval is not None and interval[0] < target <= interval[1]:
        words += f" The interval reaches {'below' if met else 'above'} the target: on new rows like these it may be "
        words += "missed." if met else "met; more rows would tell."
    return words, "met" if met else "missed"


def _class_verdicts(report: Mapping[str, Any], split: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    gate = report.get("gate") or {}
    if not gate.get("classes"):
        return [
            (
                f"A multi-class model: accuracy {split['accuracy']:.4f}, balanced accuracy "
                f"{split['balanced_accuracy']:.4f}, macro F1 {split['macro_f1']:.4f} on {split['n']:,} rows; no class "
                "floor was gated (dmo evaluate --gate checks a model trained for class floors).",
                "note",
            )
        ]
    lines = []
    for entry in gate["classes"]:
        met = bool(entry["passed"])
        words = (
            f"Class {entry['class']!r}: {gate['metric']} {entry['value']:.4f} is {'at or above' if met else 'below'} "
            f"its floor {entry['target']:g}."
        )
        lines.append((words, "met" if met else "missed"))
    return lines


def _binary(page: Page, report: Mapping[str, Any], split: Mapping[str, Any]) -> None:
    classes = report.get("classes") or ["0", "1"]
    positive = report.get("positive")
    negative = next((c for c in classes if c != positive), classes[0])
    page.section("At the threshold", anchor="threshold")
    page.text(
        f"The model flags rows scoring at or above logit {split['threshold']:.6g} (probability "
        f"{split['threshold_probability']:.4f}): {split['tp'] + split['fp']:,} of {split['n']:,} rows. AP "
        f"{_number(split.get('average_precision'))}, ROC AUC {_number(split.get('roc_auc'))}."
    )
    page.figure(confusion_figure(split, (str(negative), str(positive))))
    figures = report.get("figures")
    if figures is None:
        page.text(
            "The report keeps no figures' data (an evaluate report of an older dmo): no curves.", css_class="note"
        )
        return
    curve = Curve.of(figures, split)
    page.section("Precision and recall", anchor="curves")
    page.figures(pr_curve_figure(curve, split, report), threshold_figure(curve, split, report))
    page.section("Probabilities and scores", anchor="scores-section")
    page.figures(reliability_figure(figures, split), histogram_figure(figures, split))


def _multiclass(page: Page, report: Mapping[str, Any], split: Mapping[str, Any]) -> None:
    page.section("Per class", anchor="classes")
    names = [str(name) for name in split["classes"]]
    matrix = matrix_figure(split["confusion_matrix"], names, anchor="confusion", title="Confusion matrix")
    page.figures(_class_figure(report, split), matrix)


def _class_figure(report: Mapping[str, Any], split: Mapping[str, Any]) -> Figure:
    """Each class's precision and recall with their intervals, and a gated class's floor."""
    per_class, names = split["per_class"], [str(name) for name in split["classes"]]
    floors = {str(entry["class"]): entry["target"] for entry in (report.get("gate") or {}).get("classes") or []}
    metric = (report.get("gate") or {}).get("metric")
    x = np.arange(len(names))
    fig, ax = new_figure(max(5.0, 1.0 + 0.7 * len(names)), 4.0)
    rows = []
    for offset, name, colour in ((-0.18, "precision", CURVE_COLOUR), (0.18, "recall", POSITIVE_COLOUR)):
        values = np.asarray(per_class[name], dtype=np.float64)
        intervals = [i or [v, v] for i, v in zip(per_class[f"{name}_interval"], values)]
        err = [values - [i[0] for i in intervals], [i[1] for i in intervals] - values]
        ax.bar(x + offset, values, width=0.36, color=colour, label=name)
        ax.errorbar(x + offset, values, yerr=err, fmt="none", ecolor="black", capsize=3)
    for k, name in enumerate(names):
        if name in floors:
            ax.hlines(floors[name], k - 0.4, k + 0.4, color=TARGET_COLOUR, linestyle="--", linewidth=1.2)
        rows.append(
            [
                name,
                per_class["support"][k],
                per_class["predicted"][k],
                per_class["precision"][k],
                *(per_class["precision_interval"][k] or [None, None]),
                per_class["recall"][k],
                *(per_class["recall_interval"][k] or [None, None]),
                floors.get(name),
            ]
        )
    ax.set_xticks(x, names)
    ax.set(ylim=(0, 1.05), xlabel="class", ylabel="metric")
    ax.set_title("Precision and recall per class" + (f" (dashes: the {metric} floors)" if floors else ""))
    ax.legend(loc="lower right", fontsize=8)
    table = Table(
        "Each class's rows, predictions, precision and recall (95% Clopper-Pearson intervals) and its floor",
        [
            "class",
            "rows",
            "predicted",
            "precision",
            "precision low",
            "precision high",
            "recall",
            "recall low",
            "recall high",
            "floor",
        ],
        rows,
    )
    alt = "Precision and recall of each class: " + "; ".join(
        f"{row[0]} precision {row[3]:.3f}, recall {row[6]:.3f}" for row in rows
    )
    return Figure.of(fig, anchor="per-class", title="Precision and recall per class", alt=alt, table=table)


def _data(page: Page, report: Mapping[str, Any], split: Mapping[str, Any]) -> None:
    page.section("The data", anchor="data")
    seen = report.get("training_rows") or {}
    rows = [
        ["rows evaluated (labeled)", split["n"]],
        ["positive rows", split.get("n_pos")],
        ["rows without a label (left out)", report.get("unlabeled_rows")],
        ["share of rows the model was trained on", seen.get("share")],
    ]
    page.table(Table("What was evaluated", ["what", "count"], [row for row in rows if row[1] is not None]))
    unseen, missing = report.get("unseen_levels") or {}, report.get("missing_levels") or {}
    if unseen or missing:
        names = sorted(set(unseen) | set(missing))
        page.table(
            Table(
                "Rows at levels the model never saw, and rows missing a level, per categorical column",
                ["column", "rows at unseen levels", "rows missing"],
                [[name, unseen.get(name, 0), missing.get(name, 0)] for name in names],
            )
        )
    for warning in report.get("warnings") or []:
        page.text(f"Warning: {warning}", css_class="note")


def _number(value: float | None) -> str:
    return "not defined" if value is None else f"{value:.4f}"
