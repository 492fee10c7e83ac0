"""The records several reports share: the envelope, the label and problem fields, a table's unseen levels, and
the outlook line under a binary split's figures."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dmocli.operating_point.problems import Problem
from dmocli.pipelines.thresholding import problem_fields
from dmocli.prep.features import LevelCounts
from dmocli.prep.labels import LabelSpec
from dmocli.report import BinarySplit, ReportRecord, envelope, label_fields


@dataclass(frozen=True, kw_only=True)
class Envelope(ReportRecord):
    """The keys every report starts with (report `envelope`)."""

    command: str
    schema_version: str
    dmocli_version: str
    python: str
    torch: str | None

    @classmethod
    def of(cls, command: str) -> Envelope:
        return cls(**envelope(command))


@dataclass(frozen=True, kw_only=True)
class LabelFields(ReportRecord):
    """The label column, its classes in the model's order, and the positive class (report `label_fields`)."""

    label_col: str
    classes: list[Any]
    positive: Any  # None for a multi-class model

    @classmethod
    def of(cls, labels: LabelSpec) -> LabelFields:
        return cls(**label_fields(labels))


@dataclass(frozen=True, kw_only=True)
class ProblemFields(ReportRecord):
    """The operating-point problem (report `problem_fields`): `multiclass`, with no target or beta, for a
    multi-class model."""

    problem: str
    target: float | None
    beta: float | None

    @classmethod
    def of(cls, problem: Problem | None) -> ProblemFields:
        return cls(**problem_fields(problem))

    @property
    def constrained(self) -> str | None:
        """The metric the target bounds: precision (fpor) or recall (frop); None without a target."""
        return {"fpor": "precision", "frop": "recall"}.get(self.problem)


@dataclass(frozen=True, kw_only=True)
class LevelFields(ReportRecord):
    """Per categorical column, the rows of a table whose level the model has not seen or that is missing, the
    unseen levels by name, and the variants of known levels (only columns where it happened)."""

    unseen_levels: dict[str, int]
    missing_levels: dict[str, int]
    unseen_level_values: dict[str, dict[str, int]]
    unseen_level_variants: dict[str, Any]

    @classmethod
    def of(cls, levels: LevelCounts) -> LevelFields:
        return cls(**levels.report())


def outlook_lines(split: BinarySplit, problem: ProblemFields, new_rows: float | None) -> list[str]:
    """The chance the target holds on the next `new_rows` rows like the split's (None: as many as it has;
    math.inf: the population's value, what --confidence certifies by default), and, below 0.8, the option that
    makes it high. None for a model with no target (and the caller leaves it out for a certified threshold: its
    line says it already)."""
    metric = problem.constrained
    if metric is None:
        return []
    from dmocli.operating_point.outlook import LOW_OUTLOOK, outlook  # scipy: only where there is a target

    rows = new_rows or split.n
    chance = outlook(split, metric, problem.target, rows)
    if chance is None:
        return []
    where = "in the population" if math.isinf(rows) else f"on the next {rows:,} rows"
    line = f"outlook: {metric} >= {problem.target:g} {where} with probability about {chance:.2f}"
    if chance < LOW_OUTLOOK:
        line += f"; below {LOW_OUTLOOK:g}: --confidence 0.95 picks a threshold that holds with probability 0.95"
    return [line]
