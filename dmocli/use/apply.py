"""Re-fitting a saved model's threshold on new data, or re-targeting it on the held-out curve it keeps (evaluate
is use/evaluate.py, predict use/predict.py).

DATA is streamed in record batches, keeping only one logit and one label per row (what exact metrics need), so it
is read once, and DATA may be `-`: a CSV on standard input.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dmocli.data import outputs, sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError, option_hint
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.operating_point.alert_budget import AlertBudget, BudgetReport
from dmocli.operating_point.calibration import fit_platt
from dmocli.operating_point.gain import GainMatrix
from dmocli.operating_point.heldout import NO_GAINS, HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import OperatingPoint, search_curve
from dmocli.options import POPULATION, check_new_rows
from dmocli.pipelines.report_parts import OperatingPointSection, SplitsSection
from dmocli.pipelines.review_banding import BandAsked, rebanded
from dmocli.pipelines.saving import finish_threshold, retargeted_info, threshold_envelope
from dmocli.pipelines.thresholding import (
    OPTIMISTIC,
    above_its_highest_score,
    certified_rows,
    fit_threshold,
    judge_reachability,
    split_reports,
)
from dmocli.pipelines.value_report import ValueSection, value_section
from dmocli.prep.row_fingerprint import share_of_sketched_rows
from dmocli.report import empty_prediction_warnings, unlabeled_warning
from dmocli.scoring.accumulators import labeled_scores
from dmocli.use.class_refit import refit_class_offsets
from dmocli.use.recertify import Recertified, noted, recertified, report_fields, with_way_out
from dmocli.use.results.threshold import ClassRefitResult, RefitResult

SPLIT_NAMES = {"cv": "out-of-fold scores", "val": "validation scores", "data": "scores", "train": "training scores"}


def heldout_name(model: DmoModel, split: str) -> str:
    """What the held-out curve's scores are, as a report names them: a `--time-col` model's cross-fitted scores are
    its later blocks' out-of-time scores (pipelines/time_blocks.py), not shuffled folds' out-of-fold ones."""
    if split == "cv" and model.info.get("time_blocks") is not None:
        return "out-of-time scores"
    return SPLIT_NAMES[split]


def off_scale_warning(model_path: str | Path, threshold: float) -> str:
    """What a cut searched on a curve off the model's scale (curve_off_scale) may do, and the ways out."""
    return (
        f"the held-out curve {model_path} keeps is its fold models' out-of-fold scores, not this boosted-tree "
        "ensemble's own (it averages their probabilities), so the threshold "
        f"{threshold:.6g} found on it may flag far fewer rows than the curve says, or none; give labeled DATA to "
        "search the model's own scores, or retrain with --cv-transfer rank"
    )


TRAINING_ROWS_SHARE = 0.5  # DATA this much made of the training rows is refused without --allow-train-rows


def refuse_training_rows(model: DmoModel, hashes: np.ndarray | None, where: str) -> None:
    """DATA that is mostly the rows the model was trained on: its threshold there would be optimistic (the model
    has fitted those rows), with nothing to say so. Said, with the ways out."""
    if model.training_rows is None or hashes is None:
        return
    share, counted = share_of_sketched_rows(model.training_rows, hashes)
    if share >= TRAINING_ROWS_SHARE:
        stored = option_hint("leave DATA out", "data=None")
        allow = option_hint("--allow-train-rows", "allow_train_rows=True")
        raise DmoError(
            f"{where} holds the rows the model was trained on (about {share:.0%} of the {counted} rows its "
            "fingerprint checks), where its precision and recall are optimistic; give rows it has not seen, "
            f"{stored} to re-target on the held-out scores the model keeps, or pass {allow}"
        )


def refit_threshold(
    model_path: str | Path,
    data: sources.Source | None,
    problem: Problem | None,
    output: str | Path,
    *,
    confidence: float | None = None,
    allow_infeasible: bool = False,
    report_path: str | Path | None = None,
    engine: EngineChoice = LOCAL,
    new_rows: int | float | str | None = None,
    allow_train_rows: bool = False,
    no_confidence: bool = False,
) -> dict[str, Any]:
    """Exact threshold search for `problem` on `data`; writes a new model file with that threshold
    (-o may be MODEL itself: it is read before the new one replaces it, atomically); returns the report (`refit`
    returns it as a typed result).

    Without data, on the held-out curve the model file keeps (the out-of-fold or validation scores training
    searched on): the same search and certificate as train, so re-targeting needs no new labels and gives the
    threshold `dmo train` gives for that target and seed. Without a problem, the one stored in the model (and its
    --confidence and --new-rows, unless a confidence is given) is searched again: re-fitting on fresh rows is the
    common case, and the model already says what it was trained for. A certified model's new threshold is
    certified at its confidence unless another is given or `no_confidence` drops it (use/recertify.py)."""
    return refit(
        model_path,
        data,
        problem,
        output,
        confidence=confidence,
        no_confidence=no_confidence,
        allow_infeasible=allow_infeasible,
        report_path=report_path,
        engine=engine,
        new_rows=new_rows,
        allow_train_rows=allow_train_rows,
    ).to_dict()


def refit(
    model_path: str | Path,
    data: sources.Source | None,
    problem: Problem | None,
    output: str | Path,
    *,
    confidence: float | None = None,
    no_confidence: bool = False,
    allow_infeasible: bool = False,
    report_path: str | Path | None = None,
    engine: EngineChoice = LOCAL,
    new_rows: int | float | str | None = None,
    allow_train_rows: bool = False,
    gain: str | None = None,
    budget: AlertBudget | None = None,
    review_budget: float | None = None,
) -> RefitResult | ClassRefitResult:
    """`refit_threshold`'s work, its result typed: a binary model's threshold (a multi-class model's class offsets:
    use/class_refit.py) searched on DATA or on the held-out curve, written as a new model file."""
    started = time.perf_counter()
    data = None if data is None else sources.accept(data)  # the Python API may pass a pandas DataFrame
    outputs.check_outputs({"-o": output, "--report": report_path}, {"DATA": data} if data is not None else {})
    outputs.refuse_misnamed_model(output)
    outputs.check_distinct({"--report": report_path}, {"MODEL": model_path})
    model = load_model(model_path)
    if not model.binary:
        return refit_class_offsets(
            model,
            model_path=model_path,
            data=data,
            problem=problem,
            output=output,
            confidence=confidence,
            no_confidence=no_confidence,
            allow_infeasible=allow_infeasible,
            report_path=report_path,
            engine=engine,
            started=started,
        )
    search = _search_asked(model, problem, confidence, new_rows, no_confidence=no_confidence, budget=budget)
    valued = Valued(asked=search.problem.kind == "value", gain=gain)
    labeled = _labeled_scores(model, model_path, data, engine=engine, allow_train_rows=allow_train_rows, value=valued)
    new_rows = certified_rows(search.new_rows, search.confidence, model.decision.certificate.new_rows)
    point, unreachable = _searched_point(labeled, search, new_rows=new_rows, on_heldout=data is None)
    settled = judge_reachability(point, unreachable, allow_infeasible)
    optimistic = [OPTIMISTIC] if labeled.curve.split == "train" else []
    off_scale = [off_scale_warning(model_path, point.threshold)] if data is None and model.curve_off_scale else []
    retargeted, splits = _retarget(
        model, labeled, point, search=search, new_rows=new_rows, refit_calibration=data is not None
    )
    review = BandAsked(
        budget=review_budget, confidence=search.confidence, next_rows=new_rows, allow_infeasible=allow_infeasible
    )
    retargeted, band, band_warnings = rebanded(retargeted, labeled.curve, search.problem.kind, review)
    report = threshold_envelope(
        retargeted,
        model_path,
        OperatingPointSection(point=point),
        SplitsSection(threshold=point.threshold, splits=splits),
        *_value_part(labeled.curve, point.threshold, retargeted),
        *_budget_report(search, point, new_rows),
        *(() if band is None else (band.section,)),
        data=labeled.fitted_on,
        engine=engine.name,
        output=output,
        problem_fields=search.problem.to_dict(),
        problem_source=search.source,
        confidence=search.confidence,
        **report_fields(search.certificate),
        previous_threshold=model.threshold,
        unlabeled_rows=labeled.unlabeled,
        warnings=(unlabeled_warning(labeled.unlabeled, data) if data is not None else [])
        + [*settled.warnings, *optimistic, *off_scale, *band_warnings]
        + empty_prediction_warnings(splits),
    )
    refusal = with_way_out(settled.refusal, search.certificate) or (band.refusal if band else None)
    written = finish_threshold(
        retargeted, report, output=output, report_path=report_path, started=started, refusal=refusal
    )
    return RefitResult.of(written)


@dataclass(frozen=True, kw_only=True)
class _Search:
    """The operating point a re-fit searches for, and whether it came from the options or the model file."""

    problem: Problem
    source: str  # "option" or "model"
    confidence: float | None
    new_rows: int | float | str | None
    certificate: Recertified  # MODEL's certificate kept at its confidence, another asked for, or dropped
    budget: AlertBudget | None = None  # the alert budget the cut must keep within (None: none)


def _search_asked(
    model: DmoModel,
    problem: Problem | None,
    confidence: float | None,
    new_rows: int | float | str | None,
    *,
    no_confidence: bool,
    budget: AlertBudget | None = None,
) -> _Search:
    """The problem to search: the one given, or the model's own. Its certificate: the confidence given, else the
    model's (and its --new-rows, or the population), since the new threshold must not leave a file whose info
    claims a certificate it lost; `no_confidence` (or a problem with no bound: ofbs) drops it (use/recertify.py)."""
    problem, budget = _budget_asked(model, problem, budget)
    source = "option" if problem is not None else "model"
    if problem is None:
        problem = model.problem or Problem("ofbs")  # a binary model always stores one; ofbs is train's default
    certificate = model.decision.certificate
    bounded = problem.kind not in UNBOUNDED or budget is not None  # a budget's share is bounded whatever the problem
    kept = recertified(certificate, confidence, no_confidence=no_confidence, bounded=bounded)
    if kept.inherited and new_rows is None:  # the model's own certificate (no new_rows: the population)
        new_rows = certificate.new_rows or POPULATION
    check_new_rows(new_rows, kept.confidence)  # --new-rows alone changes the sample of the model's own certificate
    return _Search(
        problem=problem, source=source, confidence=kept.confidence, new_rows=new_rows, certificate=kept, budget=budget
    )


def _budget_asked(
    model: DmoModel, problem: Problem | None, budget: AlertBudget | None
) -> tuple[Problem | None, AlertBudget | None]:
    """The problem and alert budget a re-fit searches for: a budget given replaces MODEL's, and without --problem
    a model of no constraint of its own (ofbs, as train's default, or a budget alone) then takes the most recall
    within it, as `dmo train --max-alert-rate` does; without a budget, MODEL's own is kept for its own problem and
    dropped for a --problem given."""
    if budget is not None:
        alone = problem is None and model.problem is not None and model.problem.kind in ("ofbs", "alerts")
        return (Problem("alerts") if alone else problem), budget
    if problem is not None:
        return problem, None
    try:
        return None, AlertBudget.from_info(model.info.get("alert_budget"))
    except ValueError as exc:
        raise DmoError(f"the model file's alert budget cannot be read ({exc}); retrain it") from exc


def _budget_report(search: _Search, point: OperatingPoint, new_rows: int | None) -> tuple[BudgetReport, ...]:
    """The threshold report's `alert_budget` section at the new cut (none without a budget)."""
    if search.budget is None:
        return ()
    rows, flagged = point.tp + point.fp + point.tn + point.fn, point.tp + point.fp
    return (
        BudgetReport(budget=search.budget, flagged=flagged, rows=rows, confidence=search.confidence, new_rows=new_rows),
    )


def _searched_point(
    labeled: "_Labeled", search: "_Search", *, new_rows: int | float | None, on_heldout: bool
) -> tuple[OperatingPoint, str | None]:
    """The exact search on the labeled scores, and why its point is out of reach (None: it is not). On the held-out
    curve the model file keeps (`on_heldout`), a cut above every score the model gives its training rows (the
    curve's `highest_own`) flags none of them: not feasible, whatever the curve's rows say there
    (thresholding.above_its_highest_score)."""
    if search.problem.kind == "value":  # the curve's gains at each score: its rows alone do not carry them
        point, unreachable = search_curve(labeled.curve.score_curve(), search.problem, budget=search.budget), None
    else:
        point, unreachable = fit_threshold(
            labeled.logits,
            labeled.y,
            search.problem,
            confidence=search.confidence,
            where=labeled.fitted_on,
            new_rows=new_rows,
            budget=search.budget,
        )
    beyond = above_its_highest_score(point, labeled.curve.highest_own, where=labeled.fitted_on) if on_heldout else None
    if beyond is not None:
        return dataclasses.replace(point, feasible=False), beyond
    return point, unreachable


UNBOUNDED = ("ofbs", "value")  # problems with no constrained metric: a certificate of the model's is dropped


def _with_budget(info: dict[str, Any], budget: AlertBudget | None) -> dict[str, Any]:
    """The new file's info with the alert budget its cut keeps within (none: MODEL's entry dropped)."""
    kept = {key: value for key, value in info.items() if key != "alert_budget"}
    return kept if budget is None else {**kept, "alert_budget": budget.info()}


@dataclass(frozen=True)
class Valued:
    """Whether a re-fit searches --problem value (`asked`), and the `gain` it weighs the stored curve by (None: the
    gain the model was trained with)."""

    asked: bool = False
    gain: str | None = None

    def weighed(self, curve: HeldOutCurve) -> HeldOutCurve:
        """The curve weighed by `gain` (over the columns whose sums it keeps) or its own gain where value is asked; a
        curve without gains refused (HeldOutCurve.with_gain); as it is otherwise."""
        if not self.asked:
            return curve
        if self.gain is not None:
            return curve.with_gain(GainMatrix.parse(self.gain))
        if curve.gains is None:
            raise DmoError(NO_GAINS)
        return curve


def _value_part(curve: HeldOutCurve, threshold: float, model: DmoModel) -> tuple[ValueSection, ...]:
    """The report's `value` section of a curve weighed by a gain matrix (none for one that is not)."""
    section = value_section(curve, threshold, model.calibration) if curve.gain is not None else None
    return () if section is None else (section,)


@dataclass(frozen=True, kw_only=True)
class _Labeled:
    """The labeled scores a re-fit searches: DATA's, or the held-out curve the model file keeps, and where from."""

    logits: np.ndarray
    y: np.ndarray
    curve: HeldOutCurve
    unlabeled: int
    fitted_on: str  # DATA, or the held-out curve, as the report and the model file name it


def _labeled_scores(
    model: DmoModel,
    model_path: str | Path,
    data: sources.Source | None,
    *,
    engine: EngineChoice,
    allow_train_rows: bool,
    value: Valued = Valued(),
) -> _Labeled:
    """DATA's logits and labels (refused where DATA is mostly the training rows, unless allowed), or without DATA
    the rows of the held-out curve the model file keeps, so re-targeting needs no new labels; for --problem value,
    that curve weighed by its gain (`value.weighed`; DATA, whose rows' amounts no re-fit reads, is refused)."""
    if value.asked and data is not None:
        raise DmoError(
            "--problem value re-targets on the held-out curve MODEL keeps, with its gain columns' sums; leave DATA "
            "out (a new threshold on new rows' amounts needs a retrain with --val)"
        )
    if data is None:
        curve = value.weighed(model.stored_heldout(model_path))
        logits, y = curve.rows()
        where = f"the held-out {heldout_name(model, curve.split)} stored in {model_path}"
        return _Labeled(logits=logits, y=y, curve=curve, unlabeled=0, fitted_on=where)
    logits, y, _, unlabeled, hashes = labeled_scores(model, data, engine, hashed=model.training_rows is not None)
    fitted_on = sources.describe(data)
    if not allow_train_rows:
        refuse_training_rows(model, hashes, fitted_on)
    curve = HeldOutCurve.from_scores(logits, y, split="data", certified_rows=int(y.size))
    return _Labeled(logits=logits, y=y, curve=curve, unlabeled=unlabeled, fitted_on=fitted_on)


def _retarget(
    model: DmoModel,
    labeled: _Labeled,
    point: OperatingPoint,
    *,
    search: _Search,
    new_rows: int | None,
    refit_calibration: bool,
) -> tuple[DmoModel, dict[str, dict[str, Any]]]:
    """`model` at the new operating point (a new model: threshold, problem, held-out curve, probability map and the
    info at the new threshold; the loaded one is left as it was) and the splits there. The map is refitted on
    DATA's labeled rows, as the threshold is; on the held-out curve the map training fitted on its rows is kept."""
    calibration = (
        fit_platt(labeled.logits, labeled.y, labeled.fitted_on) or model.calibration
        if refit_calibration
        else model.calibration
    )
    splits = split_reports(
        {"data": labeled.logits},
        {"data": labeled.y},
        point.threshold,
        problem=search.problem,
        classes=model.labels.classes,
        calibration=calibration,
    )
    # The training figures were at the old threshold: the file keeps the ones at its new one.
    info = retargeted_info(
        model.info,
        confidence=search.confidence,
        new_rows=new_rows,
        certified=point.feasible,
        fitted_on=labeled.fitted_on,
        splits=splits,
        calibration=calibration,
        calibration_refitted=False,  # the stored map is kept where none is refitted (no DATA, or too few rows)
    )
    decision = dataclasses.replace(
        model.decision,
        threshold=point.threshold,
        problem=search.problem,
        heldout=labeled.curve,
        info=_with_budget(noted(info, search.certificate.dropped), search.budget),
    )
    return model.with_decision(decision), splits
