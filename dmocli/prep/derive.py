"""The preparation a user would otherwise script, fitted once and stored in the model: `--dates parts` turns each
date or timestamp column into numeric parts, `--parse-numbers` reads numbers written for people as numbers.

`Derivation.survey` decides, from the training data, which columns are dates (typed, or text of which at least
CANDIDATE_SHARE of the values read as dates) and which are numbers written as text, how each is read (day or month
first, the decimal mark) and the reference day of `days_since`; it names every value that does not read, by its
data row (1 is the first row after a CSV's header). `Derivation.apply` then turns raw batches into batches of
numbers, the same way in training, evaluate, predict and monitor: the Preprocessor stores it (prep/features.py)
and applies it before its own encoding. A date column `when` becomes the parts that recur, `when.month`,
`when.day`, `when.weekday` (0 is Monday), `when.hour` and `when.minute` (only when it holds times of day; UTC), in
its place among the columns; `--dates parts,trend` adds the trend, `when.year` and `when.days_since` (days since
the earliest training date), which no later period matches: stored as trends (`Derivation.trends`), so what reads
a model can expect them to drift. A part with one value in every training row is dropped, with a warning
(`Derivation.warnings`). A model file written before parts were chosen stores no list of them and is read as it
was written: every part, trend included. A parsed number column keeps its name. A missing cell is a missing value
of every part, filled as `--impute` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa

from dmocli.errors import DmoError
from dmocli.prep import dates, human_numbers
from dmocli.prep.columns import OFFSET_PREFIX, is_date, is_numeric, is_string
from dmocli.prep.date_rule import DateRule

CANDIDATE_SHARE = 0.9  # a text column is a date (number) column when this share of its values reads as one
NAMED_ROWS = 5  # failing rows a message names
_FIX_EMPTY = "empty a cell that has no value (a missing value, filled as --impute says)"


@dataclass
class NumberRule:
    """How one column of numbers written as text is read: its decimal mark, and the unit training wrote it in:
    `currency` (one name, `$` and `USD` alike; "" for none) and `percent` (True: every value a percent, False:
    none, None: both). None for both in a model file written before units were kept: no unit is checked."""

    column: str
    decimal: str
    currency: str | None = None
    percent: bool | None = None

    @property
    def outputs(self) -> list[str]:
        return [self.column]

    def values(self, column: pa.Array) -> tuple[dict[str, np.ndarray], np.ndarray]:
        values, bad, _ = self.read(column)
        return values, bad

    def read(self, column: pa.Array) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The numbers, the cells that do not read, and (a subset of those) the cells written in another unit than
        training's: `€483.18` or `483.18%` beside a model of `$483.18` would score another magnitude as the same
        number. A cell without a currency is taken in training's; a percent sign must be where training had it."""
        if not is_string(column.type):  # numbers already (a clean file at predict time)
            none = np.zeros(len(column), dtype=bool)
            return {self.column: _floats(column)}, none, none
        text = human_numbers.read_text(_decoded(column))
        values, ok = text.values(self.decimal)
        foreign = np.zeros(len(column), dtype=bool)
        rows = np.flatnonzero(ok)
        if rows.size and (self.currency or self.percent is not None):
            units = text.units(rows)
            currencies = np.array([u.removesuffix("%") for u in units], dtype=object)
            percents = np.array([u.endswith("%") for u in units], dtype=bool)
            wrong = np.zeros(rows.size, dtype=bool)
            if self.currency:
                wrong |= (currencies != "") & (currencies != self.currency)
            if self.percent is not None:
                wrong |= percents != self.percent
            foreign[rows[wrong]] = True
        ok &= ~foreign
        return {self.column: np.where(ok, values, np.nan)}, text.present & ~ok, foreign

    def unit(self) -> str:
        """Training's unit in words, for a message."""
        said = [f"in {self.currency}"] if self.currency else []
        said += [] if self.percent is None else ["as percents (12%)" if self.percent else "without a percent sign"]
        return " and ".join(said) or "as plain numbers"


Rule = DateRule | NumberRule


@dataclass
class Derivation:
    """The fitted rules, by source column, in the data's column order."""

    rules: list[Rule] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def source_of(self, name: str) -> str:
        """The raw column a derived column comes from (itself when not derived)."""
        return next((rule.column for rule in self.rules if name in rule.outputs), name)

    def inputs(self, names: Iterable[str]) -> list[str]:
        """The raw columns behind derived `names`, each once, in order."""
        return list(dict.fromkeys(self.source_of(name) for name in names))

    @property
    def text_sources(self) -> list[str]:
        """The source columns a CSV reader should keep as text (their formats may differ from file to file)."""
        return [rule.column for rule in self.rules]

    def schema(self, schema: pa.Schema) -> pa.Schema:
        """`schema` as `apply` turns it: each source replaced by its float64 outputs."""
        fields = []
        for f in schema:
            rule = self._rule(f.name)
            fields += [pa.field(name, pa.float64()) for name in rule.outputs] if rule else [f]
        return pa.schema(fields)

    def kind_problems(self, schema: pa.Schema) -> list[str]:
        """Source columns present in `schema` as a kind no rule reads."""
        wrong = []
        for rule in self.rules:
            if rule.column in schema.names:
                kind = schema.field(rule.column).type
                fits = is_string(kind) or pa.types.is_null(kind)
                fits |= is_date(kind) and not pa.types.is_time(kind) if isinstance(rule, DateRule) else is_numeric(kind)
                if not fits:
                    wrong.append(f"{rule.column} ({kind})")
        if not wrong:
            return []
        return [f"column(s) {', '.join(wrong)} are not the dates or numbers the model was trained to read there"]

    def present(self, name: str, names: set[str]) -> bool:
        """Whether raw column `name` is there, or already derived into its outputs."""
        rule = self._rule(name)
        return name in names or (rule is not None and all(out in names for out in rule.outputs))

    def apply(self, batch: pa.RecordBatch | pa.Table, strict: bool = True) -> pa.RecordBatch | pa.Table:
        """The batch with every source column replaced by its outputs (a batch derived already is returned as is).
        A value that does not read is refused (strict) or missing (the survey, which names it already)."""
        arrays, names, problems = [], [], []
        changed = False
        for name, column in zip(batch.schema.names, batch.columns):
            rule = self._rule(name)
            if rule is None:
                arrays.append(column)
                names.append(name)
                continue
            changed = True
            if not rule.outputs:  # every part constant in training: the column gives no feature, and is not read
                continue
            column = _decoded(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
            values, bad, foreign = rule.read(column) if isinstance(rule, NumberRule) else (*rule.values(column), None)
            if strict and foreign is not None and foreign.any():
                problems.append(_foreign(rule, column, foreign))
                bad &= ~foreign
            if strict and bad.any():
                problems.append(_unread(rule, column, bad))
            for out, numbers in values.items():
                arrays.append(pa.array(numbers, type=pa.float64(), from_pandas=True))
                names.append(out)
        if problems:
            raise DmoError("; ".join(problems))
        if not changed:
            return batch
        return (pa.Table if isinstance(batch, pa.Table) else pa.RecordBatch).from_arrays(arrays, names=names)

    def report(self) -> dict[str, Any]:
        """What `dmo check` and the train report say of the derived columns."""
        return {rule.column: _described(rule) for rule in self.rules}

    def trends(self) -> list[str]:
        """The derived columns that move with time itself (a date's year and days_since), in column order."""
        return [name for rule in self.rules if isinstance(rule, DateRule) for name in rule.trends]

    def warnings(self) -> list[str]:
        """What training says of the derivation: one warning per date column with parts dropped as constant."""
        return [w for rule in self.rules if isinstance(rule, DateRule) for w in [rule.warning()] if w]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dates": [r.to_dict() for r in self.rules if isinstance(r, DateRule)],
            "numbers": [_number_dict(r) for r in self.rules if isinstance(r, NumberRule)],
            "order": [r.column for r in self.rules],
        }

    @classmethod
    def from_dict(cls, data: Any) -> "Derivation":
        """The stored rules, every value checked (a ValueError names the malformed one)."""
        if not isinstance(data, dict):
            raise ValueError("preprocessing.derive is not a JSON object")
        rules: dict[str, Rule] = {}
        for item in data["dates"]:
            rules[str(item["column"])] = DateRule.from_dict(item)
        for item in data["numbers"]:
            currency, percent = item.get("currency"), item.get("percent")
            if (
                item["decimal"] not in (human_numbers.POINT, human_numbers.COMMA)
                or not isinstance(currency, (str, type(None)))
                or not isinstance(percent, (bool, type(None)))
            ):
                raise ValueError(f"preprocessing.derive has a malformed number rule: {item!r}")
            rules[str(item["column"])] = NumberRule(str(item["column"]), item["decimal"], currency, percent)
        if sorted(data["order"]) != sorted(rules):
            raise ValueError("preprocessing.derive's order does not name its rules' columns")
        return cls([rules[name] for name in data["order"]])

    def _rule(self, name: str) -> Rule | None:
        return next((rule for rule in self.rules if rule.column == name), None)

    # ---- fitting ---------------------------------------------------------------------------------------------
    @classmethod
    def survey(
        cls,
        schema: pa.Schema,
        read: Callable[[list[str]], Iterable[pa.RecordBatch]],
        *,
        exclude: Iterable[str],
        dates_mode: str,
        parse_numbers: bool,
    ) -> tuple["Derivation", list[str]]:
        """The rules for `schema`'s columns (not `exclude`: the label, --drop), from one pass over the candidate
        columns (`read(columns)` yields their batches, in row order), and every problem found, rows named."""
        exclude = set(exclude)
        want_dates = dates_mode != "refuse"
        candidates = [
            f.name
            for f in schema
            if f.name not in exclude
            and not f.name.startswith(OFFSET_PREFIX)
            and (
                (want_dates and is_date(f.type) and not pa.types.is_time(f.type))
                or (is_string(f.type) and (want_dates or parse_numbers))
            )
        ]
        if not candidates:
            return cls(), []
        trend = dates_mode == "parts,trend"
        tallies = {name: _Tally(want_dates, parse_numbers, trend=trend) for name in candidates}
        start = 0
        for batch in read(candidates):
            for name in candidates:
                column = batch.column(name)
                tallies[name].add(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column, start)
            start += batch.num_rows
        rules, problems = [], []
        for name in candidates:
            rule, found = tallies[name].decide(name)
            rules += [rule] if rule is not None else []
            problems += found
        taken = {out for rule in rules for out in rule.outputs if out != rule.column}
        clash = sorted(taken & set(schema.names))
        if clash:
            problems.append(
                f"--dates parts makes column(s) {', '.join(clash)}, which the data has already; rename or --drop them"
            )
        return cls(rules), problems


class _Tally:
    """What one pass learns of a candidate column: counts, the rows that read or fail under each reading, the
    earliest date and each part's lowest and highest value under each order."""

    def __init__(self, want_dates: bool, parse_numbers: bool, *, trend: bool = False):
        self.want_dates, self.parse_numbers, self.trend = want_dates, parse_numbers, trend
        self.typed = False
        self.present = self.date_shaped = self.number_shaped = 0
        self.with_time = False
        self.spans: dict[Any, dates.Span] = {}  # the valid dates under each order
        self.rows: dict[str, list[tuple[int, str]]] = {}  # kind of evidence or failure -> (row, value), first few
        self.counts: dict[str, int] = {}
        self.currencies: dict[str, tuple[int, str]] = {}
        self.percents = {True: 0, False: 0}  # number-shaped cells written with and without a percent sign

    def note(self, kind: str, rows: np.ndarray, start: int, column: pa.Array) -> None:
        if not rows.size:
            return
        self.counts[kind] = self.counts.get(kind, 0) + int(rows.size)
        kept = self.rows.setdefault(kind, [])
        if len(kept) < NAMED_ROWS:
            chosen = rows[: NAMED_ROWS - len(kept)]
            kept += zip((start + chosen + 1).tolist(), column.take(pa.array(chosen)).cast(pa.string()).to_pylist())

    def add(self, column: pa.Array, start: int) -> None:
        if not is_string(column.type):  # a typed date column
            self.typed = True
            micros, ok = dates.typed_instants(column)
            self.with_time |= pa.types.is_timestamp(
                column.type.value_type if pa.types.is_dictionary(column.type) else column.type
            )
            self._span(None, micros, ok)
            return
        column = _decoded(column)
        if self.want_dates:
            text = dates.read_text(column)
            self.present = self.present + int(text.present.sum())
            self.date_shaped += int((text.form != "").sum())
            self.with_time |= bool(text.has_time.any())
            readings = {order: dates.instants(text, order) for order in (*dates.ORDERS, None)}
            for order, (micros, ok) in readings.items():
                self._span(order, micros, ok)
                self.note(f"bad date {order}", np.flatnonzero(text.present & ~ok), start, column)
            day_ok, month_ok = readings[dates.DAY_FIRST][1], readings[dates.MONTH_FIRST][1]
            self.note(dates.DAY_FIRST, np.flatnonzero(text.numeric & day_ok & ~month_ok), start, column)
            self.note(dates.MONTH_FIRST, np.flatnonzero(text.numeric & month_ok & ~day_ok), start, column)
            self.note(
                "either order", np.flatnonzero(text.numeric & day_ok & month_ok & (text.a != text.b)), start, column
            )
        if self.parse_numbers:
            numbers = human_numbers.read_text(column)
            if not self.want_dates:
                self.present += int(numbers.present.sum())
            self.number_shaped += int(numbers.shaped.sum())
            shaped = numbers.shaped
            self.note("point only", np.flatnonzero(shaped & numbers.point_ok & ~numbers.comma_ok), start, column)
            self.note("comma only", np.flatnonzero(shaped & numbers.comma_ok & ~numbers.point_ok), start, column)
            self.note(
                "dot groups",
                np.flatnonzero(shaped & numbers.point_ok & numbers.comma_ok & numbers.dotted),
                start,
                column,
            )
            for decimal in (human_numbers.POINT, human_numbers.COMMA):
                self.note(
                    f"bad number {decimal}",
                    np.flatnonzero(numbers.present & ~numbers.values(decimal)[1]),
                    start,
                    column,
                )
            self.percents[True] += int((shaped & numbers.percent).sum())
            self.percents[False] += int((shaped & ~numbers.percent).sum())
            for name, row in numbers.currencies(np.flatnonzero(shaped)).items():
                if name not in self.currencies:
                    self.currencies[name] = (start + row + 1, column[row].as_py())

    def _span(self, order: Any, micros: np.ndarray, ok: np.ndarray) -> None:
        if ok.any():
            self.spans.setdefault(order, dates.Span()).add(micros[ok])

    def _date_parts(self, order: Any, reference: int) -> tuple[tuple[str, ...], dict[str, float]]:
        """The parts asked for that vary over the training rows read in `order`, and the constant ones with their
        value (days_since: days past `reference`, the earliest day)."""
        ranges = self.spans[order].ranges(reference) if order in self.spans else {}
        asked = dates.asked_parts(with_time=self.with_time, trend=self.trend)
        constant = {part: ranges[part][0] for part in asked if part in ranges and ranges[part][0] == ranges[part][1]}
        return tuple(part for part in asked if part not in constant), constant

    def decide(self, name: str) -> tuple[Rule | None, list[str]]:
        """The column's rule (None: it stays as it is) and its problems."""
        if self.typed:
            if None not in self.spans:
                return None, []  # no date at all: survey_columns and the Preprocessor name the empty column
            return self._dated(name, None), []
        if self.present and self.want_dates and self.date_shaped >= CANDIDATE_SHARE * self.present:
            return self._date_rule(name)
        if self.present and self.parse_numbers and self.number_shaped >= CANDIDATE_SHARE * self.present:
            return self._number_rule(name)
        return None, []

    def _date_rule(self, name: str) -> tuple[Rule | None, list[str]]:
        day_first, month_first = self.rows.get(dates.DAY_FIRST), self.rows.get(dates.MONTH_FIRST)
        if day_first and month_first:
            return None, [
                f"column '{name}' writes dates day first ({_named(day_first[:1])}) and month first "
                f"({_named(month_first[:1])}); write them one way (YYYY-MM-DD reads alike everywhere)"
            ]
        order = dates.DAY_FIRST if day_first else dates.MONTH_FIRST if month_first else None
        if order is None and self.rows.get("either order"):
            return None, [
                f"column '{name}': no date tells whether the day or the month comes first "
                f"({_named(self.rows['either order'][:2])} read either way); write them as YYYY-MM-DD"
            ]
        failed = self.rows.get(f"bad date {order}", [])
        problems = []
        if failed:
            count = self.counts[f"bad date {order}"]
            how = "" if order is None else f", read {order} as the column's other dates are"
            problems.append(
                f"column '{name}': {count} value(s) are not dates{how} ({_named(failed)}); write them as YYYY-MM-DD, "
                f"or {_FIX_EMPTY}"
            )
        return self._dated(name, order), problems

    def _dated(self, name: str, order: Any) -> DateRule:
        earliest = int(self.spans[order].days[0]) if order in self.spans else 0
        kept, constant = self._date_parts(order, earliest)
        return DateRule(name, order, self.with_time, dates.day_text(earliest), kept, constant)

    def _number_rule(self, name: str) -> tuple[Rule | None, list[str]]:
        point, comma = self.rows.get("point only"), self.rows.get("comma only")
        problems = []
        if len(self.currencies) > 1:
            shown = ", ".join(f"{code} ({_named([(row, value)])})" for code, (row, value) in self.currencies.items())
            problems.append(
                f"column '{name}' holds amounts in several currencies ({shown}); convert them to one currency, or "
                f"--drop {name}"
            )
        if point and comma:
            problems.append(
                f"column '{name}' writes numbers with a decimal point ({_named(point[:1])}) and a decimal comma "
                f"({_named(comma[:1])}); write them one way"
            )
            return None, problems
        if not point and not comma and self.rows.get("dot groups"):
            problems.append(
                f"column '{name}': no value tells whether '.' is a decimal point or a thousands separator "
                f"({_named(self.rows['dot groups'][:2])}); write one value with its decimals (1.500,00 or "
                "1,500.00), or the numbers without thousands separators"
            )
            return None, problems
        decimal = human_numbers.COMMA if comma else human_numbers.POINT
        failed = self.rows.get(f"bad number {decimal}", [])
        if failed:
            mark = "comma" if decimal == human_numbers.COMMA else "point"
            problems.append(
                f"column '{name}': {self.counts[f'bad number {decimal}']} value(s) are not numbers (with a decimal "
                f"{mark}, as the column's other values) ({_named(failed)}); correct them, or {_FIX_EMPTY}"
            )
        currency = next(iter(self.currencies)) if len(self.currencies) == 1 else ""
        percent = None if all(self.percents.values()) else bool(self.percents[True])
        return NumberRule(name, decimal, currency, percent), problems


def _named(rows: list[tuple[int, str]]) -> str:
    """`data rows 4 '31/31/2024', 9 'yesterday'`: the rows a message names, with their values."""
    listed = ", ".join(f"{row} {value!r}" for row, value in rows)
    return f"data row{'s' if len(rows) > 1 else ''} {listed}"


def _unread(rule: Rule, column: pa.Array, bad: np.ndarray) -> str:
    """A value that does not read as the model reads its column, at evaluate or predict time (named by value: a
    batch does not know its rows' places in the file)."""
    shown = ", ".join(map(repr, column.filter(pa.array(bad)).cast(pa.string()).to_pylist()[:NAMED_ROWS]))
    what = "dates" if isinstance(rule, DateRule) else "numbers"
    return (
        f"column '{rule.column}' holds {int(bad.sum())} value(s) that are not {what} as the model reads them "
        f"({_described(rule)['read']}): {shown}; correct them, or {_FIX_EMPTY}"
    )


def _foreign(rule: NumberRule, column: pa.Array, foreign: np.ndarray) -> str:
    """Values in another unit than training's, at evaluate or predict time: refused as values that do not read
    are, since scored they would be numbers of another magnitude (`€483.18` as `$483.18`, `12%` as 0.12 where
    training wrote 12)."""
    shown = ", ".join(map(repr, column.filter(pa.array(foreign)).cast(pa.string()).to_pylist()[:NAMED_ROWS]))
    return (
        f"column '{rule.column}' holds {int(foreign.sum())} value(s) in another unit than the model was trained on "
        f"(written {rule.unit()}): {shown}; convert them to that unit, or {_FIX_EMPTY}"
    )


def _number_dict(rule: NumberRule) -> dict[str, Any]:
    """A number rule as stored: its unit only where training's was found (a file read before units were kept has
    none, and is read as it was)."""
    unit = {} if rule.currency is None else {"currency": rule.currency, "percent": rule.percent}
    return {"column": rule.column, "decimal": rule.decimal, **unit}


def _described(rule: Rule) -> dict[str, Any]:
    if isinstance(rule, DateRule):
        order = rule.order or "ISO order (year first)"
        return {
            "kind": "date",
            "read": f"dates, {order}",
            "parts": rule.outputs,
            "trend": rule.trends,
            "constant": {f"{rule.column}.{part}": value for part, value in rule.constant.items()},
            "reference": rule.reference,
        }
    mark = "comma" if rule.decimal == human_numbers.COMMA else "point"
    return {"kind": "number", "read": f"numbers with a decimal {mark}", "decimal": rule.decimal}


def _decoded(column: pa.Array) -> pa.Array:
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def _floats(column: pa.Array) -> np.ndarray:
    return np.asarray(_decoded(column).cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
