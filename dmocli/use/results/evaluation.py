"""`dmo evaluate`'s result: the model's figures on labeled DATA at its stored operating point, and the gate's
verdict (docs/report-schema.md#evaluate)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dmocli.errors import UnreachableTarget
from dmocli.operating_point.gain import ValueAt
from dmocli.prep.row_fingerprint import TrainingRowsFound
from dmocli.report import BinarySplit, MulticlassSplit, ReportRecord, inlined, omitted
from dmocli.report_figures import ScoreFigures
from dmocli.use.results.band import RealizedBand
from dmocli.use.results.common import Envelope, LabelFields, LevelFields, ProblemFields, outlook_lines
from dmocli.use.verdicts import Gate, gate_line


@dataclass(frozen=True, kw_only=True)
class DecisionValue(ReportRecord):
    """The value one decision realizes on DATA's labeled rows: per row and in total, each with its normal interval
    (operating_point/gain.py ValueAt: the mean of rows like these, at VALUE_LEVEL), and the rows it flags; the
    default cut's `rule` too, as the train report's `value` section says it (pipelines/value_report.py)."""

    per_row: float
    per_row_interval: list[float]
    total: float
    total_interval: list[float]
    flagged: int
    rule: str | None = omitted()

    @classmethod
    def of(cls, values: np.ndarray, flagged: np.ndarray, rule: str | None = None) -> DecisionValue:
        """From each row's realized value (RowGains.realized) under the decision `flagged`."""
        figures = ValueAt.of(float(values.sum()), float(np.square(values).sum()), values.size, int(flagged.sum()))
        return cls(**figures.to_dict(), rule=rule)


@dataclass(frozen=True, kw_only=True)
class RealizedValue(ReportRecord):
    """The value DATA's labeled rows realize under the gain matrix a `--problem value` model's threshold maximized:
    at the threshold, at the model's default cut (calibrated probability 0.5) and flagging nothing, and what the
    threshold brings over each, in the train report's `value` section's terms (pipelines/value_report.py), so the
    two read alike: what training expected on its held-out rows, what DATA realized. `level`: the intervals'."""

    gain: str
    rows: int
    level: float
    at_threshold: DecisionValue
    at_default_cut: DecisionValue
    flag_nothing: DecisionValue
    over_default_cut: float
    over_flag_nothing: float

    def line(self) -> str:
        at, (low, high) = self.at_threshold, self.at_threshold.per_row_interval
        return (
            f"value per row: {at.per_row:.4g} [{low:.4g}, {high:.4g}] (total {at.total:.6g} on {self.rows} rows); "
            f"default cut {self.at_default_cut.per_row:.4g}; flag nothing {self.flag_nothing.per_row:.4g}"
        )


@dataclass(frozen=True, kw_only=True)
class EvaluateResult(ReportRecord):
    """The evaluate report (its `to_dict`), and its summary (`lines`). `wall_seconds` is None until the run is
    timed, last: a refused gate's report takes its error keys before it (pipelines/saving.py:refuse_with_report)."""

    envelope: Envelope = inlined()
    model: str
    model_sha256: str | None = omitted()  # the model file's sha256 (none for a model object): the page states it
    data: str
    engine: str
    solver: str
    labels: LabelFields = inlined()
    problem: ProblemFields = inlined()
    confidence: float | None
    seed: int | None
    device: str
    levels: LevelFields = inlined()
    threshold: float | None
    unlabeled_rows: int
    warnings: list[str]
    training_rows: TrainingRowsFound | None
    splits: dict[str, BinarySplit | MulticlassSplit]
    figures: ScoreFigures | None = omitted()  # a binary split's curve, reliability and histogram: the page's data
    gate: Gate | None = omitted()  # --gate or --gate-confidence only
    value: RealizedValue | None = omitted()  # a model with a gain matrix, on DATA with its columns
    review_band: RealizedBand | None = omitted()  # a model with a review band: the band on DATA's labeled rows
    written_at: str | None = omitted()  # when the report was written (report.written_now): the page's date
    wall_seconds: float | None = omitted()

    @property
    def split(self) -> BinarySplit | MulticlassSplit:
        """The one split evaluate reports: DATA's."""
        return self.splits["data"]

    def lines(self) -> list[str]:
        """The figures and the gate's verdict: printed alike whether the gate passed or failed (exit 3), so a CI
        log shows why. The outlook line only for a binary split of an uncertified threshold (a certified one's
        confidence says it already)."""
        split = self.split
        lines = [split.summary_line("data", self.problem.constrained)]
        if isinstance(split, BinarySplit) and self.confidence is None:
            lines += outlook_lines(split, self.problem, None)
        if self.value is not None:
            lines.append(self.value.line())
        if self.review_band is not None:
            lines.append(self.review_band.line())
        if self.gate is not None and self.gate.passed is not None:  # else a warning said why nothing was checked
            lines.append(gate_line(self.gate, self.data))
        return lines


class GateFailed(UnreachableTarget):
    """`--gate` found the model's target missed (exit 3): the refusal, with the run's result for the summary the
    command prints above the one-line message (its `report`, the dict, as every refused target carries)."""

    def __init__(self, result: EvaluateResult) -> None:
        super().__init__(gate_line(result.gate, result.data))
        self.result = result
