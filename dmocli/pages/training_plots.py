"""The figures only the training page has: the precision-recall curve with the certificate's bound, the
reliability diagram before and after the probability map, the cross-fitting folds, the feature importance and a
multi-class model's classes against their floors. The figures it shares with the evaluation page (metrics against
the threshold, scores per class) are score_plots'. Each comes with the table of every number it shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from dmocli.operating_point.bounds import clopper_pearson_interval
from dmocli.pages.document import Figure, Table
from dmocli.pages.score_plots import CURVE_COLOUR, NEGATIVE_COLOUR, POINT_COLOUR, POSITIVE_COLOUR, TARGET_COLOUR, Curve
from dmocli.pages.svg import REDDISH_PURPLE, new_figure

BOUND_COLOUR = REDDISH_PURPLE
METRIC_OF = {"fpor": "precision", "frop": "recall"}


def certified_pr_figure(curve: Curve, split: Mapping[str, Any], report: Mapping[str, Any]) -> Figure:
    """The held-out precision-recall curve, the operating point (gid `operating-point`) with its interval, the
    target, and the certificate: the --confidence lower bound of the constrained metric (gid `certificate-bound`),
    or without --confidence its interval on the held-out rows."""
    point = report.get("operating_point") or {}
    metric, target = METRIC_OF.get(str(report.get("problem"))), report.get("target")
    p, r = float(split["precision"]), float(split["recall"])
    fig, ax = new_figure(6.4, 4.6)
    ax.plot(curve.recall, curve.precision, color=CURVE_COLOUR, linewidth=1.6, label="precision-recall curve")
    _point_errors(ax, split, p, r)
    (marker,) = ax.plot(
        [r], [p], "o", color=POINT_COLOUR, markersize=8, label=f"operating point (P {p:.3f}, R {r:.3f})"
    )
    marker.set_gid("operating-point")
    if metric == "precision":
        ax.axhline(target, color=TARGET_COLOUR, linestyle="--", linewidth=1, label=f"precision target {target:g}")
    elif metric == "recall":
        ax.axvline(target, color=TARGET_COLOUR, linestyle="--", linewidth=1, label=f"recall target {target:g}")
    bound = point.get("constraint_bound") if report.get("confidence") is not None else None
    if bound is not None and metric is not None:
        level = float(report["confidence"])
        at = (r, float(bound)) if metric == "precision" else (float(bound), p)
        (shown,) = ax.plot(
            *[[v] for v in at],
            "v" if metric == "precision" else "<",
            color=BOUND_COLOUR,
            markersize=9,
            label=f"certified {metric} >= {float(bound):.3f} ({level:g})",
        )
        shown.set_gid("certificate-bound")
    ax.set(xlim=(0, 1.01), ylim=(0, 1.01), xlabel="recall (share of positive rows flagged)", ylabel="precision")
    ax.set_title("Held-out precision-recall curve and the operating point")
    ax.legend(loc="lower left", fontsize=8)
    table = Table(
        "The operating point, its certificate and each cut of the held-out curve (a cut is a logit: rows scoring at "
        "or above it are flagged)",
        ["point", "cut (logit)", "precision", "recall", "true positives", "false positives"],
        [
            ["operating point", float(split["threshold"]), p, r, int(split["tp"]), int(split["fp"])],
            *_bound_rows(report, metric, bound),
            *[
                [f"cut {k + 1}", float(t), float(pr), float(rc), int(tp), int(fp)]
                for k, (t, pr, rc, tp, fp) in enumerate(
                    zip(curve.threshold, curve.precision, curve.recall, curve.tp, curve.fp)
                )
            ],
        ],
    )
    alt = f"Precision against recall over {curve.tp.size} cuts of the held-out rows; the operating point at recall "
    alt += f"{r:.3f}, precision {p:.3f}"
    if bound is not None and metric is not None:
        alt += f"; the {metric} certified at or above {float(bound):.3f} with probability {report['confidence']:g}"
    if metric is not None:
        alt += f"; the {metric} target {target:g} as a dashed line"
    return Figure.of(fig, anchor="pr-curve", title="Precision-recall curve and the certificate", alt=alt, table=table)


def _point_errors(ax: Any, split: Mapping[str, Any], p: float, r: float) -> None:
    p_int, r_int = split.get("precision_interval"), split.get("recall_interval")
    if p_int is None and r_int is None:
        return
    yerr = None if p_int is None else [[p - p_int[0]], [p_int[1] - p]]
    xerr = None if r_int is None else [[r - r_int[0]], [r_int[1] - r]]
    level = float(split.get("interval_level") or 0.95)
    ax.errorbar(
        [r],
        [p],
        yerr=yerr,
        xerr=xerr,
        fmt="none",
        ecolor=POINT_COLOUR,
        elinewidth=1.2,
        capsize=3,
        label=f"{level:.0%} interval",
    )


def _bound_rows(report: Mapping[str, Any], metric: str | None, bound: float | None) -> list[list[Any]]:
    point = report.get("operating_point") or {}
    rows: list[list[Any]] = []
    if bound is not None and metric is not None:
        rows.append(
            [f"certified lower bound of {metric} ({report['confidence']:g})", None, *_at(metric, bound), None, None]
        )
    interval = point.get("constraint_interval")
    if interval is not None and metric is not None:
        rows.append([f"{metric} interval, low (95%)", None, *_at(metric, interval[0]), None, None])
        rows.append([f"{metric} interval, high (95%)", None, *_at(metric, interval[1]), None, None])
    return rows


def _at(metric: str, value: float) -> list[float | None]:
    return [float(value), None] if metric == "precision" else [None, float(value)]


def reliability_pair_figure(figures: Mapping[str, Any], level: float) -> Figure:
    """The observed positive rate against the mean probability per bin, before the probability map (the logit's
    sigmoid) and after it, each with its Clopper-Pearson interval; the diagonal is perfect calibration."""
    fig, ax = new_figure(5.6, 4.6)
    ax.plot([0, 1], [0, 1], color=TARGET_COLOUR, linestyle="--", linewidth=1, label="perfectly calibrated")
    rows: list[list[Any]] = []
    for name, bins, colour, shape in (
        ("before (sigmoid of the logit)", figures["uncalibrated"], NEGATIVE_COLOUR, "s--"),
        ("after the probability map", figures["reliability"], CURVE_COLOUR, "o-"),
    ):
        xs, ys, low, high = [], [], [], []
        count = len(bins["rows"])
        for k, (n, pos, mean) in enumerate(zip(bins["rows"], bins["positives"], bins["mean_probability"])):
            interval = clopper_pearson_interval(int(pos), int(n), level) if n else None
            rate = pos / n if n else None
            rows.append(
                [name, f"{k / count:.1f}-{(k + 1) / count:.1f}", n, pos, mean, rate, *(interval or [None, None])]
            )
            if n and interval is not None:
                xs.append(mean)
                ys.append(rate)
                low.append(rate - interval[0])
                high.append(interval[1] - rate)
        ax.errorbar(xs, ys, yerr=[low, high], fmt=shape, color=colour, capsize=3, markersize=5, label=name)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean predicted probability in the bin", ylabel="observed positive rate")
    ax.set_title("Reliability before and after the probability map")
    ax.legend(loc="upper left", fontsize=8)
    table = Table(
        f"Rows, positives, mean probability and observed positive rate per probability bin, before and after the "
        f"probability map ({level:.0%} Clopper-Pearson interval of the rate)",
        ["probabilities", "bin", "rows", "positives", "mean probability", "observed rate", "rate low", "rate high"],
        rows,
    )
    alt = (
        "Observed positive rate against mean predicted probability in 10 bins, for the logit's sigmoid (before) and "
        "the fitted probability map (after); points on the diagonal are calibrated"
    )
    return Figure.of(fig, anchor="reliability", title="Reliability diagram", alt=alt, table=table)


def folds_figure(cv: Mapping[str, Any], *, beta: float) -> Figure:
    """Each cross-fitting fold's rows, positives and figures at its own searched cut (a binary model: precision,
    recall and F-beta; a multi-class model: accuracy, balanced accuracy and macro F1)."""
    folds = cv["per_fold"]
    binary = "precision" in folds[0]
    names = ("precision", "recall", "f_beta") if binary else ("accuracy", "balanced_accuracy", "macro_f1")
    labels = {"f_beta": f"F{beta:g}", "balanced_accuracy": "balanced accuracy", "macro_f1": "macro F1"}
    x = np.arange(len(folds))
    fig, ax = new_figure(max(5.0, 1.5 + 1.1 * len(folds)), 3.8)
    for k, (name, colour) in enumerate(zip(names, (CURVE_COLOUR, POSITIVE_COLOUR, NEGATIVE_COLOUR))):
        values = [float(fold.get(name) or 0.0) for fold in folds]
        ax.bar(x + (k - 1) * 0.27, values, width=0.27, color=colour, label=labels.get(name, name))
    ax.set_xticks(x, [f"fold {fold['fold'] + 1}" for fold in folds])
    ax.set(ylim=(0, 1.05), xlabel="cross-fitting fold (its out-of-fold rows)", ylabel="metric")
    ax.set_title("Each fold's figures on its held-out rows")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8, frameon=False)
    columns = [
        "fold",
        "rows",
        "positives" if binary else None,
        "threshold (logit)" if binary else None,
        *names,
        "feasible" if binary else None,
    ]
    kept = [column for column in columns if column is not None]
    keys = {"fold": "fold", "rows": "n", "positives": "n_pos", "threshold (logit)": "threshold", "feasible": "feasible"}
    rows = [[fold["fold"] + 1 if c == "fold" else fold.get(keys.get(c, c)) for c in kept] for fold in folds]
    table = Table(
        "Each cross-fitting fold: its held-out rows and the figures of its own searched cut",
        [labels.get(column, column) for column in kept],
        rows,
    )
    alt = (
        f"{len(folds)} folds' "
        + ", ".join(labels.get(n, n) for n in names)
        + ": "
        + "; ".join(
            f"fold {fold['fold'] + 1} " + ", ".join(f"{float(fold.get(n) or 0):.3f}" for n in names) for fold in folds
        )
    )
    return Figure.of(fig, anchor="folds", title="Cross-fitting folds", alt=alt, table=table)


def importance_figure(importance: Mapping[str, Any]) -> Figure:
    """The most important feature columns, most important on top; a binary linear model's bars coloured by the
    sign of the column's coefficient (which way it pushes the logit)."""
    columns: Sequence[Mapping[str, Any]] = importance["columns"]
    names = [str(column["name"]) for column in columns]
    values = [float(column["importance"] or 0.0) for column in columns]
    signs = [_sign(column.get("coefficient")) for column in columns]
    colours = [{"+": POSITIVE_COLOUR, "-": CURVE_COLOUR}.get(sign, NEGATIVE_COLOUR) for sign in signs]
    fig, ax = new_figure(6.4, 1.2 + 0.24 * max(len(names), 1))
    y = np.arange(len(names))
    ax.barh(y, values, color=colours)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set(xlabel=_importance_unit(str(importance["method"])), ylabel="feature column")
    title = f"The {len(names)} most important feature columns"
    ax.set_title(title)
    if any(signs):
        ax.legend(
            handles=[
                Patch(color=POSITIVE_COLOUR, label="raises the score"),
                Patch(color=CURVE_COLOUR, label="lowers it"),
            ],
            loc="lower right",
            fontsize=8,
        )
    table = Table(
        f"{title}: {importance['method']}",
        ["rank", "column", "kind", "importance", "coefficient (per standard deviation)", "direction"],
        [
            [k + 1, name, column["kind"], column["importance"], column.get("coefficient"), _direction(sign)]
            for k, (name, column, sign) in enumerate(zip(names, columns, signs))
        ],
    )
    alt = f"{title}, by {importance['method']}: " + "; ".join(
        f"{name} {value:.3g}{'' if not sign else ' (' + _direction(sign) + ')'}"
        for name, value, sign in zip(names, values, signs)
    )
    return Figure.of(fig, anchor="importance", title="Feature importance", alt=alt, table=table)


def _sign(coefficient: Any) -> str | None:
    if not isinstance(coefficient, (int, float)) or coefficient == 0:
        return None
    return "+" if coefficient > 0 else "-"


def _direction(sign: str | None) -> str | None:
    return {"+": "raises the score", "-": "lowers the score"}.get(sign or "")


def _importance_unit(method: str) -> str:
    if method.startswith("total gain"):
        return "total gain of the column's splits (loss reduction)"
    if method.startswith("mean absolute contribution"):
        return "mean absolute contribution to the logit"
    return "importance"


def class_floors_figure(point: Mapping[str, Any]) -> Figure:
    """A multi-class operating point: each class's precision and recall at the class offsets, with their
    intervals, against its floor (the recall floors of frop, the precision floors of fpor)."""
    per_class = point["per_class"]
    kind = str(point.get("kind"))
    metric = METRIC_OF.get(kind)
    names = [str(entry["class"]) for entry in per_class]
    x = np.arange(len(names))
    fig, ax = new_figure(max(5.0, 1.2 + 0.8 * len(names)), 4.0)
    for offset, name, colour in ((-0.18, "precision", CURVE_COLOUR), (0.18, "recall", POSITIVE_COLOUR)):
        values = np.asarray([float(entry[name]) for entry in per_class])
        intervals = [entry.get(f"{name}_interval") or [v, v] for entry, v in zip(per_class, values)]
        err = [values - [i[0] for i in intervals], [i[1] for i in intervals] - values]
        ax.bar(x + offset, values, width=0.36, color=colour, label=name)
        ax.errorbar(x + offset, values, yerr=err, fmt="none", ecolor="black", capsize=3)
    floors = [entry.get("floor") for entry in per_class]
    for k, floor in enumerate(floors):
        if floor is not None:
            ax.hlines(floor, k - 0.4, k + 0.4, color=TARGET_COLOUR, linestyle="--", linewidth=1.4, gid=f"floor-{k + 1}")
    ax.set_xticks(x, names)
    ax.set(ylim=(0, 1.05), xlabel="class", ylabel="metric on the held-out rows")
    ax.set_title("Each class at the offsets" + (f" (dashes: the {metric} floors)" if metric else ""))
    ax.legend(loc="lower right", fontsize=8)
    table = Table(
        "Each class's offset, rows, predictions, precision and recall (95% Clopper-Pearson intervals), its floor and "
        "whether it is met",
        [
            "class",
            "offset",
            "rows",
            "predicted",
            "precision",
            "precision low",
            "precision high",
            "recall",
            "recall low",
            "recall high",
            "floor",
            "meets floor",
        ],
        [
            [
                name,
                entry.get("offset"),
                entry.get("support"),
                entry.get("predicted"),
                entry["precision"],
                *(entry.get("precision_interval") or [None, None]),
                entry["recall"],
                *(entry.get("recall_interval") or [None, None]),
                entry.get("floor"),
                entry.get("meets_floor"),
            ]
            for name, entry in zip(names, per_class)
        ],
    )
    alt = "Precision and recall of each class at its offset: " + "; ".join(
        f"{name} precision {float(e['precision']):.3f}, recall {float(e['recall']):.3f}"
        + ("" if e.get("floor") is None else f", {metric} floor {float(e['floor']):g}")
        for name, e in zip(names, per_class)
    )
    return Figure.of(fig, anchor="per-class", title="Classes against their floors", alt=alt, table=table)
