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
from typing import Any, Callable

import numpy as np

from dmocli.errors import UnreachableTarget, option_hint
from dmocli.operating_point.calibration import Calibration, fit_platt
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.multiclass_calibration import MulticlassCalibration
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import OperatingPoint, search
from dmocli.options import POPULATION, read_new_rows
from dmocli.pipelines.report_parts import CalibrationSection, OperatingPointSection, ReportPart, SplitsSection
from dmocli.report import binary_split_report, empty_prediction_warnings, multiclass_split_report

MULTICLASS_FIELDS: dict[str, Any] = {"problem": "multiclass", "target": None, "beta": None}


def problem_fields(problem: Problem | None) -> dict[str, Any]:
    """The problem's report fields; a multi-class model has no target or beta."""
    return problem.to_dict() if problem is not None else dict(MULTICLASS_FIELDS)


def certified_rows(new_rows: int | float | str | None, confidence: float | None, held_out_rows: int) -> int | None:
    """The size of the new sample a --confidence certificate is about (None: the population value).

    By default a sample as large as the held-out split the threshold is fitted on (one fold with --cv, else the
    validation split): a user checks an operating point by measuring it on a test split or a batch of new rows,
    and the measured value scatters around the population value (a recall of 0.83 measured on 112 positives is
    below 0.8 one time in five), so a certificate of the population value alone is broken that often by the very
    check that judges it. `--new-rows N` names another size, `--new-rows inf` asks for the population value.
    """
    new_rows = read_new_rows(new_rows)  # the Python API may give "inf" or a numpy integer
    if confidence is None or new_rows == POPULATION:
        return None
    return held_out_rows if new_rows is None else int(new_rows)


def fit_threshold(
    scores: np.ndarray,
    labels: np.ndarray,
    problem: Problem,
    *,
    confidence: float | None,
    where: str,
    new_rows: int | None = None,
) -> tuple[OperatingPoint, str | None]:
    """The exact operating point on (scores, labels), and why the target is out of reach when it is (else None).
    `where` names the data in that message ("the val split")."""
    point = search(scores, labels, problem, confidence, new_rows=new_rows)
    if point.feasible is not False:
        return point, None
    what = problem.constraint_name
    best = f"best achievable {what}{' bound' if confidence else ''}"
    if new_rows is not None:  # the population bound caps what the new-sample test can certify, and no more
        best = f"best {what} bound of the population value, a ceiling for the new sample's"
    message = (
        f"target {what} >= {problem.target:g} is not {'certified' if confidence else 'reachable'} on {where} "
        f"({best}: {point.best_achievable:.4f})"
    )
    if new_rows is not None:
        needed = "no rate would do" if point.required_rate is None else f"it had to reach {point.required_rate:.4f}"
        population = option_hint("--new-rows inf", "new_rows='inf'")
        message += (
            f"; for the {what} measured on {new_rows} new rows to hold, {needed} there (a larger --new-rows, or "
            f"{population} for the population value, asks less)"
        )
    if point.rows_needed is not None:
        counted = "predicted positives" if problem.kind == "fpor" else "positives"
        message += (
            f"; at the {what} observed there, a certificate at {option_hint('--confidence', 'confidence')} "
            f"{confidence:g} needs about "
            f"{point.rows_needed} {counted} ({point.rows_counted} counted on {where})"
        )
    return point, message


def split_reports(
    logits: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    threshold: float | None,
    *,
    problem: Problem | None,
    classes: list[Any],
    calibration: Calibration | MulticlassCalibration | None = None,
) -> dict[str, dict[str, Any]]:
    """Each split's metrics: at `threshold` for a binary problem, by arg-max for a multi-class one; their
    probabilities through `calibration` (of the model's kind) where there is one."""
    if problem is None:
        return {
            name: multiclass_split_report(logits[name], truth[name], classes, calibration=calibration)
            for name in logits
        }
    return {
        name: binary_split_report(
            logits[name], truth[name], threshold=threshold, problem=problem, calibration=calibration
        )
        for name in logits
    }


@dataclass
class Settled:
    """The threshold a trained model keeps, the report's sections on how it was chosen, and the refusal to raise
    once the report is complete (an unreachable target without --allow-infeasible)."""

    threshold: float
    warnings: list[str] = field(default_factory=list)
    refusal: UnreachableTarget | None = None
    operating_point: OperatingPointSection | None = None  # None: no search ran (the solver's own threshold kept)
    splits: SplitsSection | None = None
    calibration: Calibration | None = None  # the probability map, fitted on the held-out scores where there are
    evidence: HeldOutCurve | None = None  # the curve of the scores the threshold was searched on, for the model file
    heldout_scores: np.ndarray | None = None  # those scores themselves, for the model file's drift profile

    def parts(self) -> tuple[ReportPart, ...]:
        """The report's sections of the operating point: the search (if one ran), the splits, the probability map."""
        searched = () if self.operating_point is None else (self.operating_point,)
        splits = () if self.splits is None else (self.splits,)
        return (*searched, *splits, CalibrationSection(calibration=self.calibration))


def judge_reachability(point: OperatingPoint, unreachable: str | None, allow_infeasible: bool) -> Settled:
    """An unreachable target is a refusal (exit 3), or with --allow-infeasible a warning on the closest cut."""
    settled = Settled(point.threshold)
    if unreachable is None:
        return settled
    if allow_infeasible:
        kept = option_hint("--allow-infeasible", "allow_infeasible=True")
        settled.warnings.append(f"{unreachable}; the closest threshold is kept ({kept})")
    else:
        allow = option_hint("--allow-infeasible", "allow_infeasible=True")
        if point.new_rows is not None and point.required_rate is None:  # a lower target would not pass either;
            fix = "add validation rows"  # the message already names a larger --new-rows
        else:
            fix = f"lower {option_hint('--target', 'target')}, add validation rows"
        settled.refusal = UnreachableTarget(
            f"{unreachable}; {fix}, or pass {allow} to keep the closest threshold",
            best_achievable=point.best_achievable,
        )
    return settled


def settle_threshold(
    logits: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    *,
    problem: Problem,
    own: float | None,
    adjust: bool,
    confidence: float | None,
    allow_infeasible: bool,
    transfer: Callable[[float], float] | None = None,
    calibrate: bool = True,
    new_rows: int | float | None = None,
    calibration: Calibration | None = None,
    held_out_rows: int | None = None,
) -> Settled:
    """The threshold after training: when `adjust` or when the solver has no threshold of its own, the exact
    search on the out-of-fold scores ("cv", carried to the final model by `transfer`), else on the val split,
    else on the training rows (optimistic, and said so); otherwise the solver's own threshold.

    The report keeps the metrics at the solver's own threshold (`before_adjustment`) whenever it has one, and
    every split's metrics at the threshold kept (`splits`; the out-of-fold split at its own threshold).
    With `calibrate`, the probability map is fitted on the same held-out scores; not on rows of a `dmo subsample`
    file, whose labels are not the population's (the offset-corrected logit's sigmoid already estimates it). A
    given `calibration` is kept instead (logits that are probabilities already: Calibration.identity).
    `new_rows` is the option as given (see `certified_rows`); `held_out_rows`, one fold's rows with --cv (by
    default the size of the split searched), is the sample a --confidence certificate is about without it.
    """
    fitted = {name: split for name, split in logits.items() if name != "cv"}
    held_out = next((name for name in ("cv", "val", "train") if name in logits), None)
    if calibration is None and held_out and calibrate:
        calibration = fit_platt(logits[held_out], truth[held_out], held_out)
    before = None
    if own is not None:
        before = split_reports(fitted, truth, own, problem=problem, classes=[], calibration=calibration)
    if adjust or own is None:
        split = held_out  # searched on the same scores the probability map is fitted on
        where = "the out-of-fold scores" if split == "cv" else f"the {split} split"
        sample = certified_rows(new_rows, confidence, held_out_rows or int(truth[split].size))
        point, unreachable = fit_threshold(
            logits[split], truth[split], problem, confidence=confidence, where=where, new_rows=sample
        )
        settled = judge_reachability(point, unreachable, allow_infeasible)
        if split == "cv" and transfer is not None:
            settled.threshold = transfer(point.threshold)
        if split == "train":
            settled.warnings.append(OPTIMISTIC)
        if split == "val" and np.count_nonzero(truth[split] == 1) < FEW_VALIDATION_POSITIVES:
            settled.warnings.append(few_validation_positives(int(np.count_nonzero(truth[split] == 1))))
        settled.operating_point = OperatingPointSection(point=point, split=split)
    else:
        settled = Settled(own)
    splits = split_reports(fitted, truth, settled.threshold, problem=problem, classes=[], calibration=calibration)
    if "cv" in logits:  # the out-of-fold scores at their own threshold, before it was carried to the final model
        splits["cv"] = binary_split_report(
            logits["cv"], truth["cv"], threshold=point.threshold, problem=problem, calibration=calibration
        )
    settled.warnings += empty_prediction_warnings(splits)
    settled.splits = SplitsSection(threshold=settled.threshold, splits=splits, before_adjustment=before)
    settled.calibration = calibration
    if held_out is not None:
        settled.evidence = HeldOutCurve.from_scores(  # the default --new-rows of a later re-targeting, as here
            logits[held_out], truth[held_out], split=held_out, certified_rows=held_out_rows or int(truth[held_out].size)
        )
        settled.heldout_scores = logits[held_out]
    return settled


FEW_VALIDATION_POSITIVES = 10  # below this, one positive more or less moves recall by over 10 points


def few_validation_positives(positives: int) -> str:
    """The warning when the threshold rests on a validation split with few positives (a tiny --val-frac)."""
    return (
        f"the threshold rests on the validation split's {positives} positive row(s), so its operating point is "
        "noisy (the report's intervals say how much); give more validation rows, or leave out --val/--val-frac "
        "so --cv 5 counts every positive"
    )


OPTIMISTIC = (
    "the threshold was fitted on the rows the model was trained on, so the operating point is optimistic (new data "
    "will usually do worse); give --val FILE, or --cv K where the solver can be refitted per fold"
)
