"""The last step of every train and threshold path: the report stamped, the model file written, then the report;
or, for a refused target, the report alone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dmocli.data import outputs
from dmocli.errors import UnreachableTarget
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.calibration import Calibration
from dmocli.options import POPULATION, TrainOptions
from dmocli.report import dumps, envelope, failure, label_fields, model_summary


def training_info(
    opts: TrainOptions,
    params: Any,
    *,
    report: dict[str, Any],
    calibration: Calibration | None,
    summary: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The model file's `info`: how it was trained, the summary of its report's splits, its probability map, and
    the new sample its --confidence certificate is about (absent: the population value), for `dmo threshold`,
    and whether that certificate was met (False: the closest threshold kept by --allow-infeasible). `summary`
    replaces the splits' summary where a solver keeps its own (the streaming solvers' online figures)."""
    sample = report.get("operating_point", {}).get("new_rows")
    if "operating_point" not in report and opts.confidence is not None and opts.new_rows != POPULATION:
        sample = opts.new_rows  # no search ran (--no-adjust): the size asked, for `dmo threshold` to certify
    certified = report.get("feasible") if opts.confidence is not None and "operating_point" in report else None
    return {
        "seed": opts.seed,
        "confidence": opts.confidence,
        **({"new_rows": sample} if sample is not None else {}),
        **({"certified": certified} if certified is not None else {}),  # False: kept by --allow-infeasible
        "params": vars(params),
        **extra,
        "summary": model_summary(report.get("splits", {})) if summary is None else summary,
        **({"calibration": calibration.to_dict()} if calibration is not None else {}),
    }


def finish(
    model: DmoModel, report: dict[str, Any], *, output: Path | None, report_path: str | Path | None, started: float
) -> tuple[DmoModel, dict[str, Any]]:
    """Last step of every train path: stamp the wall time, write the model (unless output is None), then the report."""
    report["wall_seconds"] = time.perf_counter() - started
    report["model"] = None if output is None else str(output)
    text = dumps(report)  # first: a report that cannot be written must not leave a model behind
    if output is not None:
        model.save(output)
    if report_path is not None:
        outputs.write_text(report_path, text)
    return model, report


def refuse_with_report(
    refusal: UnreachableTarget, report: dict[str, Any], report_path: str | Path | None, started: float
) -> None:
    """An unreachable target ends the run with exit 3 and no model file, but with the full report: written to
    --report, and carried by the error for --json to print, so a script can read why (`feasible: false`,
    `best_achievable`, the intervals)."""
    report["wall_seconds"] = time.perf_counter() - started
    report.setdefault("model", None)  # train's model file, not written; threshold's `model` is its input, kept
    report.update(failure(refusal.exit_code, "unreachable", str(refusal)))  # the --report file says why, as --json
    if report_path is not None:
        outputs.write_text(report_path, dumps(report))
    refusal.report = report
    raise refusal


def threshold_envelope(
    model: DmoModel,
    model_path: str | Path,
    *,
    data: str,
    engine: str,
    output: str | Path,
    problem_fields: dict[str, Any],
    problem_source: str,
    confidence: float | None,
    **fields: Any,
) -> dict[str, Any]:
    """The report of `dmo threshold`, whichever way it moved the operating point (a binary threshold refitted,
    adapted to a new positive rate, or a multi-class model's offsets): the keys all of them carry, built here once,
    then `fields` in the caller's order."""
    return envelope(
        "threshold",
        model=str(model_path),
        data=data,
        engine=engine,
        output=str(output),
        solver=model.solver,
        **label_fields(model.labels),
        **problem_fields,
        problem_source=problem_source,
        confidence=confidence,
        seed=model.info.get("seed"),
        device="cpu",
        **fields,
    )


def finish_threshold(
    model: DmoModel,
    report: dict[str, Any],
    *,
    output: str | Path,
    report_path: str | Path | None,
    started: float,
    refusal: UnreachableTarget | None,
) -> dict[str, Any]:
    """Last step of every `dmo threshold` path: a refusal ends with its report (exit 3, no model written); else the
    report is stamped and serialized first (one that cannot be written must not leave a model behind), then the
    model file and the report are written."""
    if refusal is not None:
        refuse_with_report(refusal, report, report_path, started)
    report["wall_seconds"] = time.perf_counter() - started
    text = dumps(report)
    model.save(output)
    if report_path is not None:
        outputs.write_text(report_path, text)
    return report
