"""The figures of a binary split on labeled rows, drawn from a report's `figures` (report_figures.ScoreFigures) and
its split: the precision-recall curve with the operating point and its intervals, precision, recall and F-beta
against the threshold with the cut marked, the reliability diagram and the score distribution per class, and the
confusion matrix at the threshold. Each comes with the table of every number it shows.

Intervals are two-sided Clopper-Pearson at the split's `interval_level`, computed from the counts the report keeps,
so the page shows exactly what the report says, and the same report gives the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.operating_point.bounds import clopper_pearson_interval
from dmocli.pages.document import Figure, Table
from dmocli.pages.svg import BLUE, CUT_STYLE, DARK_GREY, GREY, REDDISH_PURPLE, SKY_BLUE, VERMILLION, new_figure

CURVE_COLOUR, POINT_COLOUR, TARGET_COLOUR, BAND_COLOUR = BLUE, "black", DARK_GREY, SKY_BLUE
NEGATIVE_COLOUR, POSITIVE_COLOUR, F_BETA_COLOUR = GREY, VERMILLION, REDDISH_PURPLE


@dataclass(frozen=True)
class Curve:
    """The curve's cuts as arrays, with precision, recall and F-beta derived from the counts."""

    threshold: np.ndarray
    probability: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    n_pos: int
    beta: float

    @classmethod
    def of(cls, figures: Mapping[str, Any], split: Mapping[str, Any]) -> Curve:
        curve = figures["curve"]
        return cls(
            threshold=np.asarray(curve["threshold"], dtype=np.float64),
            probability=np.asarray(curve["probability"], dtype=np.float64),
            tp=np.asarray(curve["tp"], dtype=np.int64),
            fp=np.asarray(curve["fp"], dtype=np.int64),
            n_pos=int(split["n_pos"]),
            beta=float(split["beta"]),
        )

    @property
    def precision(self) -> np.ndarray:
        return self.tp / np.maximum(self.tp + self.fp, 1)

    @property
    def recall(self) -> np.ndarray:
        return self.tp / max(self.n_pos, 1)

    @property
    def f_beta(self) -> np.ndarray:
        p, r, b2 = self.precision, self.recall, self.beta**2
        return np.where(p + r > 0, (1 + b2) * p * r / np.maximum(b2 * p + r, 1e-300), 0.0)


def _interval(successes: int, trials: int, level: float) -> tuple[float | None, float | None]:
    found = clopper_pearson_interval(int(successes), int(trials), level)
    return (None, None) if found is None else (found[0], found[1])


def _target_metric(problem: Mapping[str, Any]) -> str | None:
    return {"fpor": "precision", "frop": "recall"}.get(problem.get("problem"))


def pr_curve_figure(curve: Curve, split: Mapping[str, Any], problem: Mapping[str, Any]) -> Figure:
    """The precision-recall curve with its pointwise precision interval as a band, the operating point (gid
    `operating-point`) with its precision and recall intervals as error bars, and the target line."""
    level = float(split["interval_level"])
    bands = [_interval(tp, tp + fp, level) for tp, fp in zip(curve.tp, curve.fp)]
    low = np.asarray([np.nan if b[0] is None else b[0] for b in bands])
    high = np.asarray([np.nan if b[1] is None else b[1] for b in bands])
    fig, ax = new_figure(6.4, 4.6)
    ax.fill_between(curve.recall, low, high, color=BAND_COLOUR, alpha=0.5, linewidth=0, label=f"precision {level:.0%}")
    ax.plot(curve.recall, curve.precision, color=CURVE_COLOUR, linewidth=1.6, label="precision-recall curve")
    p, r = float(split["precision"]), float(split["recall"])
    p_int, r_int = split.get("precision_interval"), split.get("recall_interval")
    yerr = None if p_int is None else [[p - p_int[0]], [p_int[1] - p]]
    xerr = None if r_int is None else [[r - r_int[0]], [r_int[1] - r]]
    ax.errorbar([r], [p], yerr=yerr, xerr=xerr, fmt="none", ecolor=POINT_COLOUR, elinewidth=1.2, capsize=3)
    (marker,) = ax.plot(
        [r], [p], "o", color=POINT_COLOUR, markersize=8, label=f"operating point (P {p:.3f}, R {r:.3f})"
    )
    marker.set_gid("operating-point")
    metric, target = _target_metric(problem), problem.get("target")
    if metric == "precision":
        ax.axhline(target, color=TARGET_COLOUR, linestyle="--", linewidth=1, label=f"precision target {target:g}")
    elif metric == "recall":
        ax.axvline(target, color=TARGET_COLOUR, linestyle="--", linewidth=1, label=f"recall target {target:g}")
    ax.set(xlim=(0, 1.01), ylim=(0, 1.01), xlabel="recall (share of positive rows flagged)", ylabel="precision")
    ax.set_title("Precision-recall curve and the operating point")
    ax.legend(loc="lower left", fontsize=8)
    rows = [
        [
            f"cut {k + 1}",
            t,
            pr,
            *_interval(tp, tp + fp, level),
            rc,
            *_interval(tp, curve.n_pos, level),
            int(tp),
            int(fp),
        ]
        for k, (t, pr, rc, tp, fp) in enumerate(zip(curve.threshold, curve.precision, curve.recall, curve.tp, curve.fp))
    ]
    point = [
        "operating point",
        float(split["threshold"]),
        p,
        *(p_int or [None, None]),
        r,
        *(r_int or [None, None]),
        int(split["tp"]),
        int(split["fp"]),
    ]
    table = Table(
        f"Precision and recall at the operating point and at each cut of the curve ({level:.0%} Clopper-Pearson "
        "intervals); the cut is a logit: rows scoring at or above it are flagged",
        [
            "point",
            "cut (logit)",
            "precision",
            "precision low",
            "precision high",
            "recall",
            "recall low",
            "recall high",
            "true positives",
            "false positives",
        ],
        [point, *rows],
    )
    alt = (
        f"Precision against recall over {len(rows)} cuts; the operating point at recall {r:.3f}, precision {p:.3f}"
        + ("" if target is None else f"; the {metric} target {target:g} drawn as a dashed line")
    )
    return Figure.of(fig, anchor="pr-curve", title="Precision-recall curve", alt=alt, table=table)


def threshold_figure(curve: Curve, split: Mapping[str, Any], problem: Mapping[str, Any]) -> Figure:
    """Precision, recall and F-beta against the cut's calibrated probability, the model's cut marked."""
    fig, ax = new_figure(6.4, 4.0)
    beta = f"F{curve.beta:g}"
    ax.plot(curve.probability, curve.precision, color=CURVE_COLOUR, label="precision")
    ax.plot(curve.probability, curve.recall, color=POSITIVE_COLOUR, label="recall")
    ax.plot(curve.probability, curve.f_beta, color=F_BETA_COLOUR, linestyle="-.", label=beta)
    cut = float(split["threshold_probability"])
    ax.axvline(cut, **CUT_STYLE, label=f"the model's cut ({cut:.3f})", gid="operating-cut")
    target = problem.get("target")
    if target is not None:
        ax.axhline(target, color=TARGET_COLOUR, linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="threshold (calibrated probability)", ylabel="metric")
    ax.set_title(f"Precision, recall and {beta} against the threshold")
    ax.legend(loc="lower left", fontsize=8)
    rows = [
        [float(t), float(pr), float(p), float(r), float(f)]
        for t, pr, p, r, f in zip(curve.threshold, curve.probability, curve.precision, curve.recall, curve.f_beta)
    ]
    table = Table(
        f"Precision, recall and {beta} at each cut (logit and calibrated probability)",
        ["cut (logit)", "cut (probability)", "precision", "recall", beta],
        rows,
    )
    alt = (
        f"Precision, recall and {beta} as the threshold moves from 0 to 1; the model's cut at probability {cut:.3f} "
        f"gives precision {float(split['precision']):.3f} and recall {float(split['recall']):.3f}"
    )
    return Figure.of(fig, anchor="metrics-threshold", title="Metrics against the threshold", alt=alt, table=table)


def reliability_figure(figures: Mapping[str, Any], split: Mapping[str, Any]) -> Figure:
    """Observed positive rate against the mean probability per bin, each with its interval; the diagonal is
    perfect calibration."""
    bins = figures["reliability"]
    level = float(split["interval_level"])
    count = len(bins["rows"])
    rows, xs, ys, errs = [], [], [], [[], []]
    for k, (n, pos, mean) in enumerate(zip(bins["rows"], bins["positives"], bins["mean_probability"])):
        rate = pos / n if n else None
        low, high = _interval(pos, n, level)
        rows.append([f"{k / count:.1f}-{(k + 1) / count:.1f}", n, pos, mean, rate, low, high])
        if n:
            xs.append(mean)
            ys.append(rate)
            errs[0].append(rate - low)
            errs[1].append(high - rate)
    fig, ax = new_figure(5.2, 4.4)
    ax.plot([0, 1], [0, 1], color=TARGET_COLOUR, linestyle="--", linewidth=1, label="perfectly calibrated")
    ax.errorbar(xs, ys, yerr=errs, fmt="o-", color=CURVE_COLOUR, capsize=3, label=f"observed ({level:.0%} interval)")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean predicted probability in the bin", ylabel="observed positive rate")
    ax.set_title("Reliability of the probabilities")
    ax.legend(loc="upper left", fontsize=8)
    calibration = split.get("calibration") or {}
    ece = calibration.get("ece")
    table = Table(
        f"Rows, positives, mean probability and observed rate per probability bin ({level:.0%} Clopper-Pearson "
        "interval of the observed rate)",
        ["bin", "rows", "positives", "mean probability", "observed rate", "rate low", "rate high"],
        rows,
    )
    alt = f"Observed positive rate against mean predicted probability in {count} bins" + (
        "" if ece is None else f"; expected calibration error {ece:.4f}"
    )
    return Figure.of(fig, anchor="reliability", title="Reliability diagram", alt=alt, table=table)


def histogram_figure(figures: Mapping[str, Any], split: Mapping[str, Any]) -> Figure:
    """The logits of negative and positive rows in the same bins, the model's cut marked."""
    histogram = figures["histogram"]
    edges = np.asarray(histogram["edges"], dtype=np.float64)
    negatives, positives = histogram["negatives"], histogram["positives"]
    fig, ax = new_figure(6.4, 3.8)
    ax.stairs(negatives, edges, color=NEGATIVE_COLOUR, fill=True, alpha=0.45, label="negative rows")
    ax.stairs(positives, edges, color=POSITIVE_COLOUR, fill=True, alpha=0.55, label="positive rows")
    threshold = float(split["threshold"])
    ax.axvline(threshold, **CUT_STYLE, label=f"the model's cut ({threshold:.3g})")
    ax.set(xlabel="score (logit)", ylabel="rows")
    ax.set_title("Scores per class")
    ax.legend(loc="upper right", fontsize=8)
    rows = [
        [float(lo), float(hi), int(neg), int(pos)]
        for lo, hi, neg, pos in zip(edges[:-1], edges[1:], negatives, positives)
    ]
    table = Table(
        "Rows per score bin and class", ["from (logit)", "to (logit)", "negative rows", "positive rows"], rows
    )
    alt = (
        f"Histogram of the scores of {sum(negatives)} negative and {sum(positives)} positive rows in {len(rows)} bins, "
        f"the cut at logit {threshold:.3g}"
    )
    return Figure.of(fig, anchor="scores", title="Score distribution per class", alt=alt, table=table)


def confusion_figure(split: Mapping[str, Any], labels: tuple[str, str]) -> Figure:
    """The binary confusion matrix at the threshold, counts written in the cells."""
    matrix = [[int(split["tn"]), int(split["fp"])], [int(split["fn"]), int(split["tp"])]]
    names = [f"{labels[0]} (negative)", f"{labels[1]} (positive)"]
    return matrix_figure(matrix, names, anchor="confusion", title="Confusion matrix at the threshold")


def matrix_figure(matrix: list[list[int]], names: list[str], *, anchor: str, title: str) -> Figure:
    """A confusion matrix (rows: the true class, columns: the predicted one) as a shaded grid with its counts."""
    values = np.asarray(matrix, dtype=np.float64)
    size = len(names)
    fig, ax = new_figure(1.6 + 1.1 * size, 1.2 + 1.0 * size)
    ax.imshow(values, cmap="Blues", vmin=0, vmax=max(values.max(), 1))
    for i in range(size):
        for j in range(size):
            dark = values[i, j] > values.max() / 2
            ax.text(j, i, f"{int(values[i, j]):,}", ha="center", va="center", color="white" if dark else "black")
    ax.set_xticks(range(size), [f"predicted {name}" for name in names], rotation=20, ha="right")
    ax.set_yticks(range(size), [f"true {name}" for name in names])
    ax.set_title(title)
    table = Table(
        f"{title}: rows by true class (rows) and predicted class (columns)",
        ["true class", *[f"predicted {name}" for name in names]],
        [[name, *row] for name, row in zip(names, matrix)],
    )
    alt = f"{title}: " + "; ".join(
        f"true {name}: " + ", ".join(f"{count:,} predicted {other}" for other, count in zip(names, row))
        for name, row in zip(names, matrix)
    )
    return Figure.of(fig, anchor=anchor, title=title, alt=alt, table=table)
