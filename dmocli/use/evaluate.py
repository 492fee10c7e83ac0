"""`dmo evaluate`: a saved model's metrics on labeled rows at its stored operating point, and the gate's verdict.

It streams DATA in record batches and keeps one logit and one label per row (what exact metrics need), so it
reads DATA once, and DATA may be `-`: a CSV on standard input.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dmocli.command_options import EvaluateOptions
from dmocli.data import outputs, sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError, UnreachableTarget
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.operating_point.gate import gate_line, judge_gate
from dmocli.options import check_given
from dmocli.pipelines.saving import refuse_with_report, stamp
from dmocli.pipelines.scoring import collect_logits
from dmocli.pipelines.thresholding import problem_fields, split_reports
from dmocli.prep.columns import refuse_problems
from dmocli.prep.drift import DEFAULT_MAX_UNSEEN, check_max_unseen, drift_problems, drift_warnings
from dmocli.prep.features import LevelCounts
from dmocli.prep.row_fingerprint import TrainingRowsFound, training_rows_warnings
from dmocli.report import (
    empty_prediction_warnings,
    envelope,
    label_fields,
    multiclass_split_report,
    plot_pr_curve,
    unlabeled_warning,
    write_report,
)
from dmocli.use.model_input import ModelLike, model_name, opened


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
) -> dict[str, Any]:
    """The model's metrics on labeled `data` at its stored threshold. Drift (unseen levels, emptied columns) is
    warned about; `strict` refuses it above `max_unseen` before anything is written. `gate` (or a
    `gate_confidence`, which implies it) raises UnreachableTarget, with the report, when the rows show the model's
    target missed (dmocli/operating_point/gate.py), so a CI job fails on a model that no longer holds its target.
    Rows the model was trained on (its fingerprint, prep/row_fingerprint.py) are warned about with their share, and
    refused under the gate unless `allow_train_rows`: its figures there are optimistic."""
    started = time.perf_counter()
    data = sources.accept(data)  # the Python API may pass a pandas DataFrame
    check_max_unseen(max_unseen)
    check_given(EvaluateOptions, gate_confidence=gate_confidence)  # as `dmo evaluate --gate-confidence` is
    model, model_path = opened(model_path)
    outputs.check_outputs({"--report": report_path, "--plot": plot_path}, {"MODEL": model_path, "DATA": data})
    model = model or load_model(model_path)
    logits, y, levels, unlabeled, hashes = collect_logits(model, data, engine, hashed=model.training_rows is not None)
    seen = TrainingRowsFound.of(model.training_rows, hashes)
    gated = (gate or gate_confidence is not None) and not allow_train_rows
    training_rows_warnings(seen, sources.describe(data), gated=gated)  # refused here under the gate
    scored = _Scored(logits=logits, y=y, levels=levels, unlabeled=unlabeled, training_rows=seen)
    if strict:
        refuse_problems(drift_problems(levels, scored.n_rows, max_unseen))
    split = _split_at_stored_point(model, scored)
    _plot_if_asked(model, scored, split=split, plot_path=plot_path, data=data)
    described = sources.describe(data)
    # The gate's verdict is part of the report; a model with no target to check says so in a warning, and a miss
    # ends the run as a refused target does (exit 3, the full report written and carried by the error).
    asked = gate or gate_confidence is not None
    verdict = judge_gate(split, model.problem, gate_confidence, class_problem=model.class_problem) if asked else None
    report = _evaluation_report(
        model, scored, split=split, verdict=verdict, model_path=model_path, data=data, engine=engine
    )
    if verdict is not None and verdict["passed"] is False:
        refuse_with_report(UnreachableTarget(gate_line(verdict, described)), report, report_path, started)
    stamp(report, started)
    if report_path is not None:
        write_report(report_path, report)
    return report


@dataclass(frozen=True, kw_only=True)
class _Scored:
    """What one pass over labeled DATA keeps: a logit and a label per labeled row, the categorical levels it
    counted, and how many rows had no label (counted, not scored)."""

    logits: np.ndarray
    y: np.ndarray
    levels: LevelCounts
    unlabeled: int
    training_rows: TrainingRowsFound | None = None  # the share of DATA the model was trained on, where it can tell

    @property
    def n_rows(self) -> int:
        """Every row of DATA, labeled or not: the base the drift shares are taken of."""
        return len(self.y) + self.unlabeled


def _split_at_stored_point(model: DmoModel, scored: _Scored) -> dict[str, Any]:
    """The metrics at the model's own operating point: its threshold, or a multi-class model's class offsets
    (the splits there, as training reported them)."""
    split = split_reports(
        {"data": scored.logits},
        {"data": scored.y},
        model.threshold,
        problem=model.problem,
        classes=model.labels.classes,
        calibration=model.calibration,
    )["data"]
    if model.class_offsets is not None:  # a multi-class operating point: the splits at its offsets
        split = multiclass_split_report(
            scored.logits, scored.y, model.labels.classes, calibration=model.calibration, offsets=model.class_offsets
        )
    return split


def _plot_if_asked(
    model: DmoModel, scored: _Scored, *, split: dict[str, Any], plot_path: str | Path | None, data: sources.Source
) -> None:
    """--plot: the precision-recall curve with the model's point on it; refused (one line) where there is no such
    curve to draw: no positive rows, or a multi-class model."""
    if plot_path is None:
        return
    if not model.binary:
        raise DmoError("--plot draws a binary precision-recall curve; this model is multi-class")
    if split["n_pos"] == 0:
        raise DmoError(f"{data} has no positive rows; a precision-recall plot needs some")
    plot_pr_curve(
        plot_path,
        scored.logits,
        scored.y,
        threshold=model.threshold,
        problem=model.problem,
        title=f"{Path(sources.describe(data)).name}: {model.problem.describe() if model.problem else ''}",
    )


def _evaluation_report(
    model: DmoModel,
    scored: _Scored,
    *,
    split: dict[str, Any],
    verdict: dict[str, Any] | None,
    model_path: str | Path,
    data: sources.Source,
    engine: EngineChoice,
) -> dict[str, Any]:
    """The evaluate report: the model's own fields, DATA's levels and drift warnings, the split and the gate's
    verdict (with a warning where the model has no target for the gate to check)."""
    described = sources.describe(data)
    unchecked = [gate_line(verdict, described)] if verdict is not None and verdict["passed"] is None else []
    return envelope(
        "evaluate",
        model=model_name(model_path),
        data=described,
        engine=engine.name,
        solver=model.solver,
        **label_fields(model.labels),
        **problem_fields(model.problem),
        confidence=model.info.get("confidence"),
        seed=model.info.get("seed"),
        device="cpu",
        **scored.levels.report(),
        threshold=model.threshold,
        unlabeled_rows=scored.unlabeled,
        warnings=drift_warnings(scored.levels, scored.n_rows, model.preprocessor.impute)
        + unlabeled_warning(scored.unlabeled, data)
        + empty_prediction_warnings({"data": split})
        + training_rows_warnings(scored.training_rows, described, gated=False)
        + unchecked,
        training_rows=None if scored.training_rows is None else scored.training_rows.to_dict(),
        splits={"data": split},
        **({"gate": verdict} if verdict is not None else {}),
    )
