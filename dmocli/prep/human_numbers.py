"""Numbers written for people (`$1,234.50`, `1.234,50 EUR`, `12%`, `(300)`) read as the numbers they mean.

`--parse-numbers` reads such a text column as float64. A cell is an optional sign or accounting parentheses (a
negative), an optional currency (a symbol such as `$`, `€`, `£`, `¥`, or a three-letter code such as `EUR`,
before or after the digits), the digits with optional thousands separators (`,`, `.`, `'` or a space) and decimal
part, and an optional `%` (a percent is a fraction: `12%` is 0.12).

Whether `.` or `,` is the decimal mark is decided for the whole column (POINT or COMMA), never cell by cell:
`1,234.50` or `12.5` say POINT, `1.234,50` or `12,5` say COMMA. A column whose only separators are commas before
three digits (`1,234`) reads them as thousands (POINT); one that shows both conventions, or only dots before three
digits (`1.500`: 1.5 or 1500?), is refused with its rows named. A column holding two currencies is refused too:
its amounts could not be compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data.arrow_numpy import to_numpy
from dmocli.prep.dates import present_text

POINT, COMMA = ".", ","
_CURRENCY = r"[$€£¥₹₩₽₺₪฿]|[A-Z]{1,2}\$|[A-Z]{3}"
_CELL = (
    rf"^(?P<open>\()?\s*(?P<sign>[-+−])?\s*(?P<cur1>{_CURRENCY})?\s*(?P<sign2>[-+−])?\s*"
    r"(?P<num>\d[\d.,' \x{a0}\x{202f}]*\d|\d|[.,]\d+)\s*(?P<pct>%)?\s*"
    rf"(?P<cur2>{_CURRENCY})?\s*(?P<close>\))?$"
)
_GROUP = r"[' \x{a0}\x{202f}]"
_GRAMMAR = {
    POINT: rf"^(?:\d{{1,3}}(?:(?:,|{_GROUP})\d{{3}})+|\d*)(?:\.\d+)?$",
    COMMA: rf"^(?:\d{{1,3}}(?:(?:\.|{_GROUP})\d{{3}})+|\d*)(?:,\d+)?$",
}
_SAME_CURRENCY = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP"}


@dataclass
class TextNumbers:
    """Each text cell read both ways (numpy arrays, one entry per row): whether it holds a value, whether it has the
    shape of a number written for people (`shaped`), whether the digits read under each convention (`point_ok`,
    `comma_ok`) and the value so read, whether the two readings differ (a `.` or `,` in it), whether it writes a dot
    between digit groups, and its currency as written ("" for none)."""

    present: np.ndarray
    shaped: np.ndarray
    point_ok: np.ndarray
    comma_ok: np.ndarray
    point_value: np.ndarray
    comma_value: np.ndarray
    differs: np.ndarray
    dotted: np.ndarray
    currency: pa.Array
    percent: np.ndarray

    def units(self, rows: np.ndarray) -> np.ndarray:
        """The unit each cell at `rows` is written in: its currency (`$` and `USD` are one) and `%` for a percent,
        as text ("USD", "%", "USD%" or "" for a plain number)."""
        written = np.asarray(self.currency.take(pa.array(rows)).to_pylist(), dtype=object)
        named = np.array([currency_name(w) for w in written], dtype=object)
        return named + np.where(self.percent[rows], "%", "")

    def currencies(self, rows: np.ndarray) -> dict[str, int]:
        """The currencies written in the cells at `rows` (`$` and `USD` are one), each with the first of those
        rows that writes it."""
        first: dict[str, int] = {}
        chosen = self.currency.take(pa.array(rows))
        for written in pc.unique(chosen).to_pylist():
            if written:
                at = int(rows[pc.index(chosen, written).as_py()])
                name = currency_name(written)
                first[name] = min(first.get(name, at), at)
        return first

    def values(self, decimal: str) -> tuple[np.ndarray, np.ndarray]:
        """The numbers under the column's decimal mark, and which cells read as numbers."""
        if decimal == POINT:
            return self.point_value, self.shaped & self.point_ok
        return self.comma_value, self.shaped & self.comma_ok


def currency_name(written: str) -> str:
    """One name for a currency however it is written: `$`, `US$` and `USD` are USD; "" for none."""
    return _SAME_CURRENCY.get(written, written)


def read_text(column: pa.Array) -> TextNumbers:
    """Every cell of a text column read under both decimal conventions (see the module docstring)."""
    text, present = present_text(column)
    found = pc.extract_regex(text, _CELL)
    shaped = to_numpy(found.is_valid()).astype(bool) & present
    parens = pc.and_(pc.equal(found.field("open"), "("), pc.equal(found.field("close"), ")"))
    unbalanced = pc.not_equal(pc.utf8_length(found.field("open")), pc.utf8_length(found.field("close")))
    minus = pc.or_(
        pc.is_in(found.field("sign"), pa.array(["-", "−"])), pc.is_in(found.field("sign2"), pa.array(["-", "−"]))
    )
    shaped &= ~to_numpy(unbalanced.fill_null(False)).astype(bool)
    sign = np.where(to_numpy(pc.or_(parens, minus).fill_null(False)).astype(bool), -1.0, 1.0)
    percent = to_numpy(pc.equal(found.field("pct"), "%").fill_null(False)).astype(bool)
    scale = np.where(percent, 0.01, 1.0)
    digits = found.field("num")
    readings = {}
    for decimal, grammar in _GRAMMAR.items():
        ok = to_numpy(pc.match_substring_regex(digits, grammar).fill_null(False)).astype(bool)
        plain = pc.replace_substring_regex(digits, rf"{_GROUP}|[{',.'.replace(decimal, '')}]", "")
        plain = pc.replace_substring(plain, decimal, ".") if decimal == COMMA else plain
        plain = pc.if_else(pa.array(ok & shaped), plain, "0")
        readings[decimal] = (ok, to_numpy(pc.cast(plain, pa.float64()), fill=0.0) * sign * scale)
    currency = pc.coalesce(*(_blank_null(found.field(f)) for f in ("cur1", "cur2")), "")
    return TextNumbers(
        present,
        shaped,
        readings[POINT][0],
        readings[COMMA][0],
        readings[POINT][1],
        readings[COMMA][1],
        to_numpy(pc.match_substring_regex(digits, r"[.,]").fill_null(False)).astype(bool),
        to_numpy(pc.match_substring_regex(digits, r"\d\.\d{3}(?:\D|$)").fill_null(False)).astype(bool),
        currency,
        percent & shaped,
    )


def _blank_null(texts: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(pc.utf8_length(texts), 0), pa.scalar(None, pa.string()), texts)
