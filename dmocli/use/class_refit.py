"""`dmo threshold` of a multi-class model: its class offsets searched again on labeled DATA. After-training work, so
it lives here, beside the binary re-fit (use/apply.py); the search and the report parts it shares with training
are pipelines/multiclass.py's `settle_classes`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dmocli.data import sources
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.problems import Problem
from dmocli.pipelines.multiclass import settle_classes
from dmocli.pipelines.saving import finish_threshold, retargeted_info, threshold_envelope
from dmocli.scoring.accumulators import labeled_scores
from dmocli.use.recertify import noted, recertified, report_fields, with_way_out
from dmocli.use.results.threshold import ClassRefitResult


def refit_class_offsets(
    model: DmoModel,
    *,
    model_path: str | Path,
    data: sources.Source | None,
    problem: Problem | None,
    output: str | Path,
    confidence: float | None,
    no_confidence: bool = False,
    allow_infeasible: bool,
    report_path: str | Path | None,
    engine: EngineChoice,
    started: float,
) -> ClassRefitResult:
    """The class offsets searched again on DATA's logits, for `problem` (every class's floor its target) or, without
    one, the class problem MODEL stores; certified at `confidence`, else at MODEL's own unless `no_confidence`
    (use/recertify.py); the probability map refitted on the same rows, written as a new model (`model` is left as
    it was). A multi-class model keeps no held-out logits, so DATA is needed."""
    if data is None:
        raise DmoError(
            "a multi-class model keeps no held-out logits to re-search its class offsets on; give a labeled DATA "
            "of rows it was not trained on"
        )
    wanted, source = _class_problem(model, problem)
    recertify = recertified(
        model.decision.certificate, confidence, no_confidence=no_confidence, bounded=wanted.kind != "ofbs"
    )
    confidence = recertify.confidence
    logits, y, _, unlabeled, _ = labeled_scores(model, data, engine)
    fitted_on = sources.describe(data)
    settled = settle_classes(
        {"data": logits},
        {"data": y},
        model.labels.classes,
        problem=wanted,
        confidence=confidence,
        allow_infeasible=allow_infeasible,
    )
    previous = None if model.class_offsets is None else [float(b) for b in model.class_offsets]
    info = retargeted_info(
        model.info,
        confidence=confidence,
        new_rows=None,  # a multi-class certificate is of the population values
        certified=None if settled.operating_point is None else settled.operating_point.point.feasible,
        fitted_on=fitted_on,
        splits=settled.splits.splits,
        calibration=settled.calibration,
        calibration_refitted=True,
    )
    refitted = model.with_decision(
        dataclasses.replace(
            model.decision, class_offsets=settled.offsets, class_problem=wanted, info=noted(info, recertify.dropped)
        )
    )
    report = threshold_envelope(
        refitted,
        model_path,
        *settled.parts(),
        data=fitted_on,
        engine=engine.name,
        output=output,
        problem_fields=settled.problem_fields(),
        problem_source=source,
        confidence=confidence,
        **report_fields(recertify),
        previous_threshold=None,  # a multi-class model moves its class offsets, not a threshold
        previous_offsets=previous,
        unlabeled_rows=unlabeled,
        warnings=settled.warnings,
    )
    refusal = with_way_out(settled.refusal, recertify)
    written = finish_threshold(
        refitted, report, output=output, report_path=report_path, started=started, refusal=refusal
    )
    return ClassRefitResult.of(written)


def _class_problem(model: DmoModel, problem: Problem | None) -> tuple[ClassProblem, str]:
    """The class problem to search and where it came from: `problem` as every class's floor (option), or the one
    MODEL stores (model); an arg-max model stores none, so it needs one given."""
    if problem is not None:
        classes = model.labels.classes
        floors = [problem.target] * len(classes) if problem.kind != "ofbs" else [None] * len(classes)
        return ClassProblem(problem.kind, tuple(floors), problem.beta), "option"
    if model.class_problem is None:
        raise DmoError(
            "this multi-class model decides by the arg-max (no class problem stored); give --problem "
            "fpor|frop|ofbs (and --target A) for the operating point to search"
        )
    return model.class_problem, "model"
