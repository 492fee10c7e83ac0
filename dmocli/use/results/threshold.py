"""`dmo threshold`'s results (docs/report-schema.md#threshold), one record a way the operating point moves, each
field in the order its report writes it: a binary threshold re-fit on DATA or re-targeted on the held-out curve
(`RefitResult`), a multi-class model's class offsets re-fit (`ClassRefitResult`), and a threshold moved to a new
positive rate (`AdaptResult`, --adapt/--prior). Each is read from the report its path assembled
(pipelines/saving.py:threshold_envelope), so `to_dict` is that report key for key, and `lines` is the summary."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dmocli.report import BinarySplit, MulticlassSplit, ReportRecord, inlined, omitted
from dmocli.use.results.common import Envelope, LabelFields, ProblemFields, outlook_lines

Record = TypeVar("Record", bound=ReportRecord)


def record_of(cls: type[Record], report: Mapping[str, Any], **converted: Any) -> Record:
    """The record `cls` of a report written as a dict: an inlined record's fields read from the same level, a field
    left out when None read as None, and `converted` (a nested section made a record) taken as given."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for entry in dataclasses.fields(cls):
        how = entry.metadata.get("report")
        if entry.name in converted:
            values[entry.name] = converted[entry.name]
        elif how == "inlined":
            inner = next(t for t in typing.get_args(hints[entry.name]) or [hints[entry.name]] if t is not type(None))
            values[entry.name] = record_of(inner, report)
        else:
            values[entry.name] = report.get(entry.name) if how == "omitted" else report[entry.name]
    return cls(**values)


@dataclass(frozen=True, kw_only=True)
class ThresholdFields(ReportRecord):
    """The keys every threshold report starts with, whichever way it moved the operating point, and the certificate
    MODEL had that this run dropped (`dropped_confidence`: --no-confidence, or a new problem without a bound)."""

    envelope: Envelope = inlined()
    model: str
    data: str
    engine: str
    output: str
    solver: str
    labels: LabelFields = inlined()
    problem: ProblemFields = inlined()
    problem_source: str  # option: the problem given; model: the one MODEL stores
    confidence: float | None  # the certificate's level (None: none)
    seed: int | None
    device: str
    dropped_confidence: float | None = omitted()

    def problem_line(self) -> str:
        target = "" if self.problem.target is None else f", target {self.problem.target:g}"
        stored = "  (stored in the model)" if self.problem_source == "model" else ""
        return f"problem: {self.problem.problem}{target}{stored}"

    def dropped_lines(self) -> list[str]:
        """What became of MODEL's certificate where this run did not keep one."""
        if self.dropped_confidence is None:
            return []
        return [
            f"certificate: MODEL's confidence {self.dropped_confidence:g} certificate was dropped; the new threshold "
            "is not certified (dmo info says so)"
        ]


@dataclass(frozen=True, kw_only=True)
class RefitResult(ReportRecord):
    """A binary model's threshold searched again, on DATA or on the held-out curve MODEL keeps."""

    fields: ThresholdFields = inlined()
    previous_threshold: float | None
    unlabeled_rows: int
    warnings: list[str]
    operating_point: dict[str, Any]  # the search's point (operating_point/search.py:OperatingPoint.to_dict)
    feasible: bool | None
    threshold: float
    splits: dict[str, BinarySplit]
    value: dict[str, Any] | None = omitted()  # --problem value: the value section (pipelines/value_report.py)
    alert_budget: dict[str, Any] | None = omitted()  # an alert budget's section (operating_point/alert_budget.py)
    review_band: dict[str, Any] | None = omitted()  # a review band's section (pipelines/review_banding.py)
    wall_seconds: float | None = omitted()

    @classmethod
    def of(cls, report: Mapping[str, Any]) -> RefitResult:
        splits = {name: BinarySplit.of(split) for name, split in report["splits"].items()}
        return record_of(cls, report, splits=splits)

    def lines(self) -> list[str]:
        """The new threshold, the problem, each split's figures, and the outlook of an uncertified target in the
        population (the value --confidence certifies by default, not a sample size the re-target never used)."""
        problem = self.fields.problem
        lines = [f"model: {self.fields.output}  threshold (logit): {self.threshold:.6g}", self.fields.problem_line()]
        lines += [split.summary_line(name, problem.constrained) for name, split in self.splits.items()]
        lines += value_lines(self.value)
        if self.alert_budget is not None:
            from dmocli.operating_point.alert_budget import summary_line  # scipy on use: dmo --help reads none

            lines.append(summary_line(self.alert_budget))
        if self.review_band is not None:
            from dmocli.pipelines.review_banding import summary_line as band_line

            lines.append(band_line(self.review_band))
        if self.fields.confidence is None and "data" in self.splits:
            lines += outlook_lines(self.splits["data"], problem, math.inf)
        return lines + self.fields.dropped_lines()


def value_lines(value: Mapping[str, Any] | None) -> list[str]:
    """--problem value's line: the value per row at the threshold with its interval, against the default cut's and
    flagging nothing's (nothing without a value section)."""
    if value is None:
        return []
    at, default, nothing = value["at_threshold"], value["at_default_cut"], value["flag_nothing"]
    low, high = at["per_row_interval"]
    return [
        f"value per row: {at['per_row']:.4g} [{low:.4g}, {high:.4g}] {value['level']:.0%} at the threshold "
        f"(total {at['total']:.6g} over {value['rows']:,} held-out rows); default cut {default['per_row']:.4g}, "
        f"flag nothing {nothing['per_row']:.4g}"
    ]


@dataclass(frozen=True, kw_only=True)
class ClassRefitResult(ReportRecord):
    """A multi-class model's class offsets searched again on DATA."""

    fields: ThresholdFields = inlined()
    previous_threshold: float | None  # None: a multi-class model moves its class offsets, not a threshold
    previous_offsets: list[float] | None
    unlabeled_rows: int
    warnings: list[str]
    class_operating_point: dict[str, Any]  # the offsets and per-class figures (report `class_operating_point`)
    feasible: bool | None
    threshold: float | None  # None, as previous_threshold
    splits: dict[str, MulticlassSplit]
    calibration: dict[str, Any] | None = omitted()
    wall_seconds: float | None = omitted()

    @classmethod
    def of(cls, report: Mapping[str, Any]) -> ClassRefitResult:
        splits = {name: MulticlassSplit.of(split) for name, split in report["splits"].items()}
        return record_of(cls, report, splits=splits)

    def lines(self) -> list[str]:
        lines = [f"model: {self.fields.output}  {offsets_text(self.class_operating_point)}", self.fields.problem_line()]
        constrained = self.fields.problem.constrained
        lines += [split.summary_line(name, constrained) for name, split in self.splits.items()]
        return lines + self.fields.dropped_lines()


def offsets_text(point: Mapping[str, Any]) -> str:
    """A multi-class operating point in one line: its class offsets and the classes left below their floor."""
    offsets = ", ".join(f"{row['class']} {row['offset']:+.3g}" for row in point["per_class"])
    below = f"; below the floor: {', '.join(map(str, point['below_floor']))}" if point["below_floor"] else ""
    return f"class offsets: {offsets}{below}"


@dataclass(frozen=True, kw_only=True)
class Expected(ReportRecord):
    """The metrics expected at the new positive rate at one threshold (shift/at_rate.py:shifted_metrics), and for a
    --problem value model the value per row expected there (shift/value.py)."""

    precision: float
    recall: float
    f_beta: float
    value_per_row: float | None = omitted()

    def line(self, where: str) -> str:
        value = "" if self.value_per_row is None else f"  value per row {self.value_per_row:.4g}"
        return (
            f"  expected {where}: precision {self.precision:.4f}  recall {self.recall:.4f}  F {self.f_beta:.4f}" + value
        )


@dataclass(frozen=True, kw_only=True)
class AdaptedSection(ReportRecord):
    """The report's `adapted`: the threshold moved from the old one to the cut the held-out curve gives at the new
    rate (shift/adaptation.py:AdaptedThreshold), how that cut became the model's (`carried`), and the rate's
    source and interval."""

    problem: dict[str, Any]
    threshold: float
    old_threshold: float
    new_rate: float
    rate_used: float  # the rate the cut was chosen for: new_rate, or a certificate's interval low end
    feasible: bool | None
    at_old: Expected
    at_new: Expected
    certificate: str | None
    note: str | None
    new_rows: int | None
    curve_threshold: float
    carried: str  # share: by the share of NEW it should flag; score: kept as it is
    expected_share: float | None
    training_rate: float
    rate_interval: list[float] | None
    rate_source: str

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> AdaptedSection:
        interval = section["rate_interval"]
        return record_of(
            cls,
            section,
            at_old=Expected(**section["at_old"]),
            at_new=Expected(**section["at_new"]),
            rate_interval=None if interval is None else list(interval),
        )


@dataclass(frozen=True, kw_only=True)
class AdaptResult(ReportRecord):
    """A binary model's threshold moved to a new positive rate (--adapt NEW estimated, --prior R given)."""

    fields: ThresholdFields = inlined()
    previous_threshold: float
    threshold: float
    unlabeled_rows: int
    feasible: bool | None
    adapted: AdaptedSection
    warnings: list[str]
    splits: dict[str, BinarySplit]
    wall_seconds: float | None = omitted()

    @classmethod
    def of(cls, report: Mapping[str, Any]) -> AdaptResult:
        splits = {name: BinarySplit.of(split) for name, split in report["splits"].items()}
        return record_of(cls, report, adapted=AdaptedSection.of(report["adapted"]), splits=splits)

    def lines(self) -> list[str]:
        """The new threshold and the old, the rate and its source, the metrics expected at both, how the cut was
        carried, and what the certificate is about (or that MODEL's was dropped)."""
        adapted = self.adapted
        lines = [
            f"model: {self.fields.output}  threshold (logit): {self.threshold:.6g} (was {self.previous_threshold:.6g})",
            f"positive rate: {adapted.new_rate:.4f} ({adapted.rate_source}); trained at {adapted.training_rate:.4f}",
            adapted.at_old.line("at the old threshold"),
            adapted.at_new.line("at the new threshold"),
        ]
        if adapted.carried == "share":
            lines.append(
                f"  carried to the model's scores by the share of NEW it should flag ({adapted.expected_share:.4f}): "
                f"the cut on the held-out scores was {adapted.curve_threshold:.6g}"
            )
        metric = self.fields.problem.constrained
        if self.fields.confidence is not None and metric is not None:
            rows = adapted.new_rows
            where = "in the population" if rows is None else f"measured on the next {rows:,} rows"
            lines.append(
                f"certified (feasible={adapted.feasible}) for the {metric} {where} at a rate of at least "
                f"{adapted.rate_used:.4f}"
            )
        return lines + ([adapted.note] if adapted.note else []) + self.fields.dropped_lines()


ThresholdResult = RefitResult | ClassRefitResult | AdaptResult
