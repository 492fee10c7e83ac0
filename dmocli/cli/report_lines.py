"""The summary lines `dmo train` prints under its figures, from its report (a dict until issue 49's second phase
types it): one line per split and the outlook of a target on new rows (a multi-class operating point's offsets:
use/results/threshold.py:offsets_text). Each split's line and the outlook are the typed records' own
(report.BinarySplit.summary_line, use/results/common.py:outlook_lines), which `dmo evaluate`'s and `dmo
threshold`'s results print too."""

from __future__ import annotations

from typing import Any


def split_lines(report: dict[str, Any]) -> list[str]:
    from dmocli.report import split_record  # imported where a summary is printed: `dmo --help` needs none

    constrained = {"fpor": "precision", "frop": "recall"}.get(report.get("problem") or "")
    return [split_record(split).summary_line(name, constrained) for name, split in report.get("splits", {}).items()]


def outlook_line(report: dict[str, Any], split_name: str, new_rows: float | None) -> list[str]:
    """The outlook of the target on the next `new_rows` rows like the split's (outlook_lines); none for a certified
    threshold (its line says it already), nor for a multi-class split."""
    split = report.get("splits", {}).get(split_name)
    if report.get("problem") is None or split is None or "tp" not in split or report.get("confidence") is not None:
        return []
    from dmocli.report import BinarySplit
    from dmocli.use.results.common import ProblemFields, outlook_lines

    problem = ProblemFields(problem=report["problem"], target=report.get("target"), beta=report.get("beta"))
    return outlook_lines(BinarySplit.of(split), problem, new_rows)


def value_line(report: dict[str, Any]) -> list[str]:
    """--problem value's value at the threshold against the default cut and flagging nothing (none without)."""
    if "value" not in report:
        return []
    from dmocli.use.results.threshold import value_lines

    return value_lines(report["value"])
