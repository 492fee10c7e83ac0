"""CSV dialects: delimiter and decimal mark sniffed from the first lines, column types learned further down,
and the messages for CSV values that cannot be read."""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import re
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator

import numpy as np
import pyarrow as pa

from dmocli.data.parquet_layout import check_unique_names
from dmocli.errors import DmoError, first_line

if TYPE_CHECKING:  # imported on use: it imports pandas
    import pyarrow.csv as pacsv
from dmocli.data.read_errors import not_utf8, read_error
from dmocli.data.sources import describe


def csv_options(
    path: Path, columns: list[str] | None = None, text_columns: Collection[str] = ()
) -> tuple["pacsv.ParseOptions", "pacsv.ConvertOptions"]:
    """How to parse a CSV file: its dialect, an empty cell missing in every column, strings included (a missing
    label = an unlabeled row), and the column types a streaming read learned further down the file.

    `text_columns` are read as text: a model's one-hot columns, whose levels ("001", "True") CSV type
    inference would turn into numbers or booleans that match no level."""
    import pyarrow.csv as pacsv

    dialect = csv_dialect(path)
    types = {**_CSV_LEARNED_TYPES.get(_file_state(path), {}), **{name: pa.string() for name in text_columns}}
    convert = pacsv.ConvertOptions(
        strings_can_be_null=True, decimal_point=dialect.decimal_point, column_types=types, include_columns=columns or []
    )
    return pacsv.ParseOptions(delimiter=dialect.delimiter), convert


def _file_state(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


# CSV column types that only rows past the first block revealed, per file state (path, size, mtime): a streaming
# read infers each column's type from the first block (about 1 MB), so an integer column whose first decimal comes
# later fails there. Learned once (as float64), every later pass of the process reads the column right from its
# first row.
_CSV_LEARNED_TYPES: dict[tuple[str, int, int], dict[str, pa.DataType]] = {}
CONVERSION_ERROR = re.compile(
    r"In CSV column #(\d+): (?:Row #(\d+): )?CSV conversion error to (\w+): invalid value '(.*)'", re.S
)


def learn_csv_type(path: Path, exc: BaseException) -> None:
    """After a conversion error while streaming a CSV file: remember float64 for a column whose first rows held
    integers (or nothing) and a later row a decimal, or raise the one-line DmoError that names the column, line
    and value. Text in a number column is refused: the features were planned from the first rows (the
    in-memory reader infers from every row, and so reads such a column as text)."""
    match = CONVERSION_ERROR.search(str(exc))
    dialect = csv_dialect(path)
    names = list(dialect.names)
    if match is not None:
        index, kind, value = int(match.group(1)), match.group(3), match.group(4)
        learned = _CSV_LEARNED_TYPES.setdefault(_file_state(path), {})
        number = is_number(value.replace(dialect.decimal_point, "."))
        if number and kind.startswith(("int", "uint", "null")) and names[index] not in learned:
            learned[names[index]] = pa.float64()
            return
    raise DmoError(conversion_error_message(path, names, exc, fix="leave the column out (train: --drop it)")) from exc


def conversion_error_message(source: object, names: list[str], exc: BaseException, fix: str) -> str:
    """The one line for a CSV value that does not fit the type its column got from the first rows (naming the
    column, line and value, with `fix`), or for any other read error."""
    match = CONVERSION_ERROR.search(str(exc))
    if "invalid UTF8" in str(exc):
        return not_utf8(source)
    if match is None or int(match.group(1)) >= len(names):
        return f"cannot read {source}: {first_line(exc)} (is it a valid CSV file?)"
    index, line, kind, value = int(match.group(1)), match.group(2), match.group(3), match.group(4)
    where = f"line {line}" if line else "a later line"  # arrow counts the header as row 1: a line number
    if value == names[index]:
        return (
            f"cannot read {source}: {where} repeats the header (CSV files joined with their headers?); keep the "
            "first header line only"
        )
    return (
        f"cannot stream {source}: column {names[index]!r} reads as {kind} in its first rows but holds {value!r} "
        f"at {where}; write a missing value as an empty cell (or NA), or {fix}"
    )


def refuse_repeated_header(table: pa.Table | pa.RecordBatch, source: object, first_row: int = 0) -> None:
    """Refuse a CSV whose rows include its header line again (files joined with their headers). The repeat turns
    every column it crosses into text, and the header's label name into a class: read as data it trains a model
    without a word. Only a table of text columns alone can hold one (a repeat in a column typed as numbers fails
    its conversion, with conversion_error_message's line), so any other returns at once. `first_row`: the data
    row number of the table's first row (0 for a whole file)."""
    if not table.num_rows or not all(is_text(f.type) for f in table.schema):
        return
    import pyarrow.compute as pc

    repeats = None
    for name, column in zip(table.schema.names, table.columns):
        same = pc.equal(pc.utf8_trim_whitespace(column), name.strip())
        repeats = same if repeats is None else pc.and_(repeats, same)
    rows = np.flatnonzero(pc.fill_null(repeats, False).to_numpy(zero_copy_only=False))  # a null cell is no repeat
    if rows.size:
        raise DmoError(
            f"data row {first_row + int(rows[0]) + 1} of {describe(source)} repeats the header line (CSV "
            "files joined with their headers?); keep the first header line only"
        )


def is_text(kind: pa.DataType) -> bool:
    """A plain text column type (string or large_string), as CSV readers and labels produce it."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def is_number(text: str) -> bool:
    """Whether Python reads `text` as a number (as a CSV cell of a number column would be)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class CsvDialect:
    delimiter: str
    decimal_point: str
    names: tuple[str, ...]  # the header as the delimiter splits it (arrow's "CSV column #N" indexes it)


SNIFF_LINES = 50
_DECIMAL_COMMA = re.compile(r"[-+]?[0-9]*,[0-9]+")
_DECIMAL_POINT = re.compile(r"[-+]?[0-9]*\.[0-9]+")


def csv_dialect(path: Path) -> CsvDialect:
    """How a CSV file is written, read from its first lines (see dialect_of_lines); cached per file state, since
    every read of the file asks."""
    stat = path.stat()
    state = (str(path), stat.st_size, stat.st_mtime_ns)  # the name as given: its suffix decides tab and gzip
    if state not in _DIALECTS:
        _DIALECTS[state] = _sniff_dialect(path)
    return _DIALECTS[state]


_DIALECTS: dict[tuple[str, int, int], CsvDialect] = {}


def _sniff_dialect(path: Path) -> CsvDialect:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as raw:
            header = raw.read(HEADER_BYTES)
        if header[:2] in (b"\xff\xfe", b"\xfe\xff"):  # the byte-order mark of UTF-16, as Excel's "Unicode text"
            raise DmoError(
                f"{path} is UTF-16 text; dmo reads UTF-8 CSV: re-save it as UTF-8 (e.g. iconv -f utf-16 -t utf-8)"
            )
        refuse_non_utf8_header(header, path)
        with opener(path, "rt", encoding="utf-8-sig", errors="replace", newline="") as handle:
            lines = [line for _, line in zip(range(SNIFF_LINES + 1), handle)]
    except (OSError, EOFError, zlib.error) as exc:
        raise read_error(path, exc, "CSV") from exc
    return dialect_of_lines(
        lines,
        path,
        tab=path.name.lower().endswith(".tsv"),
        later_decimal_mark=lambda delimiter: _first_decimal_mark(path, opener, delimiter),
    )


HEADER_BYTES = 1 << 20  # the header's first megabyte is checked for UTF-8


def refuse_non_utf8_header(head: bytes, source: object) -> None:
    """Refuse a header that is not UTF-8 (a CSV saved as Latin-1): arrow reads it, and its column names then fail
    in every later step. `head` is the start of the file; a character cut at the end of its header record is no
    error (the record checked is bounded)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(header_record(head[:HEADER_BYTES]), final=False)
    except UnicodeDecodeError as exc:
        raise DmoError(not_utf8(source)) from exc


def header_record(head: bytes) -> bytes:
    """The header record's bytes: up to the first line break outside double quotes, since a quoted column name
    may hold a line break (`"a<newline>b"`) and the names after it are still the header's. Quote and line break
    are ASCII, so the bytes are split before they are decoded."""
    pieces = head.split(b'"')
    for outside in range(0, len(pieces), 2):  # the even pieces lie outside quotes
        end = pieces[outside].find(b"\n")
        if end >= 0:
            return b'"'.join([*pieces[:outside], pieces[outside][:end]])
    return head


def _first_decimal_mark(path: Path, opener: Any, delimiter: str) -> str | None:
    """The decimal mark ("," or ".") of the first cell in the file's first DECIMAL_SCAN_BYTES that is a number with
    a fraction, or None: for a file whose first lines hold whole numbers only. `1,234` is skipped: thousands or a
    decimal, it cannot tell. Bounded, so a large file of whole numbers costs a fraction of a second, not a pass."""
    d = re.escape(delimiter.encode())
    cell = re.compile(rb"(?:^|" + d + rb'|\r)[ \t]*"?([-+]?[0-9]*)([.,])([0-9]+)"?[ \t]*(?=' + d + rb"|[\r\n]|$)", re.M)
    with opener(path, "rb") as handle:
        block = handle.read(DECIMAL_SCAN_BYTES)
    if len(block) == DECIMAL_SCAN_BYTES:  # a cell cut at the end would be read as another number
        block = block[: max(block.rfind(b"\n"), block.rfind(b"\r")) + 1]
    if re.search(rb"[.,][0-9]", block) is None:  # the common case, whole numbers only: no slow pattern at all
        return None
    for found in cell.finditer(block):
        whole, mark, fraction = found.groups()
        digits = whole.lstrip(b"+-")
        if mark == b"," and len(fraction) == 3 and 1 <= len(digits) <= 3 and not digits.startswith(b"0"):
            continue  # 1,234: thousands or one and a fraction (0,123 is a fraction: no group starts with 0)
        return mark.decode()
    return None


DECIMAL_SCAN_BYTES = 4 << 20  # past arrow's first CSV block (1 MB), whose rows fix the column types of a stream


def dialect_of_lines(
    lines: list[str], source: object, tab: bool = False, later_decimal_mark: Callable[[str], str | None] | None = None
) -> CsvDialect:
    """Delimiter: a tab for .tsv (tab=True); otherwise whichever of comma, semicolon, tab and pipe splits the
    header into the most column names. Decimal point: a comma when the delimiter is not one and the numbers of
    the first lines are written 1,5 (never 1.5), as spreadsheets in many locales export; when those lines hold
    whole numbers only, `later_decimal_mark(delimiter)` (a file: its first 4 MB) decides, so a column of 1,5 further
    down is not read as text. Refuses a header that names a column twice, which no reader could map to one feature."""
    header = lines[0] if lines else ""
    with _field_limit(sum(map(len, lines))):
        if tab:
            delimiter = "\t"
        else:  # the candidate that splits the header (quotes respected) into the most names; a comma on ties
            delimiter = max(",;\t|", key=lambda d: len(next(csv.reader([header], delimiter=d), [])))
        rows = list(csv.reader(lines, delimiter=delimiter))
    names = rows[0] if rows else []
    check_unique_names(names, source)
    cells = [cell.strip() for row in rows[1:] for cell in row]
    commas, points = (any(pattern.fullmatch(c) for c in cells) for pattern in (_DECIMAL_COMMA, _DECIMAL_POINT))
    if delimiter != "," and not commas and not points and later_decimal_mark is not None:
        commas = later_decimal_mark(delimiter) == ","
    return CsvDialect(delimiter, "," if delimiter != "," and commas and not points else ".", tuple(names))


_FIELD_LIMIT_LOCK = threading.Lock()


@contextlib.contextmanager
def _field_limit(longest: int) -> Iterator[None]:
    """Python's csv module refuses a cell over its field size limit (131,072 characters by default), which a
    text column (a document, a JSON blob) passes easily while arrow reads it fine: while sniffing, the limit is
    raised to `longest` (no cell of the sniffed lines can be longer than all of them), then put back, so the
    process's other csv readers (a user's, under the Python API) keep theirs. One sniff at a time: two would put
    back each other's limits."""
    with _FIELD_LIMIT_LOCK:
        before = csv.field_size_limit()
        csv.field_size_limit(max(before, longest + 1))
        try:
            yield
        finally:
            csv.field_size_limit(before)
