"""The operating-point step every pipeline shares: fit the threshold, refuse an unreachable target, and report
the splits at it.

`dmo train` (in memory and streaming), `dmo threshold` and `dmo evaluate` all
go through here, so the search, the infeasible-target error and the split
reports are written once. The exact search itself lives in
dmocli/operating_point/search.py; this module decides what to search on and
what to do with the answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.errors import UnreachableTarget, option_hint
from dmocli.operating_point.alert_budget import AlertBudget, BudgetReport, budget_refusal
from dmocli.operating_point.bounds import fixed_sequence_level
from dmocli.operating_point.calibration import Calibration, fit_platt
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.gain import GainMatrix, RowGains
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.multiclass_calibration import MulticlassCalibration
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import OperatingPoint, search, search_curve
from dmocli.options import POPULATION, read_new_rows
from dmocli.pipelines.report_parts import CalibrationSection, OperatingPointSection, ReportPart, SplitsSection
from dmocli.pipelines.value_report import ValueSection, value_section
from dmocli.report import binary_split_report, empty_prediction_warnings, multiclass_split_report
from dmocli.shift.carry import carried_by_rank

MULTICLASS_FIELDS: dict[str, Any] = {"problem": "multiclass", "target": None, "beta": None}


def problem_fields(problem: Problem | None) -> dict[str, Any]:
    """The problem's report fields; a multi-class model has no target or beta."""
    return problem.to_dict() if problem is not None else dict(MULTICLASS_FIELDS)


def certified_rows(
    new_rows: int | float | str | None, confidence: float | None, stored: int | None = None
) -> int | None:
    """The size of the new sample a --confidence certificate is about (None: the population value).

    By default the population value (`--new-rows inf`): "precision >= 0.9 with probability 0.95" is read as a
    claim about the model, not about one sample of a size the user never gave, and dmo's own checks of it
    (`evaluate --gate`, `monitor`) judge it by an interval around whatever sample they measure. A model file that
    stored the sample its certificate was about (`stored`, its decision's `certificate.new_rows`) keeps it:
    `dmo threshold` re-certifies what training certified. `--new-rows N` names a sample (a test split, a day of
    traffic) whose measured value must meet the target (docs/operating-points.md says why one fold's rows is no
    longer the default).
    """
    new_rows = read_new_rows(new_rows)  # the Python API may give "inf" or a numpy integer
    if confidence is None or new_rows == POPULATION:
        return None
    if new_rows is None:
        return stored
    return int(new_rows)


def fit_threshold(
    scores: np.ndarray,
    labels: np.ndarray,
    problem: Problem,
    *,
    confidence: float | None,
    where: str,
    new_rows: int | None = None,
    budget: AlertBudget | None = None,
    gains: RowGains | None = None,
) -> tuple[OperatingPoint, str | None]:
    """The exact operating point on (scores, labels), and why the target is out of reach when it is (else None).
    `where` names the data in that message ("the val split"). With an alert `budget`, only cuts within it."""
    if gains is not None:  # --problem value: the curve sums each row's gains at its score (operating_point/gain.py)
        curve = ScoreCurve.from_scores(scores, labels, gains=gains)
        point = search_curve(curve, problem, confidence, new_rows, budget=budget)
    else:
        point = search(scores, labels, problem, confidence, new_rows=new_rows, budget=budget)
    if point.feasible is not False:
        return point, None
    if budget is not None:
        alone = search(scores, labels, problem, confidence, new_rows=new_rows) if problem.constraint_name else point
        if alone is point or alone.feasible:  # the budget is what no cut meets: the target alone's cut is the nearest
            flagged = alone.tp + alone.fp
            rows = alone.tp + alone.fp + alone.tn + alone.fn
            text = budget_refusal(budget, flagged, rows, confidence=confidence, new_rows=new_rows, where=where)
            return point, text
    population = search(scores, labels, problem, confidence) if new_rows is not None else None
    return point, unreachable_text(point, problem, confidence=confidence, where=where, population=population)


def unreachable_text(
    point: OperatingPoint,
    problem: Problem,
    *,
    confidence: float | None,
    where: str,
    population: OperatingPoint | None = None,
) -> str:
    """Why a target is out of reach, as facts the report's figures repeat: what was asked (of the population, or
    of the metric measured on `point.new_rows` new rows), what the closest cut shows, and what each way out does.
    `population` is the search of the population value on the same rows, where a new sample was asked."""
    what = problem.constraint_name
    head = f"target {what} >= {problem.target:g} is not {'certified' if confidence else 'reachable'} on {where}"
    if confidence is None:
        return f"{head}: the best {what} of any cut is {point.best_achievable:.4f}"
    if point.new_rows is None:
        text = f"{head} for the population's {what}: {_population_fact(point, problem, confidence)}"
    else:
        asked = option_hint(f"--new-rows {point.new_rows}", f"new_rows={point.new_rows}")
        text = f"{head} for the {what} measured on {point.new_rows:,} new rows ({asked}): "
        text += _sample_fact(point, problem) + _population_way(population, problem, confidence)
    return text + _rows_needed_fact(point, problem)


def _population_fact(point: OperatingPoint, problem: Problem, confidence: float) -> str:
    """The population certificate's refusal: the highest lower bound of any cut, or, where a cut's bound reaches
    the target, why that cut is not certified (precision's fixed sequences stopped before it)."""
    what = problem.constraint_name
    level = fixed_sequence_level(confidence) if problem.kind == "fpor" else confidence
    best = point.best_achievable
    if problem.kind == "fpor" and best >= problem.target:
        return (
            f"the fixed-sequence tests, run from the highest threshold down, stop at their first cut whose "
            f"{level:g} lower bound is below {problem.target:g}, before any cut certifies; the cut with the highest "
            f"bound ({best:.4f}, at {point.tp + point.fp:,} predicted positives) lies past where they stopped, and a "
            "cut picked for its own bound alone is not certified (it would select on noise; docs/operating-points.md)"
        )
    return f"the highest {level:g} lower bound of the {what} at any cut is {best:.4f}"


def _sample_fact(point: OperatingPoint, problem: Problem) -> str:
    """What the new-sample test asked at the closest cut: the rate it had to show, or why no rate would do."""
    what = problem.constraint_name
    counted, name = (
        (point.tp + point.fp, "predicted positives") if problem.kind == "fpor" else (point.tp + point.fn, "positives")
    )
    observed = point.precision if problem.kind == "fpor" else point.recall
    at = f"at the closest cut ({counted:,} {name} here, {what} {observed:.4f})"
    if point.required_rate is not None:
        return f"{at} the {what} had to reach {point.required_rate:.4f}"
    rows = point.tp + point.fp + point.tn + point.fn
    expected = point.new_rows * counted / max(rows, 1)
    return (
        f"{at} not even a {what} of 1 would pass: {point.new_rows:,} new rows would hold only about {expected:,.0f} "
        f"{name}, too few for the {what} measured on them to be promised"
    )


def _population_way(population: OperatingPoint | None, problem: Problem, confidence: float) -> str:
    """The two ways out of a new-sample refusal and what each does: the population's value (with why it would not
    pass either, as a population refusal says it), a larger sample."""
    what = problem.constraint_name
    inf = option_hint("--new-rows inf", "new_rows='inf'")
    larger = f"; a larger {option_hint('--new-rows', 'new_rows=')} asks less"
    if population is None:
        return larger
    if population.feasible:
        objective = "recall" if problem.kind == "fpor" else "precision"
        return (
            f"; {inf} certifies the population's {what} instead, which passes here (at {objective} "
            f"{population.objective:.4f}){larger}"
        )
    why = _population_fact(population, problem, confidence)
    return f"; {inf} (the population's {what}) is not certified here either: {why}{larger}"


def _rows_needed_fact(point: OperatingPoint, problem: Problem) -> str:
    """How many rows a certificate needs at the rate observed at the cut the plain search picks, against those
    counted, and the labeled rows like these that would take; a need far beyond them says a lower target is the
    practical way."""
    counted = max(point.rows_counted or 0, 1)
    if point.rows_needed is None or point.rows_needed <= counted:  # not a matter of rows: said before
        return ""
    name = "predicted positives" if problem.kind == "fpor" else "positives"
    times = point.rows_needed / counted
    rows = point.tp + point.fp + point.tn + point.fn
    text = (
        f"; at the {problem.constraint_name} observed at the cut the plain search picks, a certificate needs about "
        f"{point.rows_needed:,} {name} ({times:.1f} times the {counted:,} counted, so about {times * rows:,.0f} "
        "labeled rows like these)"
    )
    if times >= FAR_MORE_ROWS:
        text += f": that {problem.constraint_name} is too close to the target for more rows to be the practical way"
    return text


FAR_MORE_ROWS = 100  # a certificate needing this many times the rows counted is out of reach by more data


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


@dataclass(frozen=True, kw_only=True)
class Settled:
    """The threshold a trained model keeps, the report's sections on how it was chosen, and the refusal to raise
    once the report is complete (an unreachable target without --allow-infeasible). Frozen: each step that adds to
    it (the search, the splits, the held-out curve) builds the next one with `dataclasses.replace`."""

    threshold: float
    warnings: tuple[str, ...] = ()
    refusal: UnreachableTarget | None = None
    operating_point: OperatingPointSection | None = None  # None: no search ran (the solver's own threshold kept)
    splits: SplitsSection | None = None
    calibration: Calibration | None = None  # the probability map, fitted on the held-out scores where there are
    heldout: HeldOutCurve | None = None  # the curve of the scores the threshold was searched on, for the model file
    heldout_scores: np.ndarray | None = None  # those scores themselves, for the model file's drift profile
    oof_threshold: float | None = None  # with --cv: the searched cut on the out-of-fold scores' own scale
    alert_budget: BudgetReport | None = None  # the alert budget's section, where one was asked
    value: ValueSection | None = None  # --problem value: the value at the threshold, the default cut, nothing

    def parts(self) -> tuple[ReportPart, ...]:
        """The report's sections of the operating point: the search (if one ran), the splits, the probability map,
        the alert budget."""
        searched = () if self.operating_point is None else (self.operating_point,)
        splits = () if self.splits is None else (self.splits,)
        budget = () if self.alert_budget is None else (self.alert_budget,)
        value = () if self.value is None else (self.value,)
        return (*searched, *splits, CalibrationSection(calibration=self.calibration), *budget, *value)


@dataclass(frozen=True, kw_only=True)
class Asked:
    """The operating point the options ask for: the problem, `--confidence`, `--new-rows` as given (see
    `certified_rows`: the population value without it), and whether `--allow-infeasible` keeps a closest cut."""

    problem: Problem
    confidence: float | None = None
    new_rows: int | float | None = None
    allow_infeasible: bool = False
    budget: AlertBudget | None = None  # --max-alert-rate / --max-alerts: only cuts within it


@dataclass(frozen=True, kw_only=True)
class FitDetails:
    """What the fit tells the threshold step beyond its scores: the solver's own threshold (`own`, None: it has
    none) and whether to search anyway (`adjust`); the saved model's own scores of the training rows, where the
    out-of-fold ones are carried to them by rank (`carry_to`); whether to fit the probability map (`calibrate`) or
    the map to keep (`calibration`); and one fold's rows with --cv, what the held-out curve records as its
    `certified_rows` (`held_out_rows`; by default the size of the split searched)."""

    own: float | None = None
    adjust: bool = True
    carry_to: np.ndarray | None = None
    calibrate: bool = True
    calibration: Calibration | None = None
    held_out_rows: int | None = None
    gain: GainMatrix | None = None  # --problem value: the gain matrix, and its columns' values per split
    gain_values: dict[str, np.ndarray] | None = None  # ((rows, columns) in gain.columns order, rows as `truth`'s)

    def row_gains(self, split: str) -> RowGains | None:
        """The gains of the rows of `split` (None without --gain)."""
        if self.gain is None or self.gain_values is None:
            return None
        values = self.gain_values[split]
        columns = {name: values[:, i] for i, name in enumerate(self.gain.columns)}
        return self.gain.row_gains(columns, values.shape[0])


def judge_reachability(point: OperatingPoint, unreachable: str | None, allow_infeasible: bool) -> Settled:
    """An unreachable target is a refusal (exit 3), or with --allow-infeasible a warning on the closest cut."""
    if unreachable is None:
        return Settled(threshold=point.threshold)
    if allow_infeasible:
        kept = option_hint("--allow-infeasible", "allow_infeasible=True")
        return Settled(threshold=point.threshold, warnings=(f"{unreachable}; the closest threshold is kept ({kept})",))
    allow = option_hint("--allow-infeasible", "allow_infeasible=True")
    if point.new_rows is not None and point.required_rate is None:  # a lower target would not pass either;
        fix = "add labeled rows"  # the message already names a larger --new-rows
    elif point.best_achievable is None:  # an alert budget alone: no target to lower (its message names a larger one)
        fix = "add labeled rows"
    else:
        fix = f"lower {option_hint('--target', 'target')}, add labeled rows"
    refusal = UnreachableTarget(
        f"{unreachable}; {fix}, or pass {allow} to keep the closest threshold", best_achievable=point.best_achievable
    )
    return Settled(threshold=point.threshold, refusal=refusal)


def settle_threshold(
    logits: dict[str, np.ndarray], truth: dict[str, np.ndarray], asked: Asked, fit: FitDetails = FitDetails()
) -> Settled:
    """The threshold after training: when `fit.adjust` or when the solver has no threshold of its own, the exact
    search for `asked` on the out-of-fold scores ("cv"), else on the val split, else on the training rows
    (optimistic, and said so); otherwise the solver's own threshold. `fit.carry_to`, the saved model's own scores
    of the training rows where they are on another scale than the out-of-fold ones (pipelines/cross_fit.py),
    carries the out-of-fold scores to them by rank first (shift/carry.carried_by_rank): the search, the
    certificate and the held-out curve are then on the scale the model decides on, with the out-of-fold counts
    (and the drift profile keeps no score: carried scores are the model's own on the rows it was fitted on).
    A cut that flags none of the model's own scores of the training rows is not feasible, whatever the held-out
    split says (`flags_none_of_its_rows`).

    The report keeps the metrics at the solver's own threshold (`before_adjustment`) whenever it has one, and
    every split's metrics at the threshold kept (`splits`; the out-of-fold split at its own threshold).
    With `fit.calibrate`, the probability map is fitted on the same held-out scores; not on rows of a `dmo
    subsample` file, whose labels are not the population's (the offset-corrected logit's sigmoid already
    estimates it). A given `fit.calibration` is kept instead (logits that are probabilities already:
    Calibration.identity).
    """
    problem, oof = asked.problem, logits.get("cv")
    if oof is not None and fit.carry_to is not None:
        logits = {**logits, "cv": carried_by_rank(oof, fit.carry_to)}
    fitted = {name: split for name, split in logits.items() if name != "cv"}
    held_out = next((name for name in ("cv", "val", "train") if name in logits), None)
    calibration = fit.calibration
    if calibration is None and held_out and fit.calibrate:
        calibration = fit_platt(logits[held_out], truth[held_out], held_out)
    before = None
    if fit.own is not None:
        before = split_reports(fitted, truth, fit.own, problem=problem, classes=[], calibration=calibration)
    flags_none = False
    if fit.adjust or fit.own is None:  # searched on the same scores the probability map is fitted on
        settled, flags_none = _searched(logits, truth, held_out, asked, gains=fit.row_gains(held_out))
        point = settled.operating_point.point
        if oof is not None:
            cut = point.threshold if fit.carry_to is None else oof_cut(oof, logits["cv"], point.threshold)
            settled = dataclasses.replace(settled, oof_threshold=cut)
    else:
        settled = Settled(threshold=fit.own)
    splits = split_reports(fitted, truth, settled.threshold, problem=problem, classes=[], calibration=calibration)
    if "cv" in logits:  # the out-of-fold scores (carried to the model's scale, where they are) at the cut
        splits["cv"] = binary_split_report(
            logits["cv"], truth["cv"], threshold=point.threshold, problem=problem, calibration=calibration
        )
        if flags_none:  # its rows reach the target there, but the model flags none of its own
            splits["cv"]["feasible"] = False
    heldout = _heldout_curve(logits, truth, held_out, fit)
    return dataclasses.replace(
        settled,
        warnings=(*settled.warnings, *empty_prediction_warnings(splits)),
        splits=SplitsSection(threshold=settled.threshold, splits=splits, before_adjustment=before),
        calibration=calibration,
        heldout=heldout,
        # carried scores are the model's scores of the rows it was fitted on, ordered as the out-of-fold ones: no
        # reference for the drift of its scores on new rows
        heldout_scores=None if heldout is None or heldout.carried else logits[held_out],
        value=None if heldout is None else value_section(heldout, settled.threshold, calibration),
    )


def _heldout_curve(
    logits: dict[str, np.ndarray], truth: dict[str, np.ndarray], held_out: str | None, fit: FitDetails
) -> HeldOutCurve | None:
    """The held-out curve the model file keeps: the scores the threshold was searched on (None: no held-out
    split), their `certified_rows` one held-out split's rows (one fold's with --cv), for the record."""
    if held_out is None:
        return None
    carried = fit.carry_to is not None
    return HeldOutCurve.from_scores(
        logits[held_out],
        truth[held_out],
        split=held_out,
        certified_rows=fit.held_out_rows or int(truth[held_out].size),
        carried=held_out == "cv" and carried,
        highest_own=_highest_own(logits, held_out, carried=carried),
        gain=fit.gain,
        gain_values=None if fit.gain_values is None else fit.gain_values[held_out],
    )


def _searched(
    logits: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    split: str,
    asked: Asked,
    *,
    gains: RowGains | None = None,
) -> tuple[Settled, bool]:
    """The exact search on the held-out `split` and what follows from it (a refusal, or with `allow_infeasible` a
    warning, where the target is out of reach; the warnings on the split searched), and whether its cut flags none
    of the model's own training rows."""
    where = "the out-of-fold scores" if split == "cv" else f"the {split} split"
    sample = certified_rows(asked.new_rows, asked.confidence)
    point, unreachable = fit_threshold(
        logits[split],
        truth[split],
        asked.problem,
        confidence=asked.confidence,
        where=where,
        new_rows=sample,
        budget=asked.budget,
        gains=gains,
    )
    flags_none = flags_none_of_its_rows(point, logits.get("train"), where=where)
    if flags_none is not None:
        point, unreachable = dataclasses.replace(point, feasible=False), flags_none
    settled = judge_reachability(point, unreachable, asked.allow_infeasible)
    warnings = [OPTIMISTIC] if split == "train" else []
    if split == "val" and np.count_nonzero(truth[split] == 1) < FEW_VALIDATION_POSITIVES:
        warnings.append(few_validation_positives(int(np.count_nonzero(truth[split] == 1))))
    section = OperatingPointSection(point=point, split=split)
    budget = None
    if asked.budget is not None:
        rows = point.tp + point.fp + point.tn + point.fn
        budget = BudgetReport(
            budget=asked.budget, flagged=point.tp + point.fp, rows=rows, confidence=asked.confidence, new_rows=sample
        )
    return dataclasses.replace(
        settled, warnings=(*settled.warnings, *warnings), operating_point=section, alert_budget=budget
    ), flags_none is not None


def flags_none_of_its_rows(point: OperatingPoint, own: np.ndarray | None, *, where: str) -> str | None:
    """Why a cut that reaches the target on the held-out scores is not feasible when the saved model's own scores
    of its training rows (`own`) all lie below it: the model would flag nothing (the held-out scores were on
    another scale). None when it flags some, or when nothing was feasible anyway (FPOR and FROP only)."""
    if own is None or own.size == 0:
        return None
    return above_its_highest_score(point, float(own.max()), where=where, rows=f"its {own.size} training rows")


def above_its_highest_score(
    point: OperatingPoint, highest: float | None, *, where: str, rows: str = "its training rows"
) -> str | None:
    """flags_none_of_its_rows from the highest of those scores alone, as the held-out curve keeps it
    (`HeldOutCurve.highest_own`): `dmo threshold` re-targets on the curve without the model's scores."""
    if highest is None or not point.feasible or np.float32(highest) >= np.float32(point.threshold):
        return None
    rank = option_hint("--cv-transfer rank", "cv_transfer='rank'")
    return (
        f"the threshold {point.threshold:.6g} reaches the target on {where} but is above every score the saved "
        f"model gives {rows} (the highest: {highest:.6g}), so it flags none of them: the scores it was chosen on "
        f"are on another scale; {rank} carries the cut to the model's own scores by the share of rows it flags"
    )


def _highest_own(logits: dict[str, np.ndarray], held_out: str | None, *, carried: bool) -> float | None:
    """What the held-out curve keeps of the saved model's own scores of its training rows (`highest_own`): their
    highest, where the curve holds out-of-fold scores not carried to them; None elsewhere."""
    own = logits.get("train")
    if held_out != "cv" or carried or own is None or own.size == 0:
        return None
    return float(np.max(own))


def oof_cut(oof: np.ndarray, carried: np.ndarray, threshold: float) -> float:
    """The cut on the out-of-fold scores that flags the rows `threshold` flags on their carried scores (the lowest
    out-of-fold score among them; just above every one when it flags none): the report's `cv.oof_threshold`."""
    flagged = carried >= np.float32(threshold)
    if not flagged.any():
        return float(np.nextafter(np.float32(oof.max()), np.float32(np.inf)))
    return float(oof[flagged].min())


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
