"""The operating-point step every pipeline shares: fit the threshold, refuse an unreachable target, and report
the splits at it.

`dmo train` (in memory and streaming), `dmo threshold` and `dmo evaluate` all
go through here, so the search, the infeasible-target error and the split
reports are written once. The exact search itself lives in
dmocli/operating_point/search.py; this module decides what to search on and
what to do with the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmocli.errors import UnreachableTarget
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import OperatingPoint, search
from dmocli.report import binary_split_report, multiclass_split_report

MULTICLASS_FIELDS: dict[str, Any] = {"problem": "multiclass", "target": None, "beta": None}


def problem_fields(problem: Problem | None) -> dict[str, Any]:
    """The problem's report fields; a multi-class model has no target or beta."""
    return problem.to_dict() if problem is not None else dict(MULTICLASS_FIELDS)


def fit_threshold(
    scores: np.ndarray,
    labels: np.ndarray,
    problem: Problem,
    confidence: float | None,
    allow_infeasible: bool,
    where: str,
) -> OperatingPoint:
    """The exact operating point on (scores, labels); an unreachable target is UnreachableTarget (exit 3) unless
    `allow_infeasible`, when the closest cut is kept. `where` names the data in the message ("the val split")."""
    point = search(scores, labels, problem, confidence)
    if point.feasible is False and not allow_infeasible:
        what = problem.constraint_name
        raise UnreachableTarget(
            f"target {what} >= {problem.target:g} is not reachable on {where} "
            f"(best achievable {what}{' bound' if confidence else ''}: {point.best_achievable:.4f}); "
            "lower --target, or pass --allow-infeasible to keep the closest threshold",
            best_achievable=point.best_achievable,
        )
    return point


def split_reports(
    logits: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    threshold: float | None,
    problem: Problem | None,
    classes: list[Any],
) -> dict[str, dict[str, Any]]:
    """Each split's metrics: at `threshold` for a binary problem, by arg-max for a multi-class one."""
    if problem is None:
        return {name: multiclass_split_report(logits[name], truth[name], classes) for name in logits}
    return {name: binary_split_report(logits[name], truth[name], threshold, problem) for name in logits}


@dataclass
class Settled:
    """The threshold a trained model keeps, and what the report says of how it was chosen."""

    threshold: float
    report: dict[str, Any] = field(default_factory=dict)  # before_adjustment, operating_point, threshold, splits


def settle_threshold(
    logits: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    problem: Problem,
    own: float | None,
    adjust: bool,
    confidence: float | None,
    allow_infeasible: bool,
) -> Settled:
    """The threshold after training: the exact search on the val split (the training rows when there is none)
    when `adjust` or when the solver has no threshold of its own, else the solver's.

    The report keeps the metrics at the solver's own threshold (`before_adjustment`) whenever it has one, and
    every split's metrics at the threshold kept (`splits`).
    """
    report: dict[str, Any] = {}
    if own is not None:
        report["before_adjustment"] = split_reports(logits, truth, own, problem, [])
    if adjust or own is None:
        split = "val" if "val" in logits else "train"
        point = fit_threshold(logits[split], truth[split], problem, confidence, allow_infeasible, f"the {split} split")
        report["operating_point"] = {"split": split, **point.to_dict()}
        threshold = point.threshold
    else:
        threshold = own
    report["threshold"] = threshold
    report["splits"] = split_reports(logits, truth, threshold, problem, [])
    return Settled(threshold, report)
