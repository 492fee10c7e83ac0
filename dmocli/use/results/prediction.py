"""`dmo predict`'s result: where the predictions went, how many rows, and the drift counted over the whole run
(docs/report-schema.md#predict)."""

from __future__ import annotations

from dataclasses import dataclass

from dmocli.report import ReportRecord, inlined
from dmocli.use.results.common import Envelope, LevelFields


@dataclass(frozen=True, kw_only=True)
class PredictResult(ReportRecord):
    """The predict report (its `to_dict`), and its summary (`lines`). `output` is the file or directory written,
    or "standard output" where the predictions took it (the summary then goes to stderr with the warnings)."""

    envelope: Envelope = inlined()
    model: str
    data: str
    engine: str
    output: str
    rows: int
    levels: LevelFields = inlined()
    warnings: list[str]
    wall_seconds: float

    def lines(self) -> list[str]:
        """How many predictions were written, and where."""
        return [f"wrote {self.rows} predictions to {self.output}"]
