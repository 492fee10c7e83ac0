"""`dmo monitor --time-col COL --every day|week|month|Nd` (and evaluate's): each row's period, named by its first
day, computed per record batch (or Dask partition) from COL alone, so both engines give every row the same period.

COL is read as `dmo train --time-col` reads it (prep/time_column.py). Periods are whole days of the instant as read:
UTC where the value carries a zone or an offset (a zoned timestamp, `...Z`, `+01:00`), the time as written where it
does not. A week starts on Monday (ISO 8601: `2026-03-02` names the week of Monday 2 March to Sunday 8 March); a
month on its first day (`2026-03-01`); `Nd` periods are N consecutive days counted from 1970-01-01 (pandas'
`origin="epoch"`), so a day falls in the same period in every run, whatever rows a run holds, and a history's rows
from runs on different files join on the same names. A period's name is its first day in ISO form, so names sort
as the periods follow each other.

A row whose time is missing or does not read falls in the section MISSING_TIME, which sorts after every period
("m" after any digit): its rows are counted, reported and gated like a period's, never written to a history (they
belong to no period), and a warning gives their count. Refusing them would stop a day's monitoring for one empty
cell; training refuses them instead, since there a row's place in the sequence decides which model scores it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dmocli.command_options import EVERY
from dmocli.errors import DmoError
from dmocli.prep import dates
from dmocli.prep.columns import is_date, is_numeric, is_string
from dmocli.prep.derive import DateRule, Derivation
from dmocli.prep.time_column import NUMBER, column_times, plain, text_rule

MISSING_TIME = "missing time"
UNITS = ("day", "week", "month")
EPOCH_WEEKDAY = dates.EPOCH_WEEKDAY  # 1970-01-01 was a Thursday (weekday 3; Monday is 0)


@dataclass(frozen=True)
class Every:
    """A period length: a day, a week from Monday, a calendar month, or N days from 1970-01-01."""

    unit: str  # "day", "week", "month" or "days" (N days)
    days: int = 1  # N of N days

    @classmethod
    def parse(cls, text: str) -> "Every":
        """`--every` as written: day, week, month, or Nd (a whole number of days from 1 to 99999, e.g. 7d), as the
        declared constraint (command_options.EVERY) admits it."""
        if not EVERY.admits(text):
            raise DmoError(f"--every {text!r} {EVERY.message}")
        spelled = text.strip().lower()
        return cls(spelled) if spelled in UNITS else cls("days", int(spelled[:-1]))

    def __str__(self) -> str:
        return f"{self.days}d" if self.unit == "days" else self.unit

    def starts(self, days: np.ndarray) -> np.ndarray:
        """The first day (days since 1970-01-01) of the period of each day in `days`."""
        if self.unit == "day":
            return days
        if self.unit == "week":
            return days - (days + EPOCH_WEEKDAY) % 7
        if self.unit == "month":
            months = days.astype("datetime64[D]").astype("datetime64[M]")
            return months.astype("datetime64[D]").astype(np.int64)
        return np.floor_divide(days, self.days) * self.days


@dataclass(frozen=True)
class PeriodKeys:
    """One batch's periods: each row's name (an ISO first day, or MISSING_TIME), and the order of day and month its
    text dates were read in (None: typed dates, ISO or names, or none that tell), for the merge to check."""

    names: np.ndarray  # object array, one name a row
    order: str | None = None


@dataclass(frozen=True)
class Periods:
    """--time-col COL --every E: how to name each row's period. `order`: the order of day and month of COL's
    numeric text dates where the model reads COL as a date feature (its stored rule); None: decided per batch."""

    column: str
    every: Every
    order: str | None = None

    @classmethod
    def of(cls, column: str, every: str, derivation: Derivation | None) -> "Periods":
        """COL's periods, its text dates read in the order the model's own rule for COL stores, where it has one."""
        rules = derivation.rules if derivation is not None else []
        rule = next((r for r in rules if isinstance(r, DateRule) and r.column == column), None)
        return cls(column, Every.parse(every), None if rule is None else rule.order)

    def missing_warnings(self, rows: int) -> list[str]:
        """What a run says of rows without a readable time: counted, in their own section, in no period."""
        if not rows:
            return []
        return [
            f"{rows:,} row(s) of NEW have no readable time in {self.column}: they are the section '{MISSING_TIME}', "
            "in no period (and no history row); fill in or correct their time"
        ]

    def column_problems(self, schema: pa.Schema, where: str) -> list[str]:
        """What keeps `schema`'s COL from naming periods, said before any row is read."""
        if self.column not in schema.names:
            return [f"--time-col {self.column!r} is not a column of {where}"]
        kind = schema.field(self.column).type
        kind = kind.value_type if pa.types.is_dictionary(kind) else kind
        if is_numeric(kind) and not pa.types.is_boolean(kind):
            return [
                f"--time-col {self.column} holds numbers, not dates: --every {self.every} needs dates or timestamps "
                f"(for a column of period numbers, give --chunk-col {self.column})"
            ]
        if not (is_string(kind) or is_date(kind) and not pa.types.is_time(kind) or pa.types.is_null(kind)):
            return [f"--time-col {self.column} holds {kind}, not dates or timestamps; name a column of times"]
        return []

    def keys(self, batch: pa.RecordBatch | pa.Table) -> PeriodKeys:
        """Each row's period name. A text column's order of day and month is this model's, or else decided from the
        batch's own values, as --dates decides a column's (the merge refuses batches that disagree)."""
        column = batch.column(self.column)
        values = plain(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
        if pa.types.is_null(values.type):
            return PeriodKeys(np.full(len(values), MISSING_TIME, dtype=object))
        order = self.order
        if order is None and is_string(values.type):
            rule, _ = text_rule(values, self.column)
            order = None if rule is None else rule.order
        times, ok = column_times(values, self.column, where="NEW", order=order)
        if times.kind == NUMBER:  # column_problems refuses it before the pass; a CSV on standard input may change
            raise DmoError(self.column_problems(pa.schema([(self.column, values.type)]), "NEW")[0])
        days = np.floor_divide(times.values[ok], dates.US_PER_DAY)
        starts, inverse = np.unique(self.every.starts(days), return_inverse=True)
        names = np.full(len(values), MISSING_TIME, dtype=object)
        names[ok] = np.datetime_as_string(starts.astype("datetime64[D]"), unit="D").astype(object)[inverse]
        return PeriodKeys(names, order if is_string(values.type) else None)


def merged_order(first: str | None, second: str | None, column: str) -> str | None:
    """The order of day and month two parts of NEW read COL's numeric dates in: one, or a refusal where they differ."""
    if first is not None and second is not None and first != second:
        raise DmoError(
            f"--time-col {column}: some rows' dates read {first} and others {second}, so their periods cannot be "
            "told; write the dates in ISO form (2026-03-02) or as a typed date column"
        )
    return first if first is not None else second
