"""The gate of `dmo evaluate --gate`: whether labeled rows show that a model misses its target.

The gate reads the model's constrained metric on the rows (FPOR: precision, FROP: recall). By default the point
estimate must reach the target. With a confidence C the gate fails only when the rows rule the target out: the
metric's one-sided Clopper-Pearson upper bound at level C is below it. A small holdout then fails a model only on
clear evidence, not on chance alone. OFBS (and a multi-class model) has no target, so the gate checks nothing and
says so. docs/report-schema.md (evaluate) documents the `gate` object.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dmocli.constraints import failure
from dmocli.errors import DmoError, option_hint
from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_lower, clopper_pearson_upper
from dmocli.operating_point.problems import Problem
from dmocli.options import CONFIDENCE

_TRIALS = {"precision": ("tp", "fp"), "recall": ("tp", "fn")}  # successes, failures of each metric's binomial


def check_gate_confidence(confidence: float | None) -> None:
    """The level of the upper bound: below 0.5 the bound would sit under the point estimate and fail models that
    meet their target."""
    label = f"{option_hint('--gate-confidence ', 'gate_confidence=')}{confidence}"
    problem = failure(label, confidence, CONFIDENCE)
    if problem is not None:
        raise DmoError(f"{problem}, e.g. 0.95")


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


def judge_gate(split: dict[str, Any], problem: Problem | None, confidence: float | None) -> dict[str, Any]:
    """The gate on one split report: `rule` (point, upper_bound, or none where there is no target: OFBS, a
    multi-class model), `metric`, `value`, `interval`, `target`, `confidence` and `passed` (null: nothing checked)."""
    metric = problem.constraint_name if problem is not None and "tp" in split else None
    if metric is None:
        return asdict(Gate("none", confidence=confidence))
    measured = {"metric": metric, "value": split[metric], "target": problem.target, "confidence": confidence}
    if confidence is None:
        passed = problem.feasible(split["tp"], split["fp"], split["n_pos"])
        return asdict(Gate("point", **measured, interval=split[f"{metric}_interval"], passed=passed))
    successes, failures = (split[key] for key in _TRIALS[metric])
    lower = float(clopper_pearson_lower(successes, successes + failures, confidence))
    upper = float(clopper_pearson_upper(successes, successes + failures, confidence))
    return asdict(Gate("upper_bound", **measured, interval=[lower, upper], passed=not upper < problem.target))


def gate_line(gate: dict[str, Any], data: str) -> str:
    """What the gate found, in one line: the metric, its value and interval, the target and the verdict (a
    failure also says what to do)."""
    if gate["rule"] == "none":
        return f"gate: nothing to check on {data}: the model's problem has no target (fpor and frop have one)"
    target, interval = gate["target"], gate["interval"]
    measured = f"{gate['metric']} {gate['value']:.4f} on {data}"
    if gate["rule"] == "point":
        shown = "" if interval is None else f" ({REPORT_LEVEL:.0%} interval [{interval[0]:.3f}, {interval[1]:.3f}])"
        verdict = "meets" if gate["passed"] else "is below"
        line = f"{measured}{shown} {verdict} the target {target:g}"
    else:
        level = gate["confidence"]
        shown = f" (one-sided bounds at {level:g}: [{interval[0]:.3f}, {interval[1]:.3f}])"
        verdict = "reaches" if gate["passed"] else "is below"
        line = f"{measured}{shown}: its upper bound {verdict} the target {target:g}"
    if gate["passed"]:
        return f"gate passed: {line}"
    return f"gate failed: {line}; re-fit the threshold on recent labeled rows (dmo threshold) or retrain"
