"""Every verdict of the after-training commands, with its limits and the advice its failure gives: `dmo evaluate
--gate` on labeled rows, and `dmo monitor`'s gate on unlabeled ones (the target ruled out under label shift, the
positive rate moved past its limit, a feature drifted past its limit, a threshold above all the model's own scores).

Each verdict reads typed values (a split's counts, a section's estimates, a feature's drift statistics: the
Protocols below), never a report's keys, and each failure says what to do in words that, followed, lead to a
state where the same gate passes if the estimates hold: a target missed or a rate moved is answered by a threshold
moved for the new rate (`dmo threshold MODEL --adapt NEW`, whose written model monitor then compares with the rate
it was adapted to: `ReferenceRate`), a drifted feature only by a model trained on rows like the new ones.

evaluate's gate reads the model's constrained metric on the rows (FPOR: precision, FROP: recall). By default the
point estimate must reach the target. With a confidence C the gate fails only when the rows rule the target out: the
metric's one-sided Clopper-Pearson upper bound at level C is below it. A small holdout then fails a model only on
clear evidence, not on chance alone. A multi-class model trained for per-class floors (`--problem frop|fpor`: each
class's recall or precision floor) is gated on every floor alike: the point rule fails when any class is below its
floor; the upper-bound rule when any class's bound is, each bound at 1 - (1 - C) / m over the m floors (Bonferroni,
so a model meeting every floor fails with probability at most 1 - C, as a binary one does). OFBS (binary, or a
multi-class macro F-beta) has no target, so the gate checks nothing and says so (a `--problem value` model's line
says so too; its realized value is in the report). A model kept within an alert budget is gated on the share of the
rows its threshold flags, which needs no label: by default the share must be at most the budget; with a confidence C
the gate fails only when the rows rule the budget out, the share's one-sided Clopper-Pearson lower bound at C above
it (`lower_bound`), as monitor's gate judges each section's alerts. Beside a target, the budget's verdict is the
gate's `alert_budget` and both must pass; alone (or beside ofbs or value) it is the gate. docs/report-schema.md
(evaluate) documents the `gate` object; docs/monitoring.md monitor's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import numpy as np

from dmocli.operating_point.bounds import (
    REPORT_LEVEL,
    clopper_pearson_interval,
    clopper_pearson_lower,
    clopper_pearson_upper,
)
from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.report import ReportRecord
from dmocli.shift.drift_stats import PSI_MAJOR, FeatureDrift, is_evidence

# The limits, beside each other.
FLOOR_TOLERANCE = 1e-12  # evaluate: a class exactly at its floor meets it (as Problem.feasible judges a binary point)
# monitor: the positive rate drifts past the limit when it moved by this factor or more, either way, and its interval
# excludes the reference rate: far and surely, as a feature's PSI >= PSI_LIMIT and significant (docs/monitoring.md).
RATE_DRIFT_FACTOR = 1.25
RATE_DEPENDENT = ("fpor", "ofbs", "value")  # FROP's threshold is the same at any rate: its recall does not move
PSI_LIMIT = PSI_MAJOR  # monitor: a feature drifts past the limit from the industry's "major drift" on...
DRIFT_ALPHA = 0.01  # ...where its chi-square test is significant at this family-wise level (Bonferroni)

# The advice each kind of failure gives: what makes the same gate pass where the estimates hold.
MOVE_THRESHOLD = (
    "move the threshold for the new rate (dmo threshold MODEL --adapt NEW), re-fit it on recent labeled rows, or "
    "retrain"
)
REFIT_LABELED = "re-fit the threshold on recent labeled rows (dmo threshold MODEL DATA) or retrain"
RETRAIN_ON_NEW = (
    "retrain on rows like NEW's for the drifted feature(s): a threshold moved for a new rate leaves a feature's "
    "drift as it is"
)
# The alert budget exceeded: the threshold flags more of the new rows than the team can review.
ALERTS_ADVICE = (
    "re-target within the budget on recent rows (dmo threshold MODEL DATA, or on the curve MODEL keeps: dmo threshold "
    "MODEL --max-alert-rate R) or raise the budget"
)
EVALUATE_ADVICE = "re-fit the threshold on recent labeled rows (dmo threshold) or retrain"


# evaluate --gate


class BinaryFigures(Protocol):
    """What the gate reads of a binary split (report.BinarySplit): its counts, and each metric's value and
    interval."""

    tp: int
    fp: int
    fn: int
    n_pos: int
    n: int  # every row of the split: an alert budget's share is of them

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
class BudgetGate:
    """An alert budget's verdict on the rows (judge_budget): the share flagged against the budget's share, by the
    point rule or its one-sided lower bound (`lower_bound`); evaluate's `gate` itself for a model with no target,
    its `alert_budget` beside one."""

    rule: str  # point or lower_bound
    metric: str  # flagged_share
    value: float
    interval: list[float] | None
    target: float  # the budget's share
    confidence: float | None
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Gate:
    """evaluate's `gate` object (docs/report-schema.md), its keys in the order it shows them."""

    rule: str  # point, upper_bound, or none: nothing to check
    metric: str | None = None
    value: float | None = None
    interval: list[float] | None = None
    target: float | None = None
    confidence: float | None = None
    passed: bool | None = None
    failing_class: Any = None  # multi-class: the class the figures above are of (the furthest below its floor)
    classes: list[dict[str, Any]] | None = None  # multi-class: each floored class's figures and verdict
    alert_budget: BudgetGate | None = None  # a target beside an alert budget: the budget's verdict (key absent: none)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.alert_budget is None:  # no budget beside a target: the key stays out, as reports before budgets
            del out["alert_budget"]
        return out


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


def judge_with_budget(
    split: BinaryFigures, problem: Problem | None, confidence: float | None, budget: float | None
) -> Gate:
    """judge_gate, and for a model kept within an alert budget (`budget`: the share of rows it may flag) the
    budget's verdict too: the gate itself where the problem has no target, else the target's gate with the
    budget's as its `alert_budget`, passed only where both pass."""
    target = judge_gate(split, problem, confidence)
    if budget is None:
        return target
    flagged = judge_budget(split.tp + split.fp, split.n, budget, confidence)
    if target.rule == "none":
        return Gate(**asdict(flagged))
    return replace(target, passed=bool(target.passed and flagged.passed), alert_budget=flagged)


def judge_budget(flagged: int, rows: int, budget: float, confidence: float | None) -> BudgetGate:
    """The share of `rows` the threshold flags against an alert budget: `point`, the share at most the budget
    (its two-sided Clopper-Pearson interval at REPORT_LEVEL shown); with `confidence`, `lower_bound`, failing only
    where the share's one-sided lower bound at `confidence` is above the budget."""
    share = flagged / rows if rows else 0.0
    measured = {"metric": "flagged_share", "value": share, "target": budget, "confidence": confidence}
    if confidence is None:
        interval = list(clopper_pearson_interval(flagged, rows, REPORT_LEVEL)) if rows else None
        return BudgetGate("point", **measured, interval=interval, passed=bool(share <= budget + FLOOR_TOLERANCE))
    lower = float(clopper_pearson_lower(flagged, rows, confidence))
    upper = float(clopper_pearson_upper(flagged, rows, confidence))
    return BudgetGate("lower_bound", **measured, interval=[lower, upper], passed=not lower > budget)


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
            interval, passed, margin = intervals[k], value >= floor - FLOOR_TOLERANCE, value - floor
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
    line = _verdict_line(gate, data)
    if gate.alert_budget is not None:
        line += f"; {_verdict_line(gate.alert_budget, data)}"
    if gate.passed:
        return f"gate passed: {line}"
    return f"gate failed: {line}; {ALERTS_ADVICE if _only_budget_failed(gate) else EVALUATE_ADVICE}"


def _only_budget_failed(gate: Gate) -> bool:
    """Whether the budget alone failed (its advice then: re-target within it), not a target."""
    if gate.metric == "flagged_share":
        return True
    return gate.alert_budget is not None and gate.alert_budget.passed is False and _target_passed(gate)


def _target_passed(gate: Gate) -> bool:
    """A target's own verdict beside a budget: the gate's passed was both together, so it is read from the figures
    again (the point rule or the upper bound, as judge_gate decided it)."""
    if gate.rule == "point":
        return gate.value is not None and gate.value >= gate.target - FLOOR_TOLERANCE
    return gate.interval is not None and not gate.interval[1] < gate.target


def _verdict_line(gate: Gate | BudgetGate, data: str) -> str:
    """One gate's figures and verdict, without the passed/failed head or the advice."""
    interval = gate.interval
    if gate.metric == "flagged_share":
        measured, verdict = f"flagged share {gate.value:.4f} on {data}", "is within" if gate.passed else "is over"
        if gate.rule == "point":
            shown = "" if interval is None else f" ({REPORT_LEVEL:.0%} interval [{interval[0]:.4f}, {interval[1]:.4f}])"
            return f"{measured}{shown} {verdict} the alert budget {gate.target:g}"
        shown = f" (one-sided bounds at {gate.confidence:g}: [{interval[0]:.4f}, {interval[1]:.4f}])"
        return f"{measured}{shown}: its lower bound {verdict} the alert budget {gate.target:g}"
    measured, target = f"{gate.metric} {gate.value:.4f} on {data}", f"{gate.target:g}"
    if gate.classes:
        below = sum(not entry["passed"] for entry in gate.classes)
        others = f" (and {below - 1} more class(es) below their floor)" if below > 1 else ""
        measured = f"class {gate.failing_class!r}'s {measured}{others}"
        target = f"{target} (its floor; {len(gate.classes)} class floor(s) gated)"
    passed = gate.passed if gate.alert_budget is None else _target_passed(gate)
    if gate.rule == "point":
        shown = "" if interval is None else f" ({REPORT_LEVEL:.0%} interval [{interval[0]:.3f}, {interval[1]:.3f}])"
        return f"{measured}{shown} {'meets' if passed else 'is below'} the target {target}"
    shown = f" (one-sided bounds at {_bound_level(gate):g}: [{interval[0]:.3f}, {interval[1]:.3f}])"
    return f"{measured}{shown}: its upper bound {'reaches' if passed else 'is below'} the target {target}"


def _bound_level(gate: Gate) -> float:
    """The one-sided level of each bound: --gate-confidence, shared by the class floors gated (Bonferroni)."""
    return 1.0 - (1.0 - gate.confidence) / len(gate.classes or [None])


# monitor's gate


@dataclass(frozen=True, kw_only=True)
class ReferenceRate(ReportRecord):
    """The positive rate the model's threshold was chosen at, which monitor compares NEW's with (the report's
    `reference_rate`): the held-out rows' rate (`training`, with its Clopper-Pearson interval), or, for a model
    written by `dmo threshold --adapt/--prior`, the rate it was adapted to (`adapted`, with the interval adapt kept,
    if it kept one): its held-out curve reweighted to that rate is the curve its threshold was searched on."""

    source: str  # training or adapted
    rate: float
    interval: list[float] | None

    @classmethod
    def training(cls, curve: HeldOutCurve, confidence: float) -> ReferenceRate:
        """The held-out rows' rate, with its two-sided Clopper-Pearson interval at `confidence`."""
        interval = clopper_pearson_interval(curve.n_pos, curve.n_pos + curve.n_neg, confidence)
        return cls(source="training", rate=curve.rate, interval=interval)


@dataclass(frozen=True)
class Reason:
    """One reason the monitor gate fails: what it is about (`kind`: threshold, target (precision), recall, rate,
    feature or alerts, whose advice differs), where (all rows, a chunk), and the line the report lists."""

    kind: str
    text: str
    where: str | None = None

    def shown(self) -> str:
        return self.text if self.where is None else f"{self.where}: {self.text}"


# Each kind's advice: the threshold's reason says its own; FROP's recall does not move with the rate, so only a
# threshold re-fitted on labeled rows can help it.
ADVICE = {
    "threshold": "",
    "target": MOVE_THRESHOLD,
    "recall": REFIT_LABELED,
    "rate": MOVE_THRESHOLD,
    "feature": RETRAIN_ON_NEW,
    "alerts": ALERTS_ADVICE,
}


class RateFigures(Protocol):
    """What the gate reads of a section's positive rate: the estimate and its interval."""

    estimate: float
    interval: list[float] | None


class ExpectedFigures(Protocol):
    """What the gate reads of a section's label-shift estimates: a metric's value and interval."""

    def measured(self, metric: str) -> tuple[float, list[float]]: ...


class SectionFigures(Protocol):
    """What the gate reads of one monitor section (use/results/monitor.py MonitorSection)."""

    too_small: bool
    positive_rate: RateFigures
    label_shift: ExpectedFigures
    drift_reasons: list[str] | None
    alerts: AlertFigures | None


class AlertFigures(Protocol):
    """What the gate reads of a section's alerts against the model's alert budget (AlertsEstimate)."""

    flagged_share: float
    share_interval: list[float]
    max_alert_rate: float
    exceeded: bool


def above_its_scores(threshold: float, highest_own: float | None) -> list[Reason]:
    """The model's threshold above every score it gives its own training rows (the curve's `highest_own`, kept where
    the curve holds out-of-fold scores): it flags none of them, so every estimate read from the curve at that cut
    describes rows the model does not flag. A reason to stop, whatever the estimates say."""
    if highest_own is None or np.float32(highest_own) >= np.float32(threshold):
        return []
    text = (
        f"the threshold {threshold:.6g} is above every score the model gives its training rows (the highest: "
        f"{highest_own:.6g}), so it flags none of them and the estimates read from its held-out curve there do not "
        "apply; re-target on labeled DATA, or retrain with --cv-transfer rank"
    )
    return [Reason("threshold", text)]


def section_reasons(
    section: SectionFigures, problem: Problem | None, reference: ReferenceRate, where: str | None = None
) -> list[Reason]:
    """Why the gate fails on one section: none where the section is too small to say anything; the target ruled out
    by the label-shift interval first, then the rate drifted, then each drifted feature."""
    if section.too_small:
        return []
    reasons = [Reason("feature", text, where) for text in section.drift_reasons or []]
    alerts = section.alerts
    if alerts is not None and alerts.exceeded:  # observed on the section's own rows, whatever the labels
        low, high = alerts.share_interval
        text = (
            f"the threshold flags {alerts.flagged_share:.2%} of rows (interval [{low:.2%}, {high:.2%}]), over the "
            f"alert budget of {alerts.max_alert_rate:.2%}"
        )
        reasons.insert(0, Reason("alerts", text, where))
    rate = section.positive_rate
    if problem is not None and problem.kind in RATE_DEPENDENT:
        reasons[:0] = [Reason("rate", text, where) for text in rate_drift(rate.estimate, rate.interval, reference)]
    if problem is not None and problem.kind in ("fpor", "frop"):
        metric = problem.constraint_name
        value, (low, high) = section.label_shift.measured(metric)
        if high < problem.target:
            chosen = "trained at" if reference.source == "training" else "adapted to"
            text = (
                f"estimated {metric} {value:.4f} (interval [{low:.4f}, {high:.4f}]) is below the target "
                f"{problem.target:g} at the estimated positive rate {rate.estimate:.4f} ({chosen} "
                f"{reference.rate:.4f})"
            )
            reasons.insert(0, Reason("target" if metric == "precision" else "recall", text, where))
    return reasons


def rate_drift(estimate: float, interval: Sequence[float | None] | None, reference: ReferenceRate) -> list[str]:
    """The reason, if any, that the positive rate moved far and surely from the one the threshold was chosen at.

    Under a label shift FPOR's precision and OFBS's best threshold move with the rate, in either direction: a
    rate that doubled leaves recall on the table at a threshold chosen for precision at the old rate, one that
    halved costs precision. Far: the estimate is RATE_DRIFT_FACTOR times the reference rate or more, or that much
    less. Surely: the estimate's interval and the reference rate's (the held-out rows are a sample too: their
    Clopper-Pearson interval; an adapted rate's, where adapt kept one) do not meet, so a large sample's negligible
    move, a small sample's noisy one and a held-out rate off by chance all pass (bench/monitor_coverage.py)."""
    rate = reference.rate
    if interval is None or None in interval or rate <= 0:
        return []
    factor = estimate / rate
    far = factor >= RATE_DRIFT_FACTOR or factor <= 1 / RATE_DRIFT_FACTOR
    known = reference.interval or [rate, rate]
    surely = interval[1] < known[0] or interval[0] > known[1]
    if not (far and surely):
        return []
    chosen = "chosen at the training rate" if reference.source == "training" else f"adapted to {rate:.4f}"
    return [
        f"the positive rate moved from {rate:.4f} ({reference.source}) to {estimate:.4f} (interval "
        f"[{interval[0]:.4f}, {interval[1]:.4f}]), a factor of {factor:.2f}: past the limit of {RATE_DRIFT_FACTOR:g} "
        f"either way, and the threshold was {chosen}"
    ]


def drift_reasons(
    drifts: Sequence[FeatureDrift], expected: Collection[str] = (), psi_limit: float = PSI_LIMIT
) -> list[str]:
    """Why new data should stop the model: one reason per feature that drifted both far and surely.

    A feature fires when its PSI is at least `psi_limit` and its chi-square p-value is below DRIFT_ALPHA divided
    by the number of features compared (Bonferroni: DRIFT_ALPHA bounds the chance that any feature fires on noise).
    A feature named in `expected` (a trend such as a date's days_since, Preprocessor.trend_features: no later
    period can match its training values) is listed with its drift but never a reason."""
    return [_drift_reason(d, psi_limit, len(drifts)) for d in past_limit(drifts, expected, psi_limit)]


def past_limit(
    drifts: Sequence[FeatureDrift], expected: Collection[str] = (), psi_limit: float = PSI_LIMIT
) -> list[FeatureDrift]:
    """The features that drifted past the limit (drift_reasons' rule): a monitor section names them for the page's
    heat map, whose cells past the limit are the gate's drift reasons."""
    tests = len(drifts)
    return [d for d in drifts if d.name not in expected and d.psi >= psi_limit and is_evidence(d, tests, DRIFT_ALPHA)]


def _drift_reason(drift: FeatureDrift, psi_limit: float, tests: int) -> str:
    """One line naming the feature, its PSI and p-value against their limits, and its missing and unseen rows."""
    unseen = f", {drift.unseen_after} rows at unseen levels" if drift.unseen_after else ""
    return (
        f"{drift.kind} '{drift.name}' drifted: PSI {drift.psi:.3f} ({drift.severity}, limit {psi_limit:g}), "
        f"chi-square p = {drift.p_value:.2g} < {DRIFT_ALPHA:g}/{tests} (Bonferroni over the features compared); "
        f"missing {drift.missing_before:.1%} -> {drift.missing_after:.1%}{unseen}"
    )


def gate_message(reasons: Sequence[Reason]) -> str:
    """The one-line refusal of a failed monitor gate: its first reason, how many more the report lists, and the
    advice of every kind of reason among them (each kind's own: one alone might leave another reason standing)."""
    first = reasons[0].shown()
    more = f" (and {len(reasons) - 1} more reason(s) in the report)" if len(reasons) > 1 else ""
    advice = [text for text in dict.fromkeys(ADVICE[reason.kind] for reason in reasons) if text]
    return f"gate failed: {first}{more}" + "".join(f"; {text}" for text in advice)
