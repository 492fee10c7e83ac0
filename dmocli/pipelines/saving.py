"""The last step of every train and threshold path: the report stamped, the model file written, then the report;
or, for a refused target, the report alone. And what the model file's `info` says of how its operating point was
set: by training (`training_info`) or moved by `dmo threshold` (`retargeted_info`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dmocli.data import outputs
from dmocli.errors import UnreachableTarget
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.multiclass_calibration import MulticlassCalibration
from dmocli.options import POPULATION, TrainOptions
from dmocli.pipelines.report_parts import ReportPart, assemble
from dmocli.report import dumps, failure, label_fields, model_summary, written_now


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


def retargeted_info(
    info: Mapping[str, Any],
    *,
    confidence: float | None,
    new_rows: int | None,
    certified: bool | None,
    fitted_on: str,
    splits: dict[str, dict[str, Any]],
    calibration: Calibration | MulticlassCalibration | None,
    calibration_refitted: bool,
) -> dict[str, Any]:
    """The model file's `info` after `dmo threshold` moved its operating point (a binary threshold or a multi-class
    model's offsets), for both: training's entries kept, the certificate's replaced by the new search's
    (`confidence`; `new_rows`, absent for the population value; `certified`, present with a confidence), where it
    was fitted, the summary of the splits at the new decision (the training figures were at the old one), and the
    probability map. With `calibration_refitted` the map was fitted anew on DATA (a multi-class model's) and the
    stored one is dropped even where none could be fitted; otherwise `calibration` (refitted, or the stored one
    kept) takes the stored one's place. A `--model auto` file's `model_selection` is dropped: the kind was chosen
    (and certified) for the training operating point, not for this one."""
    replaced = ("new_rows", "certified", "model_selection") + (("calibration",) if calibration_refitted else ())
    return {
        **{key: value for key, value in info.items() if key not in replaced},
        "confidence": confidence,
        **({"new_rows": new_rows} if new_rows is not None else {}),
        **({"certified": certified} if confidence is not None else {}),
        "threshold_fitted_on": fitted_on,
        "summary": model_summary(splits),
        **({"calibration": calibration.to_dict()} if calibration is not None else {}),
    }


def stamp(report: dict[str, Any], started: float) -> dict[str, Any]:
    """The one key written into an assembled report: `wall_seconds`, the run's time up to this point, which only
    exists once everything else is done, so it cannot be one of the parts the report is assembled from."""
    report["wall_seconds"] = time.perf_counter() - started
    return report


def finish(
    model: DmoModel, report: dict[str, Any], *, output: Path | None, report_path: str | Path | None, started: float
) -> tuple[DmoModel, dict[str, Any]]:
    """Last step of every train path: stamp the wall time, write the model (unless output is None), then the report,
    which then names the model file by the sha256 of its bytes and when it was written (UTC): the training page's
    header, drawn from the report alone."""
    text = dumps(stamp(report, started))  # first: a report that cannot be written must not leave a model behind
    if output is not None:
        report["model_sha256"] = model.save(output)
        report["written_at"] = written_now()
        text = dumps(report)
    if report_path is not None:
        outputs.write_text(report_path, text)
    return model, report


def refuse_with_report(
    refusal: UnreachableTarget, report: dict[str, Any], report_path: str | Path | None, started: float
) -> None:
    """An unreachable target ends the run with exit 3 and no model file, but with the full report and why (the
    `error` keys): written to --report, and carried by the error for --json to print, so a script can read why
    (`feasible: false`, `best_achievable`, the intervals). The report must name its `model`: train's null (none
    written), the others' their input."""
    refused = stamp({**report, **failure(refusal.exit_code, "unreachable", str(refusal))}, started)
    if report_path is not None:
        outputs.write_text(report_path, dumps(refused))
    refusal.report = refused
    raise refusal


def threshold_envelope(
    model: DmoModel,
    model_path: str | Path,
    *parts: ReportPart,
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
    then `fields` in the caller's order, then the `parts`."""
    return assemble(
        "threshold",
        *parts,
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
    text = dumps(stamp(report, started))
    model.save(output)
    if report_path is not None:
        outputs.write_text(report_path, text)
    return report
