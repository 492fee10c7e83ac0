"""The one tail of every `dmo train` path: from a fitted model and its scores to the report, the operating point,
the model file and the refusal of an unreachable target.

The in-memory pipeline (one process or torchrun), the streaming solvers and the trees trained on Dask differ in
how they read and fit, and in nothing after: each hands a `FittedRun` to `conclude`, which builds the report
envelope, settles the threshold (binary) or the class probability map (multi-class), adds the cross-fitting
section, refuses with the full report when the target is out of reach, builds the `DmoModel` with its decision
(models/decision.py: the operating point, the held-out curve, the info) and drift profile, and writes it. A field
of the report or the model file is added here, once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dmocli.data import sources
from dmocli.heldout_figures import FiguresSection, HeldOutFigures, ImportanceSection, top_importance
from dmocli.models.architecture import Architecture
from dmocli.models.decision import Decision
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.alert_budget import AlertBudget
from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.gain import GainMatrix, RowGains
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import OperatingPoint
from dmocli.options import TrainOptions
from dmocli.pipelines.cross_fit import CrossFitted, cv_report
from dmocli.pipelines.multiclass import SettledClasses, multiclass_cv_report, settle_classes
from dmocli.pipelines.report_parts import BinaryCvSection, MulticlassCvSection, TrainingRunSection, assemble, extended
from dmocli.pipelines.review_banding import BandOutcome, settle_band
from dmocli.pipelines.saving import finish, refuse_with_report, training_info
from dmocli.pipelines.thresholding import Asked, FitDetails, Settled, certified_rows, problem_fields, settle_threshold
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.prep.features import LevelCounts, Preprocessor
from dmocli.prep.labels import LabelSpec
from dmocli.report import label_fields
from dmocli.shift.drift_profile import Profile
from dmocli.solvers.base import SolverParams


@dataclass(kw_only=True)
class FittedRun:
    """What a train path hands the tail: the fitted model, its logits and labels per split ("train", "val", and
    "cv" for out-of-fold scores), and what the path alone knows of how it got them."""

    solver: str
    params: SolverParams
    problem: Problem | None  # None: a multi-class model (arg-max over the class logits)
    labels: LabelSpec
    preprocessor: Preprocessor
    architecture: Architecture
    network: Any  # a torch module, the streaming solvers' weights, or BoostedTrees
    device: str
    logits: dict[str, np.ndarray]
    truth: dict[str, np.ndarray]
    own_threshold: float | None  # the solver's own threshold, kept when no search runs
    adjust: bool  # search the exact threshold on the held-out scores
    fit_seconds: float
    solver_trace: dict[str, Any]
    levels: LevelCounts  # DATA's unseen and missing categorical levels
    profile: ProfileBuilder  # the training rows' features, counted; the held-out scores are added here
    warnings: list[str] = field(default_factory=list)  # what the path found in the data, in its order
    solver_warnings: list[str] = field(default_factory=list)
    report_fields: dict[str, Any] = field(default_factory=dict)  # the path's own envelope fields (val_ levels, ...)
    after_fields: dict[str, Any] = field(default_factory=dict)  # the path's own fields after the operating point
    info_fields: dict[str, Any] = field(default_factory=dict)  # the path's own model-file info (rows, engine)
    crossed: CrossFitted | None = None  # the out-of-fold fits, when --cv cross-fitted the threshold
    calibrate: bool = True  # False on a `dmo subsample` file's rows: their labels are not the population's
    calibration: Calibration | None = None  # a probability map given instead of fitted (an ensemble's identity)
    training_rows: np.ndarray | None = None  # the sketch of the training rows (prep/row_fingerprint.py)
    online: dict[str, Any] | None = None  # a streaming solver's own progressive figures: the model's summary
    class_problem: ClassProblem | None = None  # a multi-class operating point (class offsets); None: arg-max
    gain: GainMatrix | None = None  # --problem value: the gain matrix ...
    gain_values: dict[str, np.ndarray] | None = None  # ... and its columns' values of each split's rows, as `truth`


def conclude(
    run: FittedRun,
    opts: TrainOptions,
    data: sources.Source,
    *,
    output: Path | None,
    report_path: str | Path | None,
    started: float,
) -> tuple[DmoModel, dict[str, Any]]:
    """The report, the operating point and the model file of `run` (see the module docstring). With `output`
    and `report_path` None nothing is written (a torchrun process other than the first, or the Python API)."""
    problem = run.problem
    settlement = _settle_binary(run, opts, problem) if problem is not None else _settle_classes(run, opts)
    report = _report(run, opts, settlement, data=data, output=output)
    if settlement.settled.refusal is not None:
        refuse_with_report(settlement.settled.refusal, report, report_path, started)
    model = _model(run, opts, settlement, report)
    report = extended(report, ImportanceSection(importance=top_importance(model)))  # the page's: needs the model
    return finish(model, report, output=output, report_path=report_path, started=started)


@dataclass(frozen=True, kw_only=True)
class _Settlement:
    """The operating point of a run, as the report and the model file need it: binary and multi-class differ in
    how it is found and in nothing that follows, so both hand on this one record."""

    settled: Settled | SettledClasses
    threshold: float | None  # None: a multi-class model
    heldout: HeldOutCurve | None  # the held-out curve the model file keeps (None: nothing on its scale)
    heldout_scores: np.ndarray | None  # the drift profile's score (see _finished_profile)
    fields: dict[str, Any]  # the report's problem fields
    cv: tuple[BinaryCvSection | MulticlassCvSection, ...]  # the report's `cv` section, when --cv cross-fitted
    class_offsets: np.ndarray | None = None  # a multi-class operating point's offsets, for the model file
    class_problem: ClassProblem | None = None  # and its problem
    band: BandOutcome | None = None  # the review band under the threshold, where --review-budget asked for one


def _settle_binary(run: FittedRun, opts: TrainOptions, problem: Problem) -> _Settlement:
    """The binary threshold: the exact search on the held-out scores (or the solver's own threshold); under --cv
    on the out-of-fold scores, carried to the saved model's own scale where it has another (cross_fit.py)."""
    crossed = run.crossed
    settled = settle_threshold(
        run.logits,
        run.truth,
        Asked(
            problem=problem,
            confidence=opts.confidence,
            new_rows=opts.new_rows,
            allow_infeasible=opts.allow_infeasible,
            budget=asked_budget(opts),
        ),
        FitDetails(
            own=run.own_threshold,
            adjust=run.adjust,
            carry_to=_carry_to(opts, crossed, run.logits),
            calibrate=run.calibrate,
            calibration=run.calibration,
            held_out_rows=None if crossed is None else int(np.bincount(crossed.folds).min()),
            gain=run.gain,
            gain_values=run.gain_values,
        ),
    )
    searched = settled.operating_point  # --cv always searches the out-of-fold scores
    band = _band(opts, settled)
    if band is not None:
        refusal = settled.refusal or band.refusal  # an unreachable target is said first
        settled = dataclasses.replace(settled, warnings=(*settled.warnings, *band.warnings), refusal=refusal)
    return _Settlement(
        settled=settled,
        band=band,
        threshold=settled.threshold,
        heldout=settled.heldout,
        heldout_scores=settled.heldout_scores,
        fields=problem_fields(problem),
        cv=()
        if crossed is None or searched is None
        else (
            _cv_section(
                crossed, opts, problem, searched.point, oof_threshold=settled.oof_threshold, gains=_cv_gains(run)
            ),
        ),
    )


def _settle_classes(run: FittedRun, opts: TrainOptions) -> _Settlement:
    """A multi-class model: arg-max over the class logits plus the searched class offsets, if any; probabilities
    calibrated. No one threshold, so no held-out curve nor score for the model file."""
    settled = settle_classes(
        run.logits,
        run.truth,
        run.labels.classes,
        run.calibrate,
        problem=run.class_problem,
        confidence=opts.confidence,
        allow_infeasible=opts.allow_infeasible,
    )
    crossed = run.crossed
    return _Settlement(
        settled=settled,
        threshold=None,
        heldout=None,
        heldout_scores=None,
        fields=settled.problem_fields(),
        class_offsets=settled.offsets,
        class_problem=settled.problem,
        cv=()
        if crossed is None
        else (multiclass_cv_report(crossed, run.labels.classes, pooled_val=opts.val is not None),),
    )


def _report(
    run: FittedRun, opts: TrainOptions, settlement: _Settlement, *, data: sources.Source, output: Path | None
) -> dict[str, Any]:
    """The train report, assembled once from the settled operating point's sections and the run's own fields;
    it names no model file on a refusal (none is written)."""
    settled = settlement.settled
    return assemble(
        "train",
        *settled.parts(),
        TrainingRunSection(
            online=run.online, solver_trace=run.solver_trace, fit_seconds=run.fit_seconds, path_fields=run.after_fields
        ),
        *settlement.cv,
        *(() if settlement.band is None else (settlement.band.section,)),
        FiguresSection(figures=_heldout_figures(settlement)),
        solver=run.solver,
        **settlement.fields,
        confidence=opts.confidence,
        seed=opts.seed,
        device=run.device,
        data=sources.describe(data),
        val=str(opts.val) if opts.val else None,
        val_frac=opts.val_frac,
        **label_fields(run.labels),
        architecture=run.architecture.to_dict(),
        params=vars(run.params),
        n_features=run.preprocessor.n_features,
        **run.levels.report(),
        **run.report_fields,
        warnings=[*run.warnings, *settled.warnings, *run.solver_warnings],
        model=None if output is None or settled.refusal is not None else str(output),  # none written on a refusal
    )


def _heldout_figures(settlement: _Settlement) -> HeldOutFigures | None:
    """What the training page draws of the held-out rows (heldout_figures.py), from the curve the model keeps."""
    if settlement.heldout is None:
        return None
    calibration = settlement.settled.calibration
    return HeldOutFigures.of_curve(settlement.heldout, calibration if isinstance(calibration, Calibration) else None)


def _model(run: FittedRun, opts: TrainOptions, settlement: _Settlement, report: dict[str, Any]) -> DmoModel:
    """The model file's content: the fitted network and its decision (the operating point, the held-out curve, the
    info the report summarizes; a multi-class model keeps its class offsets instead of a threshold) and the drift
    profile."""
    return DmoModel(
        network=run.network,
        architecture=run.architecture,
        preprocessor=run.preprocessor,
        labels=run.labels,
        solver=run.solver,
        decision=Decision(
            threshold=settlement.threshold,
            review_threshold=None if settlement.band is None else settlement.band.band.lower,
            problem=run.problem,
            class_offsets=settlement.class_offsets,
            class_problem=settlement.class_problem,
            heldout=settlement.heldout,
            info=training_info(
                opts,
                run.params,
                report=report,
                calibration=settlement.settled.calibration,
                summary=_summary(run, report),
                **run.info_fields,
            )
            | ({} if settlement.band is None else settlement.band.info())
            | ({} if asked_budget(opts) is None else {"alert_budget": asked_budget(opts).info()}),
        ),
        training_rows=run.training_rows,
        profile=_finished_profile(run.profile, settlement.heldout_scores),
    )


def _band(opts: TrainOptions, settled: Settled) -> BandOutcome | None:
    """The review band under the settled threshold on the held-out curve, where --review-budget asks for one (at
    --confidence, as the threshold is certified)."""
    if opts.review_budget is None or settled.heldout is None:
        return None
    return settle_band(
        settled.heldout,
        settled.threshold,
        opts.review_budget,
        confidence=opts.confidence,
        next_rows=certified_rows(opts.new_rows, opts.confidence),
        allow_infeasible=opts.allow_infeasible,
    )


def asked_budget(opts: TrainOptions) -> AlertBudget | None:
    """The alert budget train's options ask for (None: none); its N <= M was checked with the options."""
    return AlertBudget.asked(opts.max_alert_rate, opts.max_alerts, opts.per_rows)


def _carry_to(opts: TrainOptions, crossed: CrossFitted | None, logits: dict[str, np.ndarray]) -> np.ndarray | None:
    """The saved model's own scores of the training rows, where the out-of-fold scores are carried to them by rank
    (--cv-transfer, cross_fit.py); None without folds or where the model's scale is theirs."""
    return logits["train"] if crossed is not None and crossed.carries_by_rank(opts.cv_transfer) else None


def _cv_gains(run: FittedRun) -> RowGains | None:
    """--problem value's gains of the out-of-fold rows, for each fold's own operating point (None without)."""
    if run.gain is None or run.gain_values is None:
        return None
    values = run.gain_values["cv"]
    return run.gain.row_gains({name: values[:, i] for i, name in enumerate(run.gain.columns)}, values.shape[0])


def _cv_section(
    crossed: CrossFitted,
    opts: TrainOptions,
    problem: Problem,
    point: OperatingPoint,
    *,
    oof_threshold: float | None,
    gains: RowGains | None = None,
) -> BinaryCvSection:
    """The report's `cv` section of a binary model: each fold's own operating point on its out-of-fold scores, and
    the pooled out-of-fold `point` carried to the saved model."""
    return BinaryCvSection(
        folds=cv_report(crossed, problem, opts.confidence, point.new_rows, gains=gains),
        transfer=opts.cv_transfer,
        pooled_val=opts.val is not None,
        oof_threshold=point.threshold if oof_threshold is None else oof_threshold,
    )


SUMMARY_METRICS = ("precision", "recall", "f_beta")


def _summary(run: FittedRun, report: dict[str, Any]) -> dict[str, Any] | None:
    """The model file's summary: the splits' (None: training_info's default), led by a streaming solver's online
    figures where it has them."""
    if run.online is None:
        return None
    return {
        "online": {name: run.online[name] for name in SUMMARY_METRICS},
        **{split: {name: values[name] for name in SUMMARY_METRICS} for split, values in report["splits"].items()},
    }


def _finished_profile(profile: ProfileBuilder, heldout_scores: np.ndarray | None) -> Profile:
    """The model file's drift profile: the training rows' features counted into `profile`, and the score (logit)
    of the held-out rows its threshold was searched on. No score where there is no such one logit: a multi-class
    model (one logit per class: its features' drift is what `dmo monitor` compares), a threshold moved from the
    folds by rank (their out-of-fold scores are not on the saved model's scale), or no threshold search."""
    if heldout_scores is not None:
        profile.add_scores(heldout_scores)
    return profile.finish()
