"""A time column read as the instants of its rows: `dmo train --time-col` (pipelines/time_blocks.py, which refuses a
row without one) and `dmo monitor --time-col COL --every` (prep/periods.py, which counts such rows apart) read it
alike, so a column that orders training's blocks names monitor's periods in the same way.

COL is read as `--dates` reads a date column (typed dates and timestamps, text in the forms of prep/dates.py, the
order of day and month decided for the whole column, or a batch's worth of it) or, a number column, as numbers in
its own units (epoch seconds, a period index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dmocli.data.arrow_numpy import to_numpy
from dmocli.errors import DmoError
from dmocli.prep import dates
from dmocli.prep.columns import is_date, is_numeric, is_string
from dmocli.prep.derive import DateRule, Derivation

NAMED_ROWS = 5  # rows a message names
INSTANT, NUMBER = "instant", "number"


@dataclass(frozen=True)
class Times:
    """The time of each row: microseconds since 1970-01-01 UTC (`kind` INSTANT) or the column's numbers (NUMBER),
    with how a text column's day and month were ordered (for --val to read its column alike)."""

    column: str
    values: np.ndarray  # int64 microseconds, or float64 numbers
    kind: str
    order: str | None = None

    def text(self, value: Any) -> str:
        """One time as the report and the summary write it: an ISO date (a time of day too, where any row has one),
        or the number."""
        if self.kind == NUMBER:
            number = float(value)
            return str(int(number)) if number.is_integer() else f"{number:g}"
        micros = int(value)
        if self.whole_days:
            return str(np.datetime64(micros // dates.US_PER_DAY, "D"))
        unit = "s" if micros % 1_000_000 == 0 else "us"
        return str(np.datetime64(micros // (1_000_000 if unit == "s" else 1), unit))

    @property
    def whole_days(self) -> bool:
        return self.kind == INSTANT and bool(np.all(self.values % dates.US_PER_DAY == 0))

    def take(self, rows: np.ndarray) -> "Times":
        return Times(self.column, self.values[rows], self.kind, self.order)

    def span(self) -> tuple[Any, Any]:
        """(first, last) as numbers of the column's kind."""
        return self.values.min(), self.values.max()


def read_times(table: pa.Table, column: str, rows: np.ndarray, *, where: str, order: str | None = None) -> Times:
    """The times of `rows` (increasing positions) of `table`'s `column`; `where` names the table in a refusal
    ("DATA", "--val FILE"). `order`: read a text column's numeric dates as another table's were (DATA's, for
    --val); None decides it from the column, as --dates parts does. A row of `rows` without a time is refused."""
    if column not in table.schema.names:
        raise DmoError(f"--time-col {column}: {where} has no column '{column}' (name the column that holds the time)")
    values = plain(table.column(column).combine_chunks())
    if is_string(values.type) and order is None:
        rule, problems = text_rule(values, column)
        if rule is None:
            why = "; ".join(problems) if problems else "its values do not read as dates"
            raise DmoError(f"--time-col {column}: {where}'s {why} (name a column of dates, timestamps or numbers)")
        order = rule.order
    found, ok = column_times(values, column, where=where, order=order)
    _refuse_unread(values, ok, rows, column=column, where=where)
    return found.take(rows)


def plain(values: pa.Array) -> pa.Array:
    """A dictionary-encoded column as its values' type (a CSV reader's or parquet writer's choice, not the data's)."""
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def column_times(values: pa.Array, column: str, *, where: str, order: str | None) -> tuple[Times, np.ndarray]:
    """Every row's time of a plain (not dictionary) column, and which rows have one: a text column's numeric dates
    read in `order` (None: only those whose day and month are equal read)."""
    kind = values.type
    if is_date(kind) and not pa.types.is_time(kind):
        micros, ok = dates.typed_instants(values)
        return Times(column, micros, INSTANT), ok
    if is_numeric(kind) and not pa.types.is_boolean(kind):
        whole = pa.types.is_integer(kind)  # int64 keeps epoch microseconds exact, past float64's 2^53
        numbers = values.cast(pa.int64() if whole else pa.float64()).fill_null(0 if whole else np.nan).to_numpy()
        ok = to_numpy(values.is_valid()).astype(bool) & (True if whole else np.isfinite(numbers))
        return Times(column, numbers, NUMBER), ok
    if is_string(kind):
        micros, ok = dates.instants(dates.read_text(values), order)
        return Times(column, micros, INSTANT, order), ok
    raise DmoError(
        f"--time-col {column}: {where}'s column holds {kind}, not dates, timestamps or numbers; name a column of times"
    )


def text_rule(values: pa.Array, column: str) -> tuple[DateRule | None, list[str]]:
    """How --dates parts would read a text column (prep/derive.py): its rule, with the order of day and month
    decided for the whole of `values`, or None and the problems that kept it from reading as dates."""
    table = pa.table({column: values})
    read = lambda names: table.select(names).to_batches()  # noqa: E731
    derivation, problems = Derivation.survey(table.schema, read, exclude=[], dates_mode="parts", parse_numbers=False)
    rule = derivation.rules[0] if derivation.rules else None
    return (rule, problems) if isinstance(rule, DateRule) else (None, problems)


def _refuse_unread(values: pa.Array, ok: np.ndarray, rows: np.ndarray, *, column: str, where: str) -> None:
    """A row of `rows` without a readable time is refused: counted, the first few named by their data row."""
    bad = rows[~ok[rows]]
    if not bad.size:
        return
    shown = values.take(pa.array(bad[:NAMED_ROWS])).cast(pa.string()).to_pylist()
    named = ", ".join(f"{row + 1} {'(empty)' if value is None else repr(value)}" for row, value in zip(bad, shown))
    raise DmoError(
        f"--time-col {column}: {bad.size:,} row(s) of {where} have no readable time (data row(s) {named}), so their "
        "place in time is unknown; fill in or correct their time, or remove those rows"
    )
