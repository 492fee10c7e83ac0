"""The last step of every train path: the report stamped, the model file written, then the report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmocli.data import outputs
from dmocli.models.modelfile import DmoModel
from dmocli.report import dumps

if TYPE_CHECKING:  # torch loads with the in-memory path only; the numpy streaming solvers start without it
    pass


def finish(
    model: DmoModel, report: dict[str, Any], output: Path | None, report_path: str | Path | None, started: float
) -> tuple[DmoModel, dict[str, Any]]:
    """Last step of every train path: stamp the wall time, write the model (unless output is None), then the report."""
    report["wall_seconds"] = time.perf_counter() - started
    report["model_path"] = None if output is None else str(output)
    text = dumps(report)  # first: a report that cannot be written must not leave a model behind
    if output is not None:
        model.save(output)
    if report_path is not None:
        outputs.write_text(report_path, text)
    return model, report
