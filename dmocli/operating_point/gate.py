"""The gate of `dmo evaluate --gate`: whether labeled rows show that a model misses its target.

The gate reads the model's constrained metric on the rows (FPOR: precision, FROP: recall). By default the point
estimate must reach the target. With a confidence C the gate fails only when the rows rule the target out: the
metric's one-sided Clopper-Pearson upper bound at level C is below it. A small holdout then fails a model only on
clear evidence, not on chance alone. A multi-class model trained for per-class floors (`--problem frop|fpor`: each
class's recall or precision floor) is gated on every floor alike: the point rule fails when any class is below its
floor; the upper-bound rule when any class's bound is, each bound at 1 - (1 - C) / m over the m floors (Bonferroni,
so a model meeting every floor fails with probability at most 1 - C, as a binary one does). OFBS (binary, or a
multi-class macro F-beta) has no target, so the gate checks nothing and says so. docs/report-schema.md (evaluate)
documents the `gate` object.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_lower, clopper_pearson_upper
from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.problems import Problem

_TOLERANCE = 1e-12  # a class exactly at its floor meets it (as Problem.feasible judges a binary point)


class BinaryFigures(Protocol):
    """What the gate reads of a binary split (report.BinarySplit, built a layer above): its counts, and each
    metric's value and interval."""

    tp: int
    fp: int
    fn: int
    n_pos: int

    def measured(self, metric: str) -> tuple[float, list[float] | None]: ...


class PerClassFigures(Protocol):
    """What the gate reads of a multi-class split's classes (report.ClassFigures)."""

    support: list[int]
    predicted: list[int]
    precision: list[float]
    recall: list[float]
    precision_interval: list[list[float] | None]
    recall_interval: list[list[float] | None]


class ClassFigures(Protocol):
    """What the gate reads of a multi-class split (report.MulticlassSplit)."""

    per_class: PerClassFigures
    classes: list[Any]
    confusion_matrix: list[list[int]]


@dataclass(frozen=True)
class Gate:
    """The report's `gate` object (docs/report-schema.md), its keys in the order it shows them."""

    rule: str  # point, upper_bound, or none: nothing to check
    metric: str | None = None
    value: float | None = None
    interval: list[float] | None = None
    target: float | None = None
    confidence: float | None = None
    passed: bool | None = None
    failing_class: Any = None  # multi-class: the class the figures above are of (the furthest below its floor)
    classes: list[dict[str, Any]] | None = None  # multi-class: each floored class's figures and verdict

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_gate(split: BinaryFigures, problem: Problem | None, confidence: float | None) -> Gate:
    """The gate on a binary split: `rule` (point, upper_bound, or none where there is no target: OFBS), `metric`,
    `value`, `interval`, `target`, `confidence` and `passed` (None: nothing checked)."""
    metric = problem.constraint_name if problem is not None else None
    if metric is None:
        return Gate("none", confidence=confidence)
    value, interval = split.measured(metric)
    measured = {"metric": metric, "value": value, "target": problem.target, "confidence": confidence}
    if confidence is None:
        passed = problem.feasible(split.tp, split.fp, split.n_pos)
        return Gate("point", **measured, interval=interval, passed=passed)
    successes, failures = split.tp, split.fp if metric == "precision" else split.fn  # the metric's binomial
    lower = float(clopper_pearson_lower(successes, successes + failures, confidence))
    upper = float(clopper_pearson_upper(successes, successes + failures, confidence))
    return Gate("upper_bound", **measured, interval=[lower, upper], passed=not upper < problem.target)


def judge_class_gate(split: ClassFigures, problem: ClassProblem | None, confidence: float | None) -> Gate:
    """A multi-class split gated on each class floor of `problem` (recall for frop, precision for fpor); the top
    figures are those of the class furthest below its floor (or nearest to it, when all pass)."""
    metric = None if problem is None else problem.constraint_name
    floored = [] if problem is None else problem.constrained()
    if metric is None or not floored:
        return Gate("none", confidence=confidence)
    per_class, classes = split.per_class, split.classes
    hits = np.diag(np.asarray(split.confusion_matrix))
    if metric == "recall":
        values, intervals, trials = per_class.recall, per_class.recall_interval, per_class.support
    else:
        values, intervals, trials = per_class.precision, per_class.precision_interval, per_class.predicted
    level = None if confidence is None else 1.0 - (1.0 - confidence) / len(floored)
    judged, margins = [], []
    for k in floored:
        value, floor = float(values[k]), problem.floors[k]
        if level is None:
            interval, passed, margin = intervals[k], value >= floor - _TOLERANCE, value - floor
        else:
            successes, n = int(hits[k]), int(trials[k])
            interval = [
                float(clopper_pearson_lower(successes, n, level)),
                float(clopper_pearson_upper(successes, n, level)),
            ]
            passed, margin = not interval[1] < floor, interval[1] - floor
        judged.append({"class": classes[k], "value": value, "interval": interval, "target": floor, "passed": passed})
        margins.append(margin)
    worst = judged[int(np.argmin(margins))]  # the figure the verdict turns on: a value, or an upper bound
    return Gate(
        "point" if level is None else "upper_bound",
        metric=metric,
        value=worst["value"],
        interval=worst["interval"],
        target=worst["target"],
        confidence=confidence,
        passed=all(entry["passed"] for entry in judged),
        failing_class=worst["class"],
        classes=judged,
    )


def gate_line(gate: Gate, data: str) -> str:
    """What the gate found, in one line: the metric, its value and interval, the target and the verdict (a
    failure also says what to do); for a multi-class model, of the class furthest below its floor."""
    if gate.rule == "none":
        return f"gate: nothing to check on {data}: the model's problem has no target (fpor and frop have one)"
    interval = gate.interval
    measured, target = f"{gate.metric} {gate.value:.4f} on {data}", f"{gate.target:g}"
    if gate.classes:
        below = sum(not entry["passed"] for entry in gate.classes)
        others = f" (and {below - 1} more class(es) below their floor)" if below > 1 else ""
        measured = f"class {gate.failing_class!r}'s {measured}{others}"
        target = f"{target} (its floor; {len(gate.classes)} class floor(s) gated)"
    if gate.rule == "point":
        shown = "" if interval is None else f" ({REPORT_LEVEL:.0%} interval [{interval[0]:.3f}, {interval[1]:.3f}])"
        verdict = "meets" if gate.passed else "is below"
        line = f"{measured}{shown} {verdict} the target {target}"
    else:
        shown = f" (one-sided bounds at {_bound_level(gate):g}: [{interval[0]:.3f}, {interval[1]:.3f}])"
        verdict = "reaches" if gate.passed else "is below"
        line = f"{measured}{shown}: its upper bound {verdict} the target {target}"
    if gate.passed:
        return f"gate passed: {line}"
    return f"gate failed: {line}; re-fit the threshold on recent labeled rows (dmo threshold) or retrain"


def _bound_level(gate: Gate) -> float:
    """The one-sided level of each bound: --gate-confidence, shared by the class floors gated (Bonferroni)."""
    return 1.0 - (1.0 - gate.confidence) / len(gate.classes or [None])
