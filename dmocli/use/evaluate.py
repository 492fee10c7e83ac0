"""`dmo evaluate`: a saved model's metrics on labeled rows at its stored operating point, and the gate's verdict.

It streams DATA in record batches and keeps one logit and one label per row (what exact metrics need), so it
reads DATA once, and DATA may be `-`: a CSV on standard input.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dmocli.command_options import EvaluateOptions
from dmocli.data import outputs, sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel, file_sha256, load_model
from dmocli.operating_point.alert_budget import AlertBudget
from dmocli.operating_point.gain import VALUE_LEVEL, GainMatrix
from dmocli.options import check_given
from dmocli.pipelines.saving import refuse_with_report
from dmocli.pipelines.value_report import default_cut
from dmocli.prep.columns import refuse_problems
from dmocli.prep.drift import DEFAULT_MAX_UNSEEN, check_max_unseen, drift_problems, drift_warnings
from dmocli.prep.features import LevelCounts
from dmocli.prep.row_fingerprint import TrainingRowsFound, training_rows_warnings
from dmocli.report import (
    BinarySplit,
    MulticlassSplit,
    binary_split,
    empty_prediction_warnings,
    multiclass_split,
    plot_pr_curve,
    unlabeled_warning,
    write_report,
    written_now,
)
from dmocli.report_figures import ScoreFigures
from dmocli.scoring.accumulators import LabeledColumns, labeled_scores
from dmocli.use.history import record_evaluate
from dmocli.use.model_input import ModelLike, model_name, opened
from dmocli.use.results.band import RealizedBand
from dmocli.use.results.common import Envelope, LabelFields, LevelFields, ProblemFields
from dmocli.use.results.evaluation import DecisionValue, EvaluateResult, GateFailed, RealizedValue
from dmocli.use.verdicts import Gate, gate_line, judge_class_gate, judge_with_budget


def evaluate(
    model_path: str | Path | ModelLike,
    data: sources.Source,
    report_path: str | Path | None = None,
    plot_path: str | Path | None = None,
    *,
    engine: EngineChoice = LOCAL,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    gate: bool = False,
    gate_confidence: float | None = None,
    allow_train_rows: bool = False,
    time_col: str | None = None,
    every: str | None = None,
    history: str | Path | None = None,
) -> dict[str, Any]:
    """`dmocli.evaluate`: the report of `evaluation` as the dict scripts index (`report["splits"]["data"]`), pass to
    json.dump and check with isinstance(report, dict). The typed EvaluateResult is not made a Mapping in its place:
    json.dump and isinstance(..., dict) refuse a Mapping that is not a dict, so every such script would break."""
    return evaluation(
        model_path,
        data,
        report_path,
        plot_path,
        engine=engine,
        strict=strict,
        max_unseen=max_unseen,
        gate=gate,
        gate_confidence=gate_confidence,
        allow_train_rows=allow_train_rows,
        time_col=time_col,
        every=every,
        history=history,
    ).to_dict()


def evaluation(
    model_path: str | Path | ModelLike,
    data: sources.Source,
    report_path: str | Path | None = None,
    plot_path: str | Path | None = None,
    *,
    engine: EngineChoice = LOCAL,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    gate: bool = False,
    gate_confidence: float | None = None,
    allow_train_rows: bool = False,
    time_col: str | None = None,
    every: str | None = None,
    history: str | Path | None = None,
) -> EvaluateResult:
    """The model's metrics on labeled `data` at its stored threshold. Drift (unseen levels, emptied columns) is
    warned about; `strict` refuses it above `max_unseen` before anything is written. `gate` (or a
    `gate_confidence`, which implies it) raises GateFailed (an UnreachableTarget), with the report, when the rows
    show the model's target missed (dmocli/use/verdicts.py), so a CI job fails on a model that no longer
    holds its target. Rows the model was trained on (its fingerprint, prep/row_fingerprint.py) are warned about with
    their share, and refused under the gate unless `allow_train_rows`: its figures there are optimistic. `history`
    records the realized metrics in the model's history (use/history.py), per `time_col`/`every` period or as one."""
    started = time.perf_counter()
    data = sources.accept(data)  # the Python API may pass a pandas DataFrame
    check_max_unseen(max_unseen)
    # as `dmo evaluate --gate-confidence`, --every and --history are
    check_given(EvaluateOptions, gate_confidence=gate_confidence, time_col=time_col, every=every, history=history)
    model, model_path = opened(model_path)
    outputs.check_outputs(
        {"--report": report_path, "--plot": plot_path, "--history": history}, {"MODEL": model_path, "DATA": data}
    )
    model = model or load_model(model_path)
    gain = _gain(model)
    kept = LabeledColumns(gain.columns) if gain is not None else None
    hashed = model.training_rows is not None
    logits, y, levels, unlabeled, hashes = labeled_scores(model, data, engine, hashed=hashed, kept=kept)
    seen = TrainingRowsFound.of(model.training_rows, hashes)
    gated = (gate or gate_confidence is not None) and not allow_train_rows
    training_rows_warnings(seen, sources.describe(data), gated=gated)  # refused here under the gate
    amounts = None if kept is None else kept.result()
    scored = _Scored(logits=logits, y=y, levels=levels, unlabeled=unlabeled, training_rows=seen, amounts=amounts)
    if strict:
        refuse_problems(drift_problems(levels, scored.n_rows, max_unseen))
    split = _split_at_stored_point(model, scored)
    _plot_if_asked(model, scored, split=split, plot_path=plot_path, data=data)
    # The gate's verdict is part of the report; a model with no target to check says so in a warning, and a miss
    # ends the run as a refused target does (exit 3, the full report written and carried by the error).
    verdict = _judge(model, split, gate_confidence) if gate or gate_confidence is not None else None
    result = _evaluation_result(
        model, scored, split=split, verdict=verdict, model_path=model_path, data=data, engine=engine
    )
    if history is not None:
        scores = (scored.logits, scored.y)
        value = None if result.value is None else result.value.at_threshold.per_row
        record_evaluate(
            history,
            model,
            model_path,
            scores,
            data=data,
            time_col=time_col,
            every=every,
            engine=engine,
            value=value,
            sha256=result.model_sha256,
        )
    result = replace(result, written_at=written_now())  # a refused gate's report is written too
    if verdict is not None and verdict.passed is False:
        refuse_with_report(GateFailed(result), result.to_dict(), report_path, started)
    result = replace(result, wall_seconds=time.perf_counter() - started)  # the run's time, once all else is done
    if report_path is not None:
        write_report(report_path, result.to_dict())
    return result


@dataclass(frozen=True, kw_only=True)
class _Scored:
    """What one pass over labeled DATA keeps: a logit and a label per labeled row, the categorical levels it
    counted, and how many rows had no label (counted, not scored)."""

    logits: np.ndarray
    y: np.ndarray
    levels: LevelCounts
    unlabeled: int
    training_rows: TrainingRowsFound | None = None  # the share of DATA the model was trained on, where it can tell
    amounts: dict[str, np.ndarray] | None = None  # a model with a gain matrix: the labeled rows' columns it reads

    @property
    def n_rows(self) -> int:
        """Every row of DATA, labeled or not: the base the drift shares are taken of."""
        return len(self.y) + self.unlabeled


def _split_at_stored_point(model: DmoModel, scored: _Scored) -> BinarySplit | MulticlassSplit:
    """The metrics at the model's own operating point: its threshold, or a multi-class model's class offsets (the
    splits there, as training reported them), or its arg-max."""
    if model.class_offsets is not None or model.problem is None:
        return multiclass_split(
            scored.logits, scored.y, model.labels.classes, calibration=model.calibration, offsets=model.class_offsets
        )
    return binary_split(
        scored.logits, scored.y, threshold=model.threshold, problem=model.problem, calibration=model.calibration
    )


def _judge(model: DmoModel, split: BinarySplit | MulticlassSplit, confidence: float | None) -> Gate:
    """The gate on DATA's split: a binary model's target, or a multi-class model's class floors."""
    if isinstance(split, MulticlassSplit):
        return judge_class_gate(split, model.class_problem, confidence)
    return judge_with_budget(split, model.problem, confidence, _budget_share(model))


def _budget_share(model: DmoModel) -> float | None:
    """The share of rows a model kept within an alert budget may flag (None: no budget)."""
    try:
        budget = AlertBudget.from_info(model.info.get("alert_budget"))
    except ValueError as exc:  # load checks what it can; a budget that does not read is the file's fault
        raise DmoError(f"the model file's alert budget cannot be read ({exc}); retrain it") from exc
    return None if budget is None else budget.share


def _plot_if_asked(
    model: DmoModel,
    scored: _Scored,
    *,
    split: BinarySplit | MulticlassSplit,
    plot_path: str | Path | None,
    data: sources.Source,
) -> None:
    """--plot: the precision-recall curve with the model's point on it; refused (one line) where there is no such
    curve to draw: no positive rows, or a multi-class model."""
    if plot_path is None:
        return
    if not isinstance(split, BinarySplit):
        raise DmoError("--plot draws a binary precision-recall curve; this model is multi-class")
    if split.n_pos == 0:
        raise DmoError(f"{data} has no positive rows; a precision-recall plot needs some")
    plot_pr_curve(
        plot_path,
        scored.logits,
        scored.y,
        threshold=model.threshold,
        problem=model.problem,
        title=f"{Path(sources.describe(data)).name}: {model.problem.describe() if model.problem else ''}",
    )


def _evaluation_result(
    model: DmoModel,
    scored: _Scored,
    *,
    split: BinarySplit | MulticlassSplit,
    verdict: Gate | None,
    model_path: str | Path,
    data: sources.Source,
    engine: EngineChoice,
) -> EvaluateResult:
    """The evaluate result: the model's own fields, DATA's levels and drift warnings, the split and the gate's
    verdict (with a warning where the model has no target for the gate to check)."""
    described = sources.describe(data)
    value, value_warnings = _realized_value(model, scored, described)
    unchecked = [_unchecked_line(verdict, described, value)] if verdict is not None and verdict.passed is None else []
    binary = isinstance(split, BinarySplit)  # the figures' data: a binary split's curve, reliability, histogram
    return EvaluateResult(
        envelope=Envelope.of("evaluate"),
        model=model_name(model_path),
        model_sha256=None if model_path is None else file_sha256(model_path),
        data=described,
        engine=engine.name,
        solver=model.solver,
        labels=LabelFields.of(model.labels),
        problem=ProblemFields.of(model.problem),
        confidence=model.info.get("confidence"),
        seed=model.info.get("seed"),
        device="cpu",
        levels=LevelFields.of(scored.levels),
        threshold=model.threshold,
        unlabeled_rows=scored.unlabeled,
        warnings=drift_warnings(scored.levels, scored.n_rows, model.preprocessor.impute)
        + unlabeled_warning(scored.unlabeled, data)
        + empty_prediction_warnings({"data": split.to_dict()})
        + training_rows_warnings(scored.training_rows, described, gated=False)
        + unchecked
        + value_warnings,
        training_rows=scored.training_rows,
        splits={"data": split},
        figures=ScoreFigures.of(scored.logits, scored.y, model.calibration) if binary else None,
        gate=verdict,
        value=value,
        review_band=RealizedBand.of(model, scored.logits, scored.y),
    )


def _unchecked_line(verdict: Gate, described: str, value: RealizedValue | None) -> str:
    """The gate's line where it checked nothing; a value model's says what it reports instead: the value realized."""
    line = gate_line(verdict, described)
    if value is None:
        return line
    at = value.at_threshold
    return f"{line}; the value it realizes under its gain matrix: {at.per_row:.4g} per row (total {at.total:.6g})"


def _gain(model: DmoModel) -> GainMatrix | None:
    """The gain matrix a binary model's threshold maximized (`--problem value`), kept with its held-out curve; None
    for any other model."""
    return None if model.threshold is None or model.heldout is None else model.heldout.gain


def _realized_value(model: DmoModel, scored: _Scored, described: str) -> tuple[RealizedValue | None, list[str]]:
    """The value DATA's labeled rows realize under the model's gain matrix, at its threshold, at the default cut
    (calibrated probability 0.5, as training reports it) and flagging nothing; none for a model without one (the
    report keeps no `value` key), and a warning instead where DATA lacks a column the matrix reads (its labels alone
    cannot say what a row is worth)."""
    gain = _gain(model)
    if gain is None:
        return None, []
    missing = [name for name in gain.columns if name not in (scored.amounts or {})]
    if missing:
        names = ", ".join(f"'{name}'" for name in missing)
        return None, [f"{described} has no column {names} the gain matrix reads: no realized value; add it to DATA"]
    gains = gain.row_gains(scored.amounts or {}, scored.y.size)
    at = scored.logits >= model.threshold
    (default, rule), nothing = default_cut(scored.logits, model.calibration), np.zeros(scored.y.size, dtype=bool)
    at_threshold = DecisionValue.of(gains.realized(scored.y, at), at)
    at_default_cut = DecisionValue.of(gains.realized(scored.y, default), default, rule)
    flag_nothing = DecisionValue.of(gains.realized(scored.y, nothing), nothing)
    return RealizedValue(
        gain=gain.text,
        rows=int(scored.y.size),
        level=VALUE_LEVEL,
        at_threshold=at_threshold,
        at_default_cut=at_default_cut,
        flag_nothing=flag_nothing,
        over_default_cut=at_threshold.total - at_default_cut.total,
        over_flag_nothing=at_threshold.total - flag_nothing.total,
    ), []
