"""Dates and timestamps read as instants, and the numeric parts `--dates parts` makes of them.

A date column reaches dmo typed (parquet's date and timestamp types; a CSV column whose every value is ISO) or as
text in mixed formats. Both are read to one representation, microseconds since 1970-01-01 UTC, so a column typed in
the training file and text in a later one (or the reverse) gives the same parts. A time with a zone or an offset is
converted to UTC, as arrow does for a typed column; a time without one is taken as written. Text is parsed with
arrow's regular expressions, not row by row in Python, so a column of millions of dates reads in seconds.

Text formats (case-insensitive, surrounding spaces ignored), each with an optional time of day (`T` or a space,
then `HH:MM`, `:SS`, `.fraction`, `AM`/`PM`, and `Z`, `UTC` or an offset `+01:00`):

- ISO order: `2024-01-31`, `2024/01/31`, `2024.01.31`;
- day and month in numbers: `31/01/2024`, `01-31-24`, `31.01.2024` (two-digit years: 00-68 are 2000-2068, 69-99
  are 1969-1999, as POSIX reads them); whether the day or the month comes first is decided for the whole column
  (DAY_FIRST or MONTH_FIRST), never value by value;
- month names in English: `31 Jan 2024`, `31-Jan-24`, `Jan 31, 2024`, `January 31 2024`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data.arrow_numpy import text_array, to_numpy

DAY_FIRST, MONTH_FIRST = "day-first", "month-first"
ORDERS = (DAY_FIRST, MONTH_FIRST)
PARTS = ("year", "month", "day", "weekday", "hour", "minute", "days_since")
TIME_PARTS = ("hour", "minute")  # only for a column that holds times of day
# Parts that move with time itself: no later period takes their training values again, so a model that leans on
# them meets values it never saw (and monitor sees them drift) from the first month after training. Made only on
# request (`--dates parts,trend`); the others recur (every year has its months, every week its weekdays).
TREND_PARTS = ("year", "days_since")
# What training rows must span more than one of for each part to vary, as a constant part's warning names it.
SPANS = {
    "year": "year",
    "month": "month",
    "day": "day of the month",
    "weekday": "day of the week",
    "hour": "hour of the day",
    "minute": "minute of the hour",
    "days_since": "day",
}
US_PER_DAY = 86_400_000_000
US_PER_MINUTE = 60_000_000
US_PER_HOUR = 3_600_000_000
EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday; weekday 0 is Monday

_TIME = (
    r"(?:(?:T|\s+)(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.,](?P<F>\d{1,9}))?)?"
    r"\s*(?P<ampm>[AP]M)?\s*(?P<tz>Z|UTC|GMT|[+-]\d{2}:?\d{2})?)?"
)
_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_FORMS = {
    "iso": rf"(?i)^(?P<y>\d{{4}})[-/.](?P<a>\d{{1,2}})[-/.](?P<b>\d{{1,2}}){_TIME}$",
    "numeric": rf"(?i)^(?P<a>\d{{1,2}})[-/.](?P<b>\d{{1,2}})[-/.](?P<y>\d{{4}}|\d{{2}}){_TIME}$",
    "day_name": rf"(?i)^(?P<b>\d{{1,2}})[-\s]+{_MONTH}[-\s,]+(?P<y>\d{{4}}|\d{{2}}){_TIME}$",
    "name_day": rf"(?i)^{_MONTH}\s+(?P<b>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}}){_TIME}$",
}
_MONTH_KEYS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# Cells read as missing rather than as a failed date or number: empty, and the markers exports write for none.
MISSING_MARKERS = ("", "na", "n/a", "nan", "null", "none", "#n/a", "?")


@functools.cache
def _as_arrow(values: tuple[str, ...]) -> pa.Array:
    """A value set as arrow, made once (not with pa.array: that imports pandas, which the streaming commands never
    load)."""
    return text_array(list(values))


def present_text(column: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """A text column trimmed, and which of its cells hold a value (not null, blank or a MISSING_MARKERS)."""
    text = pc.utf8_trim_whitespace(column.cast(pa.string()))
    missing = pc.or_kleene(pc.is_null(text), pc.is_in(pc.utf8_lower(text), value_set=_as_arrow(MISSING_MARKERS)))
    return text, ~to_numpy(missing.fill_null(True)).astype(bool)


@dataclass
class TextDates:
    """The pieces of each text cell (numpy arrays, one entry per row): which form matched (`form`, "" for none),
    the year, the two numbers before it (`a`, `b`: month and day in ISO order; day/month or month/day in the
    numeric form, resolved by `instants`), the time of day in microseconds (-1: not a valid time), the UTC offset
    in microseconds, and whether a time was written."""

    present: np.ndarray
    form: np.ndarray
    year: np.ndarray
    a: np.ndarray
    b: np.ndarray
    time_us: np.ndarray
    offset_us: np.ndarray
    has_time: np.ndarray

    @property
    def numeric(self) -> np.ndarray:
        """Cells written with day and month both in numbers and the year last: the order is the column's."""
        return self.form == "numeric"


def read_text(column: pa.Array) -> TextDates:
    """Every cell of a text column matched against the formats of the module docstring."""
    text, present = present_text(column)
    n = len(text)
    form = np.full(n, "", dtype=object)
    year, a, b = (np.zeros(n, dtype=np.int64) for _ in range(3))
    hour, minute, second, micros, offset = (np.zeros(n, dtype=np.int64) for _ in range(5))
    twelve, pm = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    has_time = np.zeros(n, dtype=bool)
    for name, pattern in _FORMS.items():
        found = pc.extract_regex(text, pattern)
        rows = np.flatnonzero(to_numpy(found.is_valid()).astype(bool) & (form == "") & present)
        if not rows.size:
            continue
        taken = found.take(pa.array(rows))
        form[rows] = name
        year[rows] = _ints(taken.field("y"))
        if name in ("day_name", "name_day"):  # month by name: a is the month, b the day, as in ISO order
            a[rows] = (
                to_numpy(
                    pc.index_in(
                        pc.utf8_slice_codeunits(pc.utf8_lower(taken.field("mon")), 0, 3), _as_arrow(_MONTH_KEYS)
                    )
                )
                + 1
            )
        else:
            a[rows] = _ints(taken.field("a"))
        b[rows] = _ints(taken.field("b"))
        hours = taken.field("H")
        has_time[rows] = to_numpy(pc.utf8_length(hours)) > 0
        hour[rows], minute[rows], second[rows] = _ints(hours), _ints(taken.field("M")), _ints(taken.field("S"))
        fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(taken.field("F"), 6, "0"), 0, 6)
        micros[rows] = _ints(fraction)
        marker = pc.utf8_upper(taken.field("ampm"))
        twelve[rows], pm[rows] = to_numpy(pc.utf8_length(marker)) > 0, to_numpy(pc.equal(marker, "PM"))
        offset[rows] = _offsets(taken.field("tz"))
    two_digit = (form == "numeric") & (year < 100) | (form == "day_name") & (year < 100)
    year = np.where(two_digit, np.where(year <= 68, 2000 + year, 1900 + year), year)
    valid_time = np.where(twelve, (hour >= 1) & (hour <= 12), hour <= 23) & (minute <= 59) & (second <= 59)
    hour = np.where(twelve, hour % 12 + np.where(pm, 12, 0), hour)
    time_us = np.where(valid_time, hour * US_PER_HOUR + minute * US_PER_MINUTE + second * 1_000_000 + micros, -1)
    return TextDates(present, form, year, a, b, time_us, offset, has_time)


def instants(dates: TextDates, order: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since 1970-01-01 UTC of each cell, and which cells are valid dates: a numeric-form cell
    read in `order` (None: the column never told, so only a cell whose two numbers are equal reads)."""
    month, day = dates.a.copy(), dates.b.copy()
    numeric = dates.numeric
    if order == DAY_FIRST:
        month[numeric], day[numeric] = dates.b[numeric], dates.a[numeric]
    ok = (dates.form != "") & (dates.time_us >= 0)
    if order is None:
        ok &= ~numeric | (dates.a == dates.b)
    days, ok = civil_days(dates.year, month, day, ok)
    return days * US_PER_DAY + np.maximum(dates.time_us, 0) - dates.offset_us, ok


def civil_days(year: np.ndarray, month: np.ndarray, day: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Days since 1970-01-01 of (year, month, day) rows, and `ok` narrowed to the rows that are calendar dates
    (month 1-12, a day the month has: 2023-02-29 is not one)."""
    ok = ok & (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31) & (year >= 1) & (year <= 9999)
    months = np.where(ok, (year - 1970) * 12 + month - 1, 0).astype("datetime64[M]")
    days = (months.astype("datetime64[D]") - np.datetime64("1970-01-01", "D")).astype(np.int64) + np.where(
        ok, day - 1, 0
    )
    in_month = days.astype("datetime64[D]").astype("datetime64[M]") == months  # the 31st of April rolls over
    return days, ok & in_month


def typed_instants(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since 1970-01-01 UTC of a typed date or timestamp column (arrow keeps a zoned timestamp in
    UTC already), and which rows hold one."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_date32(column.type):
        values = to_numpy(column.cast(pa.int32()).cast(pa.int64()), fill=0) * US_PER_DAY
    elif pa.types.is_date64(column.type):
        values = to_numpy(column.cast(pa.int64()), fill=0) * 1000
    else:
        micros = column.cast(pa.timestamp("us", tz=column.type.tz), safe=False)
        values = to_numpy(micros.cast(pa.int64()), fill=0)
    return values.astype(np.int64), to_numpy(column.is_valid()).astype(bool)


def asked_parts(*, with_time: bool, trend: bool) -> tuple[str, ...]:
    """The parts a column gets before those constant in training are dropped, in PARTS order: hour and minute only
    when it holds times of day, the TREND_PARTS only under `--dates parts,trend` (and in every model file written
    before they were left out of plain `parts`, which stores no list of its parts)."""
    return tuple(p for p in PARTS if (with_time or p not in TIME_PARTS) and (trend or p not in TREND_PARTS))


def parts(micros: np.ndarray, ok: np.ndarray, *, with_time: bool, reference_day: int) -> dict[str, np.ndarray]:
    """The parts of each instant as float64 (NaN where `ok` is False): year, month, day of month, weekday (0 is
    Monday), hour and minute (with_time only, in UTC), and days since `reference_day` (days since 1970-01-01; a
    fraction of a day with_time)."""
    days = np.floor_divide(micros, US_PER_DAY)
    day64 = days.astype("datetime64[D]")
    month64 = day64.astype("datetime64[M]")
    found = {
        "year": day64.astype("datetime64[Y]").astype(np.int64) + 1970,
        "month": month64.astype(np.int64) % 12 + 1,
        "day": (day64 - month64.astype("datetime64[D]")).astype(np.int64) + 1,
        "weekday": (days + EPOCH_WEEKDAY) % 7,
    }
    if with_time:
        of_day = micros - days * US_PER_DAY
        found["hour"] = of_day // US_PER_HOUR
        found["minute"] = of_day // US_PER_MINUTE % 60
        found["days_since"] = (micros - reference_day * US_PER_DAY) / US_PER_DAY
    else:
        found["days_since"] = days - reference_day
    return {name: np.where(ok, values, np.nan) for name, values in found.items()}


@dataclass
class Span:
    """What a pass over a column's valid instants learns, batch by batch, of which parts vary: the days seen (each
    once: the date parts' ranges then come from a few hundred days, not from every row), the earliest and latest
    instant, and the range of the hour and the minute."""

    days: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    instants: tuple[int, int] = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
    hours: tuple[int, int] = (24, -1)
    minutes: tuple[int, int] = (60, -1)

    def add(self, micros: np.ndarray) -> None:
        if not micros.size:
            return
        days = np.floor_divide(micros, US_PER_DAY)
        self.days = np.union1d(self.days, np.unique(days))
        of_day = micros - days * US_PER_DAY
        hour, minute = of_day // US_PER_HOUR, of_day // US_PER_MINUTE % 60
        self.instants = _widened(self.instants, micros)
        self.hours, self.minutes = _widened(self.hours, hour), _widened(self.minutes, minute)

    def ranges(self, reference_day: int) -> dict[str, tuple[float, float]]:
        """Each part's lowest and highest value over the instants seen (none seen: no part)."""
        if not self.days.size:
            return {}
        found = parts(self.days * US_PER_DAY, np.ones(self.days.size, dtype=bool), with_time=False, reference_day=0)
        ranges = {part: (float(values.min()), float(values.max())) for part, values in found.items()}
        since = tuple((instant - reference_day * US_PER_DAY) / US_PER_DAY for instant in self.instants)
        return {**ranges, "hour": _floats(self.hours), "minute": _floats(self.minutes), "days_since": since}


def _floats(bounds: tuple[int, int]) -> tuple[float, float]:
    return float(bounds[0]), float(bounds[1])


def _widened(bounds: tuple[int, int], values: np.ndarray) -> tuple[int, int]:
    return min(bounds[0], int(values.min())), max(bounds[1], int(values.max()))


def day_text(day: int) -> str:
    """Days since 1970-01-01 as an ISO date (the reference the model file stores)."""
    return str(np.datetime64(int(day), "D"))


def day_number(text: str) -> int:
    """An ISO date as days since 1970-01-01; ValueError for anything else."""
    if not isinstance(text, str) or len(text) != 10:
        raise ValueError(f"{text!r} is not an ISO date (YYYY-MM-DD)")
    return int(np.datetime64(text, "D").astype(np.int64))


def _ints(texts: pa.Array) -> np.ndarray:
    """Digit groups as int64 (an empty group, one that did not take part in the match, as 0)."""
    filled = pc.if_else(pc.equal(pc.utf8_length(texts), 0), "0", texts)
    return to_numpy(pc.cast(filled, pa.int64()), fill=0).astype(np.int64)


def _offsets(zones: pa.Array) -> np.ndarray:
    """A UTC offset (`+01:00`, `-0530`, `Z`, `UTC`, none) in microseconds east of UTC."""
    found = pc.extract_regex(zones, r"^(?P<sign>[+-])(?P<h>\d{2}):?(?P<m>\d{2})$")
    minutes = _ints(found.field("h")) * 60 + _ints(found.field("m"))
    west = to_numpy(pc.equal(found.field("sign"), "-"))
    return np.where(west, -minutes, minutes) * US_PER_MINUTE
