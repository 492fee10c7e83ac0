"""`dmo info`'s result: what a model file holds (docs/report-schema.md#info), and the lines a person reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.models.architecture import Architecture
from dmocli.report import ReportRecord, inlined, omitted
from dmocli.use.results.common import Envelope, LabelFields, ProblemFields


@dataclass(frozen=True, kw_only=True)
class FeatureColumn(ReportRecord):
    """An input column the table must have: its name and kind, a categorical column's levels, an embedding's
    width."""

    name: str
    kind: str  # numeric, categorical or embedding
    levels: int | None = omitted()
    dim: int | None = omitted()

    def shown(self) -> str:
        return self.name + ("" if self.kind == "numeric" else f" ({self.kind})")


@dataclass(frozen=True, kw_only=True)
class Features(ReportRecord):
    """The input columns, and the width of the encoded input."""

    n_columns: int
    n_inputs: int
    impute: str
    columns: list[FeatureColumn]


@dataclass(frozen=True, kw_only=True)
class Carry(ReportRecord):
    """How `dmo threshold --adapt` made the held-out curve's cut the model's (kept in files adapted since 1.6)."""

    carried: str  # share: by the share of NEW it should flag; score: kept as it is
    expected_share: float | None
    curve_threshold: float


@dataclass(frozen=True, kw_only=True)
class Adapted(ReportRecord):
    """`dmo threshold --adapt/--prior`: the rate the threshold was moved to, from which threshold, and how."""

    new_rate: float
    training_rate: float
    old_threshold: float
    carry: Carry | None = inlined(None)  # None: adapted before it was kept

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> Adapted:
        """The model file's `info.adapted` (checked on load: models/file_checks.py)."""
        kept = ("carried", "expected_share", "curve_threshold")
        carry = Carry(**{key: stored[key] for key in kept}) if "carried" in stored else None
        rates = {key: stored[key] for key in ("new_rate", "training_rate", "old_threshold")}
        return cls(**rates, carry=carry)

    def line(self) -> str:
        """Where the threshold was moved from, for which rate, and how the curve's cut became the model's (files
        adapted before `carried` was kept say only the rates)."""
        line = (
            f"adapted: to the positive rate {self.new_rate:.4f} (trained at {self.training_rate:.4f}), "
            f"from the threshold {self.old_threshold:.6g}"
        )
        if self.carry is not None and self.carry.carried == "share":
            line += (
                f"; the held-out curve's cut {self.carry.curve_threshold:.6g} carried to the model's scores by the "
                f"share of NEW it should flag ({self.carry.expected_share:.4f})"
            )
        elif self.carry is not None and self.carry.carried == "score":
            line += "; the held-out curve's cut, kept as it is"
        return line


@dataclass(frozen=True, kw_only=True)
class Training(ReportRecord):
    """How the model was trained, as its file records it (the stored records `params`, `calibration` and
    `summary` kept as the file has them; None where a file written before them has none)."""

    solver: str
    rows: int | None
    seed: int | None
    params: dict[str, Any] | None
    epochs: int | None
    dmocli_version: str | None
    date: str
    threshold_fitted_on: str | None
    calibration: dict[str, Any] | None
    summary: dict[str, dict[str, Any]]

    def probability_line(self) -> str:
        """How the model's probabilities are made from its logits, and on which rows the map was fitted."""
        calibration = self.calibration
        if calibration is None:
            return "probabilities: uncalibrated (the logits' sigmoid or softmax)"
        if calibration["method"] == "platt":
            mapping = f"sigmoid({calibration['slope']:.4g} x logit {calibration['intercept']:+.4g})"
        else:
            bias = ", ".join(f"{b:+.3g}" for b in calibration["bias"])
            mapping = f"softmax(logits / {calibration['temperature']:.4g} + [{bias}])"
        return f"probabilities: {mapping}, fitted on {calibration['fitted_on']}"

    def lines(self) -> list[str]:
        rows = "" if self.rows is None else f", {self.rows:,} rows"
        lines = [f"training: solver {self.solver}{rows}, seed {self.seed}"]
        for split, figures in self.summary.items():
            shown = ", ".join(f"{key} {value:.4f}" for key, value in figures.items() if isinstance(value, float))
            lines.append(f"  {split}: {shown}")
        return lines


@dataclass(frozen=True, kw_only=True)
class LevelCoefficient(ReportRecord):
    level: str
    coefficient: float | list[float]


@dataclass(frozen=True, kw_only=True)
class ImportanceColumn(ReportRecord):
    """A column's importance (None: no profile to draw rows from), and a linear model's coefficients: a numeric
    column's per training standard deviation and per unit, a categorical column's per level."""

    name: str
    kind: str
    importance: float | None
    coefficient: float | list[float] | None = omitted()
    per_unit: float | list[float] | None = omitted()
    levels: list[LevelCoefficient] | None = omitted()

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> ImportanceColumn:
        """An entry of models/importance.py:feature_importance."""
        levels = entry.get("levels")
        return cls(**{**entry, "levels": None if levels is None else [LevelCoefficient(**lv) for lv in levels]})

    @property
    def linear(self) -> bool:
        return self.coefficient is not None or self.levels is not None

    def coefficient_text(self) -> str:
        """A numeric column's coefficients, or a categorical column's five largest levels'."""

        def number(value: float | list[float]) -> str:
            return f"{value:+.4g}" if isinstance(value, float) else "[" + ", ".join(f"{v:+.3g}" for v in value) + "]"

        if self.coefficient is not None:
            return f"{number(self.coefficient)} per std ({number(self.per_unit)} per unit)"
        if self.levels is not None:
            levels = sorted(self.levels, key=lambda level: -np.max(np.abs(level.coefficient)))
            more = len(levels) - 5
            return ", ".join(f"{lv.level} {number(lv.coefficient)}" for lv in levels[:5]) + (
                f", {more} more" if more > 0 else ""
            )
        return ""


@dataclass(frozen=True, kw_only=True)
class Importance(ReportRecord):
    """`dmo info --features`: how importance is measured, and each column's, most important first."""

    method: str
    columns: list[ImportanceColumn]

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> Importance:
        return cls(method=section["method"], columns=[ImportanceColumn.of(entry) for entry in section["columns"]])


@dataclass(frozen=True, kw_only=True)
class ReviewBand(ReportRecord):
    """A model's review band (`--review-budget`): its lower cut, the budget and how the held-out rows met it."""

    review_threshold: float
    review_probability: float
    budget: float
    confidence: float | None
    next_rows: int | None
    volume: float
    volume_bound: float | None

    def line(self) -> str:
        """The band as a person reads it: where it starts, its budget, what the held-out rows showed."""
        text = (
            f"review band: logit {self.review_threshold:.6g} (probability {self.review_probability:.4g}) up to the "
            f"threshold, within {self.budget:g} of the rows (held-out volume {self.volume:.4f}"
        )
        if self.confidence is not None and self.volume_bound is not None:
            about = "" if self.next_rows is None else f" on {self.next_rows:,} next rows"
            text += f", certified <= {self.volume_bound:.4f}{about} at confidence {self.confidence:g}"
        return text + ")"


@dataclass(frozen=True, kw_only=True)
class GainInfo(ReportRecord):
    """A `--problem value` model's gain matrix (its held-out curve keeps it): the canonical text, each cell's gain
    per row, and the columns whose sums the curve keeps (any matrix over them can re-target it)."""

    gain: str
    cells: dict[str, str]  # tp, fp, fn, tn: a number, a column, -column or number*column
    columns: list[str]

    def line(self) -> str:
        cells = "  ".join(f"{cell} {text}" for cell, text in self.cells.items())
        kept = ", ".join(self.columns) or "none"
        return f"gain matrix (value per row): {cells}; the held-out curve keeps the sums of: {kept}"


@dataclass(frozen=True, kw_only=True)
class BudgetInfo(ReportRecord):
    """A model kept within an alert budget: the train report's `alert_budget` section (operating_point/
    alert_budget.py:BudgetReport) at the model's threshold, read again off the held-out curve its file keeps: the
    budget, the held-out rows the cut flags, the certified bound of their share with the file's confidence, and
    the alerts the next period is expected to bring."""

    max_alert_rate: float
    max_alerts: int | None
    per_rows: int | None
    rows: int
    flagged: int
    flagged_share: float
    confidence: float | None
    certified_rows: int | None
    certified_share: float | None
    within: bool
    period_rows: int
    expected_alerts: float
    alerts_interval: list[int]
    budget_alerts: int

    def line(self) -> str:
        from dmocli.operating_point.alert_budget import summary_line  # the train summary's own line

        return summary_line(self.to_dict())


@dataclass(frozen=True, kw_only=True)
class InfoResult(ReportRecord):
    """The info report (its `to_dict`), and the lines `dmo info` prints (`lines`)."""

    envelope: Envelope = inlined()
    model: str
    format_version: int
    labels: LabelFields = inlined()
    problem: ProblemFields = inlined()
    confidence: float | None
    new_rows: int | None
    certified: bool | None
    dropped_confidence: float | None = omitted()  # dmo threshold dropped a certificate at this level
    threshold: float | None
    threshold_probability: float | None
    decision_rule: str
    review_band: ReviewBand | None = omitted()  # --review-budget's band, where the model has one
    gain: GainInfo | None = omitted()  # --problem value's gain matrix, where the model has one
    alert_budget: BudgetInfo | None = omitted()  # the alert budget and its certificate, where the model has one
    adapted: Adapted | None
    model_selection: dict[str, Any] | None  # train --model auto's section, as the file stores it
    features: Features
    architecture: Architecture
    n_parameters: int
    n_trees: int | None = omitted()  # gbdt: the trees (n_parameters then counts their nodes)
    training: Training
    importance: Importance | None = omitted()  # --features only

    def lines(self) -> list[str]:
        """What a person reads first: the problem and its certificate, the threshold, the label, the inputs, the
        model's size, its probabilities and its training."""
        lines = [
            f"model: {self.model}  (trained with dmocli {self.training.dmocli_version}, written {self.training.date})",
            f"problem: {self._problem_text()}",
        ]
        if self.threshold is not None:
            lines.append(
                f"threshold: logit {self.threshold:.6g} (probability {self.threshold_probability:.4g}); "
                f"decision: {self.decision_rule}"
            )
        if self.review_band is not None:
            lines.append(self.review_band.line())
        lines += [section.line() for section in (self.gain, self.alert_budget) if section is not None]
        if self.adapted is not None:
            lines.append(self.adapted.line())
        if self.model_selection is not None:
            from dmocli.pipelines.model_choice import summary_line  # reads train's report, whose keys these are

            lines.append(summary_line(self.to_dict()))
        labels = self.labels
        positive = "" if labels.positive is None else f", positive {labels.positive!r}"
        lines.append(f"label: column {labels.label_col!r}, classes {labels.classes!r}{positive}")
        kinds = ", ".join(column.shown() for column in self.features.columns)
        lines.append(f"features: {self.features.n_columns} columns, {self.features.n_inputs} inputs: {kinds}")
        arch = self.architecture
        if arch.kind == "gbdt":
            lines.append(f"model: gbdt (boosted trees), {self.n_trees:,} trees, {self.n_parameters:,} nodes")
        else:
            shape = "" if arch.kind == "linear" else f", width {arch.width}, depth {arch.depth}"
            lines.append(f"network: {arch.kind}{shape}, {self.n_parameters:,} parameters")
        return lines + [self.training.probability_line(), *self.training.lines()]

    def _problem_text(self) -> str:
        """The problem, its target, and the --confidence certificate (what it is about, and whether it was met)."""
        problem = self.problem.problem
        if self.problem.target is not None:
            problem += f", target {self.problem.target:g}"
        if self.confidence is not None:
            sample = "the population value" if self.new_rows is None else f"on {self.new_rows:,} new rows"
            if self.alert_budget is not None and self.problem.target is None:  # the budget is what is certified
                rows = self.alert_budget.certified_rows
                sample = "the population's flagged share" if rows is None else f"the alerts of the next {rows:,} rows"
            problem += f" at confidence {self.confidence:g} ({sample})"
            if self.certified is False:
                problem += "; NOT certified: the closest threshold was kept (--allow-infeasible)"
        if self.dropped_confidence is not None:
            problem += (
                f"; NOT certified: dmo threshold dropped the certificate at confidence {self.dropped_confidence:g} "
                "when it moved the threshold"
            )
        return problem
