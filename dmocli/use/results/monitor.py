"""`dmo monitor`'s result: NEW's estimated positive rate and metrics at the model's threshold, its drift, per chunk
too, and the gate's verdict (docs/report-schema.md#monitor, docs/monitoring.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli.errors import UnreachableTarget
from dmocli.prep.row_fingerprint import TrainingRowsFound
from dmocli.report import BinarySplit, ReportRecord, binary_split, inlined, omitted
from dmocli.shift.drift_stats import FeatureDrift
from dmocli.use.results.band import ReviewVolume
from dmocli.use.results.common import Envelope, LabelFields, ProblemFields
from dmocli.use.verdicts import ReferenceRate

if TYPE_CHECKING:
    from dmocli.models.modelfile import DmoModel

SHOWN_DRIFTS = 5  # drifted features a section's summary names (the report lists more, the gate reads all)


@dataclass(frozen=True, kw_only=True)
class PositiveRate(ReportRecord):
    """A section's positive rate: the estimate and its interval, by which method, the share the threshold flags, and
    the training rate with its interval; `rows_needed`: the fewest rows that could tell a rate from it."""

    estimate: float
    interval: list[float] | None
    method: str
    classify_and_count: float
    training: float
    training_interval: list[float] | None
    rows_needed: int


@dataclass(frozen=True, kw_only=True)
class LabelShiftEstimate(ReportRecord):
    """Precision, recall and F-beta expected at the threshold at the estimated rate (shift/expected.py
    metrics_under_label_shift), each with its interval."""

    rate: float
    threshold: float
    beta: float
    precision: float
    precision_interval: list[float] | None
    recall: float
    recall_interval: list[float] | None
    f_beta: float
    f_beta_interval: list[float] | None
    confidence: float

    def measured(self, metric: str) -> tuple[float, list[float]]:
        """A metric's value and interval (the gate reads the constrained one)."""
        return getattr(self, metric), getattr(self, f"{metric}_interval")


@dataclass(frozen=True, kw_only=True)
class CovariateShiftEstimate(ReportRecord):
    """The same if the calibrated probabilities hold (metrics_under_covariate_shift), with the expected counts."""

    threshold: float
    beta: float
    confidence: float
    tp: float
    fp: float
    fn: float
    precision: float
    precision_interval: list[float] | None
    recall: float
    recall_interval: list[float] | None
    f_beta: float
    f_beta_interval: list[float] | None


@dataclass(frozen=True, kw_only=True)
class Assumptions(ReportRecord):
    """Whether the label-shift and covariate-shift estimates of the rate agree, and what that means."""

    agree: bool
    note: str


@dataclass(frozen=True, kw_only=True)
class Realized(ReportRecord):
    """A section's labeled rows: how many, their positive rate, and the metrics they realize at the threshold, beside
    the estimates (report.BinarySplit's figures)."""

    rows: int
    positive_rate: float
    precision: float
    recall: float
    f_beta: float
    precision_interval: list[float] | None
    recall_interval: list[float] | None
    tp: int
    fp: int
    fn: int

    @classmethod
    def at_threshold(cls, model: DmoModel, logits: np.ndarray, labels: np.ndarray) -> Realized:
        """Labeled rows' figures at the model's threshold: monitor's `realized` section, and the realized columns
        `evaluate --history` writes."""
        split = binary_split(
            logits, labels, threshold=model.threshold, problem=model.problem, calibration=model.calibration
        )
        return cls.of(split)

    @classmethod
    def of(cls, split: BinarySplit) -> Realized:
        return cls(
            rows=split.n,
            positive_rate=split.n_pos / split.n,
            precision=split.precision,
            recall=split.recall,
            f_beta=split.f_beta,
            precision_interval=split.precision_interval,
            recall_interval=split.recall_interval,
            tp=split.tp,
            fp=split.fp,
            fn=split.fn,
        )


@dataclass(frozen=True, kw_only=True)
class DriftEntry(ReportRecord):
    """A listed feature's drift (shift/drift_stats.py FeatureDrift), its PSI's reading, whether its change is more
    than chance (`significant`), and `expected` (true only for a trend feature: listed, never a gate reason)."""

    name: str
    kind: str
    psi: float
    p_value: float
    rows_before: int
    rows_after: int
    missing_before: float
    missing_after: float
    unseen_after: int
    severity: str
    significant: bool
    expected: bool | None = omitted()

    def line(self) -> str:
        """The summary's line: a PSI is read as drift only beside a change the rows could not give by chance."""
        rows = self.rows_after
        chance = f"within chance at {rows} row{'' if rows == 1 else 's'}"
        reading = self.severity if self.significant else chance
        if self.expected:
            reading += "; expected: a trend in time, not gated"
        return f"  drift {self.name}: PSI {self.psi:.3f} ({reading}), p {self.p_value:.2g}"


@dataclass(frozen=True, kw_only=True)
class DriftMap(ReportRecord):
    """Every feature's drift in a section, where `drift` lists only the most drifted: each feature's PSI (the page's
    heat map of every feature by period), the features past the gate's limit (its drift reasons; the score's reason
    is in `drift_reasons`), the rows at levels the model never saw per categorical feature (those with any), and the
    score's PSI where it is compared."""

    psi: dict[str, float]
    past_limit: list[str]
    unseen_rows: dict[str, int]
    score_psi: float | None = omitted()

    @classmethod
    def of(cls, drifts: Sequence[FeatureDrift], past: Sequence[FeatureDrift]) -> DriftMap:
        features = [drift for drift in drifts if drift.kind != "score"]
        score = [drift.psi for drift in drifts if drift.kind == "score"]
        return cls(
            psi={drift.name: drift.psi for drift in features},
            past_limit=[drift.name for drift in past if drift.kind != "score"],
            unseen_rows={drift.name: drift.unseen_after for drift in features if drift.unseen_after},
            score_psi=score[0] if score else None,
        )


@dataclass(frozen=True, kw_only=True)
class ExpectedValueEstimate(ReportRecord):
    """A model trained with --problem value (its gain matrix `gain`): the value per row its threshold is expected to
    bring on the section's rows at their estimated positive rate, from the held-out curve's gains (shift/value.py),
    and in total on them, each interval holding the rate's and the held-out class means' (two-sided at
    `confidence`); beside it, the value per row at the reference rate (at the training rate: the held-out rows'
    own), which the estimate is read against."""

    gain: str
    rate: float
    per_row: float
    per_row_interval: list[float]
    total: float
    total_interval: list[float]
    confidence: float
    reference_rate: float
    per_row_at_reference: float

    def line(self) -> str:
        low, high = self.per_row_interval
        return (
            f"  expected value per row: {self.per_row:.4g} [{low:.4g}, {high:.4g}] (total {self.total:.6g}); "
            f"{self.per_row_at_reference:.4g} at the reference rate {self.reference_rate:.4f}"
        )


@dataclass(frozen=True, kw_only=True)
class AlertsEstimate(ReportRecord):
    """A model trained within an alert budget: the share of the section's own rows its threshold flags (observed,
    no label needed) with its interval at the monitor's confidence, the alerts a period of `period_rows` brings at
    that share against the budget's, and whether the rows exceed the budget beyond chance (`exceeded`: the
    share's one-sided lower bound above the budget; operating_point/alert_budget.py:period_alerts)."""

    max_alert_rate: float
    max_alerts: int | None
    per_rows: int | None
    rows: int
    flagged: int
    flagged_share: float
    share_interval: list[float]
    period_rows: int
    expected_alerts: float
    alerts_interval: list[float]
    budget_alerts: int
    exceeded: bool

    def line(self) -> str:
        low, high = self.alerts_interval
        over = "  EXCEEDS the budget" if self.exceeded else ""
        return (
            f"  alerts: {self.flagged_share:.2%} of rows flagged; expected {self.expected_alerts:,.1f} [{low:,.1f}, "
            f"{high:,.1f}] per {self.period_rows:,} rows against a budget of {self.budget_alerts:,}{over}"
        )


@dataclass(frozen=True, kw_only=True)
class MonitorSection(ReportRecord):
    """All of NEW, or one chunk: its rows, the estimates, the realized figures where it has labels, its drift."""

    rows: int
    too_small: bool
    positive_rate: PositiveRate
    label_shift: LabelShiftEstimate
    covariate_shift: CovariateShiftEstimate
    assumptions: Assumptions
    realized: Realized | None = omitted()  # labeled rows only: the figures measured beside the estimates
    drift: list[DriftEntry] | None = omitted()  # a model file with a drift profile only
    drift_reasons: list[str] | None = omitted()
    drift_map: DriftMap | None = omitted()  # every feature's PSI: drift lists the most drifted only
    value: ExpectedValueEstimate | None = omitted()  # a model with a gain matrix (--problem value) only
    alerts: AlertsEstimate | None = omitted()  # a model trained within an alert budget only
    review_volume: ReviewVolume | None = omitted()  # a model with a review band only: its share of the rows

    def lines(self, reference: ReferenceRate) -> list[str]:
        rate = self.positive_rate
        low, high = rate.interval
        adapted = "" if reference.source == "training" else f"; adapted to {reference.rate:.4f}"
        lines = [
            f"positive rate: {rate.estimate:.4f} [{low:.4f}, {high:.4f}] ({rate.method}); trained at "
            f"{rate.training:.4f}{adapted}; predicted positive {rate.classify_and_count:.4f}",
            _estimate_line("label shift", self.label_shift.to_dict()),
            _estimate_line("covariate shift", self.covariate_shift.to_dict()),
        ]
        if self.too_small:
            lines.insert(
                1,
                f"  too small to say anything: {self.rows} row(s) cannot tell a positive rate from the training "
                f"rate (at least {rate.rows_needed} needed); not gated",
            )
        if self.value is not None:
            lines.append(self.value.line())
        if self.alerts is not None:
            lines.append(self.alerts.line())
        if self.review_volume is not None:
            lines.append(self.review_volume.line())
        if not self.assumptions.agree:
            lines.append(f"  {self.assumptions.note}")
        if self.realized is not None:
            lines.append(_estimate_line(f"realized on {self.realized.rows} labels", self.realized.to_dict()))
        return lines + [drift.line() for drift in (self.drift or [])[:SHOWN_DRIFTS]]


@dataclass(frozen=True, kw_only=True)
class ChunkSection(ReportRecord):
    """One chunk's section, named."""

    chunk: str
    section: MonitorSection = inlined()

    def line(self) -> str:
        rate, shift = self.section.positive_rate, self.section.label_shift
        small = "  (too small to tell: not gated)" if self.section.too_small else ""
        value = "" if self.section.value is None else f"  value per row {self.section.value.per_row:.4g}"
        return (
            f"  chunk {self.chunk}: rows {self.section.rows}  rate {rate.estimate:.4f}  precision "
            f"{shift.precision:.4f}  recall {shift.recall:.4f}{value}{small}"
        )


@dataclass(frozen=True, kw_only=True)
class ChunkBy(ReportRecord):
    """How NEW was cut into chunks: --chunk-col, --chunk-size (None: not given), or --every's periods of the column
    --time-col (`column`) names."""

    column: str | None
    rows: int | None
    every: str | None = omitted()


@dataclass(frozen=True, kw_only=True)
class MonitorGate(ReportRecord):
    """The gate's verdict, recorded whether or not --gate was asked (only --gate turns a failure into exit 3)."""

    asked: bool
    passed: bool
    reasons: list[str]


@dataclass(frozen=True, kw_only=True)
class MonitorResult(ReportRecord):
    """The monitor report (its `to_dict`), and its summary (`lines`). `wall_seconds` is None until the run is
    timed, last."""

    envelope: Envelope = inlined()
    model: str
    model_sha256: str | None = omitted()  # the model file's sha256: a page made from the report states it
    data: str
    engine: str
    labels: LabelFields = inlined()
    problem: ProblemFields = inlined()
    threshold: float
    training_rate: float
    reference_rate: ReferenceRate
    confidence: float
    warnings: list[str]
    training_rows: TrainingRowsFound | None
    overall: MonitorSection = inlined()
    chunk_by: ChunkBy | None = omitted()
    chunks: list[ChunkSection] | None = omitted()
    gate: MonitorGate
    written_at: str | None = omitted()  # when the report was written (report.written_now): the page's date
    wall_seconds: float | None = omitted()

    def lines(self) -> list[str]:
        """The summary, printed alike whether the gate passed or failed (exit 3): a CI log keeps the figures and
        every reason of a failure."""
        lines = [f"model: {self.model}  threshold (logit): {self.threshold:.6g}  rows: {self.overall.rows}"]
        lines += self.overall.lines(self.reference_rate)
        lines += [chunk.line() for chunk in self.chunks or []]
        gate = self.gate
        lines.append("gate: passed" if gate.passed else f"gate: failed on {len(gate.reasons)} reason(s):")
        return lines + [f"  {reason}" for reason in ([] if gate.passed else gate.reasons)]


class MonitorGateFailed(UnreachableTarget):
    """`--gate` found a reason to stop the model (exit 3): the refusal, with the run's result for the summary the
    command prints above the one-line message (its `report`, the dict, as every refused target carries)."""

    def __init__(self, message: str, result: MonitorResult) -> None:
        super().__init__(message)
        self.result = result


def _estimate_line(name: str, figures: dict[str, Any]) -> str:
    parts = []
    for metric in ("precision", "recall", "f_beta"):
        value, interval = figures.get(metric), figures.get(f"{metric}_interval")
        if value is None:
            continue
        shown = "" if not interval else f" [{interval[0]:.3f}, {interval[1]:.3f}]"
        parts.append(f"{metric} {value:.4f}{shown}")
    return f"  {name}: " + "  ".join(parts)
