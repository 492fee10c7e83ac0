"""`dmo report INPUT...`: what each input is, and the page it makes.

- a train report JSON: the training page, from the report alone (pages/training.py);
- an evaluate report JSON: the evaluation page (pages/evaluation.py);
- one or more monitor report JSONs, in time order, or one monitoring history (.parquet): the monitoring page
  (pages/monitoring.py's monitoring_input, which refuses reports of different model files);
- anything else is read as a model file: the training page from what the file keeps (its held-out curve, its
  importance), headed by the sha256 of its bytes; it says the file keeps no date (model files are byte-reproducible
  on purpose) rather than read the file's modification time, which a copy or a checkout changes.

A report of another command, a truncated or non-JSON file, a file that is no model: one line naming the input and
what `dmo report` takes (DmoError, exit 2), before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dmocli.errors import DmoError
from dmocli.models.modelfile import file_sha256, load_model
from dmocli.pages.evaluation import evaluation_page
from dmocli.pages.monitoring import monitoring_input, monitoring_page, of_reports
from dmocli.pages.training import training_page

TAKES = "train, evaluate or monitor report JSONs, a model file or a monitoring history (.parquet)"


def page_for(paths: Sequence[str | Path]) -> str:
    """The page of INPUT... (the module docstring says which)."""
    inputs = [Path(path) for path in paths]
    if not inputs:
        raise DmoError(f"dmo report needs an input: {TAKES}")
    missing = [str(path) for path in inputs if not path.exists()]
    if missing:
        raise DmoError(f"no such file: {', '.join(missing)}; give {TAKES}")
    if len(inputs) > 1 or inputs[0].suffix.lower() == ".parquet":
        return monitoring_page(monitoring_input(inputs))
    path = inputs[0]
    if path.suffix.lower() == ".json":
        return _report_page(read_report(path), source=str(path))
    return _model_page(path)


def report_page(report: Mapping[str, Any]) -> str:
    """The page of the report a train, evaluate or monitor run writes (`--html`), drawn from the report as written
    to JSON and read back, so that `dmo report` on that JSON gives the same bytes."""
    from dmocli.report import dumps

    return _report_page(json.loads(dumps(report)), source=f"the report of dmo {report['command']}")


def read_report(path: Path) -> Mapping[str, Any]:
    """A dmo report read whole: a file that is not JSON, or is cut short, or is JSON but no dmo report, refused."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DmoError(f"{path} cannot be read as text ({exc.__class__.__name__}); give {TAKES}") from None
    except json.JSONDecodeError as exc:
        raise DmoError(
            f"{path} is not complete JSON ({exc.msg} at line {exc.lineno}); give the whole report a dmo command wrote"
        ) from None
    if not isinstance(report, dict) or not isinstance(report.get("command"), str):
        raise DmoError(f"{path} is JSON but not a dmo report (no `command`); give {TAKES}")
    return report


def _report_page(report: Mapping[str, Any], *, source: str) -> str:
    command = report["command"]
    if command == "train":
        return training_page(report, None, model_sha256=None)
    if command == "evaluate":
        return evaluation_page(report)
    if command == "monitor":
        return monitoring_page(of_reports([report]))
    raise DmoError(f"{source} is the report of dmo {command}, which has no page; give {TAKES}")


def _model_page(path: Path) -> str:
    try:
        model = load_model(path)
    except DmoError as exc:  # a table or another file given by mistake: say what a page is made from
        if type(exc) is not DmoError:
            raise
        raise DmoError(f"{exc}; dmo report takes {TAKES}") from None
    return training_page({"model": str(path)}, model, model_sha256=file_sha256(path))
