"""Reading feature tables (parquet file, parquet directory, CSV) and writing outputs atomically.

Everything that touches the file system for data goes through here so that
commands share one set of error messages and one "never half-written" rule.
"""
from __future__ import annotations

import contextlib
import csv
import errno
import gzip
import math
import os
import re
import stat
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import DmoError, first_line
from .parquet_layout import check_unique_names, parquet_layout

if TYPE_CHECKING:  # imported on use (open_dataset): it imports pandas
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")  # output names written as parquet (any non-CSV file is read as one)


def _is_csv(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(CSV_SUFFIXES)


def is_stdin(source: object) -> bool:
    """Whether a DATA or -o path names standard input or output (`-`); dmocli.stdin_csv reads it."""
    return isinstance(source, (str, os.PathLike)) and os.fspath(source) == "-"


def _check_exists(path: Path) -> None:
    if is_stdin(path) and not path.exists():
        raise DmoError("'-' (standard input) is read only as the DATA of `dmo evaluate`, `predict`, `threshold`, and "
                       "of `dmo train` with a streaming solver (fofo, ofo, lr); save the data to a file here")
    if not path.exists():
        raise DmoError(f"input not found: {path} (check the path; parquet file, directory of parquet files, or CSV)")


Source = str | os.PathLike | pa.Table  # a path on disk, or a table already in memory (the Python API)


STDIN_NAME = "standard input"


def describe(source: Source) -> str:
    """What reports and messages call the data: its path, standard input for `-`, or a short description
    of an in-memory table."""
    if isinstance(source, pa.Table):
        return f"<in-memory table: {source.num_rows} rows x {source.num_columns} columns>"
    return STDIN_NAME if is_stdin(source) else str(source)


def parquet_files(path: Source) -> list[str] | None:
    """The parquet files behind a file or directory path, in reading order; None for CSV and in-memory tables.

    Parquet is read with pyarrow.parquet alone: pyarrow.dataset (needed for
    CSV and tables) imports pandas, a third of a second a streaming command
    need not spend.
    """
    if isinstance(path, pa.Table):
        return None
    path = Path(path)
    _check_exists(path)
    if path.is_dir():
        files = _directory_parquet_files(path)
        if not files:
            raise DmoError(f"no .parquet files in directory {path} (point to a parquet file, a CSV, or a folder of parquet files)")
        return [str(p) for p in files]
    return None if _is_csv(path) else [str(path)]


HIDDEN_PREFIXES = (".", "_")  # Spark's _temporary/ attempts, _SUCCESS, editors' .swp: not data (pyarrow skips them too)


def _directory_parquet_files(root: Path) -> list[Path]:
    """The .parquet files under `root`, in path order, following linked folders (once each) and skipping hidden
    names: a job's leftover `_temporary/` attempt or a `.part-1.parquet` would otherwise be read as more rows.
    A link to nothing is refused: skipping it would train on part of the data without a word."""
    files: list[Path] = []
    seen: set[str] = set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree, or two links to one folder
            subfolders.clear()
            continue
        seen.add(real)
        subfolders[:] = [name for name in subfolders if not name.startswith(HIDDEN_PREFIXES)]
        for name in names:
            if name.startswith(HIDDEN_PREFIXES) or not name.endswith(".parquet"):
                continue
            file = Path(folder) / name
            if not file.exists():
                raise DmoError(f"{file} is a link to a file that does not exist; remove it or point it at the data")
            if file.is_file():
                files.append(file)
    return sorted(files)


def open_dataset(path: Source, text_columns: Collection[str] = ()) -> "pads.Dataset":
    """A pyarrow dataset over a parquet file, a directory of parquet files, a CSV file, or an in-memory table.
    `text_columns`: CSV columns to read as text whatever they look like (see _csv_options)."""
    import pyarrow.dataset as pads

    if isinstance(path, pa.Table):
        return pads.dataset(path)
    files = parquet_files(path)
    path = Path(path)
    try:
        if files is not None:
            # Without pre-buffering: it reads each whole column chunk's compressed bytes ahead of decoding, which
            # on a local file buys no speed and adds the compressed file's size to a whole-table read's peak.
            fmt = pads.ParquetFileFormat(default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=False))
            return pads.dataset(files if path.is_dir() else files[0], format=fmt)
        if _is_csv(path):
            if path.stat().st_size == 0:
                raise DmoError(f"{path} is empty (0 bytes); a CSV needs a header line and rows")
            parse, convert = _csv_options(path, text_columns=text_columns)
            return pads.dataset(str(path), format=pads.CsvFileFormat(parse_options=parse, convert_options=convert))
        raise AssertionError("unreachable: a path is parquet or CSV")
    except DmoError:
        raise
    except READ_ERRORS as exc:
        raise _read_error(path, exc) from exc


def _csv_options(path: Path, columns: list[str] | None = None,
                 text_columns: Collection[str] = ()) -> tuple["pacsv.ParseOptions", "pacsv.ConvertOptions"]:
    """How to parse a CSV file: its dialect, an empty cell missing in every column, strings included (a missing
    label = an unlabeled row), and the column types a streaming read learned further down the file.

    `text_columns` are read as text: a model's one-hot columns, whose levels ("001", "True") CSV type
    inference would turn into numbers or booleans that match no level."""
    import pyarrow.csv as pacsv

    dialect = csv_dialect(path)
    types = {**_CSV_LEARNED_TYPES.get(_file_state(path), {}), **{name: pa.string() for name in text_columns}}
    convert = pacsv.ConvertOptions(strings_can_be_null=True, decimal_point=dialect.decimal_point,
                                   column_types=types, include_columns=columns or [])
    return pacsv.ParseOptions(delimiter=dialect.delimiter), convert


def _file_state(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


# CSV column types that only rows past the first block revealed, per file state (path, size, mtime): a streaming
# read infers each column's type from the first block (about 1 MB), so an integer column whose first decimal comes
# later fails there. Learned once (as float64), every later pass of the process reads the column right from its
# first row.
_CSV_LEARNED_TYPES: dict[tuple[str, int, int], dict[str, pa.DataType]] = {}
_CONVERSION_ERROR = re.compile(r"In CSV column #(\d+): (?:Row #(\d+): )?CSV conversion error to (\w+): invalid value '(.*)'",
                               re.S)


def _learn_csv_type(path: Path, exc: BaseException) -> None:
    """After a conversion error while streaming a CSV file: remember float64 for a column whose first rows held
    integers (or nothing) and a later row a decimal, or raise the one-line DmoError that names the column, line
    and value. Text in a number column is refused: the features were planned from the first rows (the
    in-memory reader infers from every row, and so reads such a column as text)."""
    match = _CONVERSION_ERROR.search(str(exc))
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
    match = _CONVERSION_ERROR.search(str(exc))
    if "invalid UTF8" in str(exc):
        return _not_utf8(source)
    if match is None or int(match.group(1)) >= len(names):
        return f"cannot read {source}: {first_line(exc)} (is it a valid CSV file?)"
    index, line, kind, value = int(match.group(1)), match.group(2), match.group(3), match.group(4)
    where = f"line {line}" if line else "a later line"  # arrow counts the header as row 1: a line number
    if value == names[index]:
        return (f"cannot read {source}: {where} repeats the header (CSV files joined with their headers?); keep the "
                "first header line only")
    return (f"cannot stream {source}: column {names[index]!r} reads as {kind} in its first rows but holds {value!r} "
            f"at {where}; write a missing value as an empty cell (or NA), or {fix}")


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
        raise DmoError(f"data row {first_row + int(rows[0]) + 1} of {describe(source)} repeats the header line (CSV "
                       "files joined with their headers?); keep the first header line only")


def is_text(kind: pa.DataType) -> bool:
    """A plain text column type (string or large_string), as CSV readers and labels produce it."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


_RAGGED_ROW = re.compile(r"CSV parse error: Row #(\d+): Expected (\d+) columns, got (\d+)")


def _not_utf8(source: object) -> str:
    return (f"cannot read {source}: it holds text that is not UTF-8 (saved as Latin-1 or Windows-1252?); "
            "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)")


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
            if raw.read(2) in (b"\xff\xfe", b"\xfe\xff"):  # the byte-order mark of UTF-16, as Excel's "Unicode text"
                raise DmoError(f"{path} is UTF-16 text; dmo reads UTF-8 CSV: re-save it as UTF-8 "
                               "(e.g. iconv -f utf-16 -t utf-8)")
        with opener(path, "rt", encoding="utf-8-sig", errors="replace", newline="") as handle:
            lines = [line for _, line in zip(range(SNIFF_LINES + 1), handle)]
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(path, exc, "CSV") from exc
    return dialect_of_lines(lines, path, tab=path.name.lower().endswith(".tsv"),
                            later_decimal_mark=lambda delimiter: _first_decimal_mark(path, opener, delimiter))


def _first_decimal_mark(path: Path, opener: Any, delimiter: str) -> str | None:
    """The decimal mark ("," or ".") of the first cell in the file's first DECIMAL_SCAN_BYTES that is a number with
    a fraction, or None: for a file whose first lines hold whole numbers only. `1,234` is skipped: thousands or a
    decimal, it cannot tell. Bounded, so a large file of whole numbers costs a fraction of a second, not a pass."""
    d = re.escape(delimiter.encode())
    cell = re.compile(rb'(?:^|' + d + rb'|\r)[ \t]*"?([-+]?[0-9]*)([.,])([0-9]+)"?[ \t]*(?=' + d + rb'|[\r\n]|$)', re.M)
    with opener(path, "rb") as handle:
        block = handle.read(DECIMAL_SCAN_BYTES)
    if len(block) == DECIMAL_SCAN_BYTES:  # a cell cut at the end would be read as another number
        block = block[:max(block.rfind(b"\n"), block.rfind(b"\r")) + 1]
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


def dialect_of_lines(lines: list[str], source: object, tab: bool = False,
                     later_decimal_mark: Callable[[str], str | None] | None = None) -> CsvDialect:
    """Delimiter: a tab for .tsv (tab=True); otherwise whichever of comma, semicolon, tab and pipe splits the
    header into the most column names. Decimal point: a comma when the delimiter is not one and the numbers of
    the first lines are written 1,5 (never 1.5), as spreadsheets in many locales export; when those lines hold
    whole numbers only, `later_decimal_mark(delimiter)` (a file: its first 4 MB) decides, so a column of 1,5 further
    down is not read as text. Refuses a header that names a column twice, which no reader could map to one feature."""
    header = lines[0] if lines else ""
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


READ_ERRORS = (pa.ArrowInvalid, OSError)  # pyarrow's ArrowIOError is OSError


def _read_error(path: object, exc: BaseException, kinds: str = "parquet or CSV") -> DmoError:
    """The one-line message every failed read ends in."""
    if "invalid UTF8" in str(exc):
        return DmoError(_not_utf8(path))
    ragged = _RAGGED_ROW.search(str(exc))
    if ragged is not None:
        line, expected, got = map(int, ragged.groups())
        fix = ("if the first line is not the header, delete the title, comment or `sep=` lines above it; else quote "
               "the values that contain the delimiter" if line == 2 and got > expected else
               "quote the values that contain the delimiter, or fix that line")
        return DmoError(f"cannot read {path}: line {line} has {got} fields where the header (line 1) has "
                        f"{expected}; {fix}")
    if "Truncated compressed stream" in str(exc) or "unexpected end of" in str(exc).lower():
        return DmoError(f"cannot read {path}: the compressed file ends early (truncated: copy or download it again)")
    return DmoError(f"cannot read {path}: {first_line(exc)} (is it a valid {kinds} file?)")


def read_table(path: Source, columns: list[str] | None = None, text_columns: Collection[str] = ()) -> pa.Table:
    """Read a whole table; refuses an empty one since no command can do anything with it. `text_columns`: CSV
    columns read as text (see _csv_options)."""
    if isinstance(path, pa.Table):
        check_unique_names(path.schema.names, "the table")
        if path.num_rows == 0:
            raise DmoError("the table has no rows (give a table with at least one row)")
        return path if columns is None else path.select(columns)
    files = parquet_files(path)
    try:
        if files is None:
            table = _read_csv(Path(path), columns, text_columns)
        else:  # file by file, as iter_batches reads: the same types and partition columns on both paths
            layout = parquet_layout(path, files)
            table = pa.concat_tables([
                layout.adapt(pq.read_table(name, columns=layout.file_columns(columns), pre_buffer=False), name, columns)
                for name in files])
    except READ_ERRORS as exc:
        raise _read_error(path, exc) from exc
    pa.default_memory_pool().release_unused()  # decoding's scratch pages: the table is what stays
    if table.num_rows == 0:
        raise DmoError(f"{path} has no rows (give a table with at least one row)")
    return table


def read_rows(path: Source, start: int, stop: int, batch_size: int = 65536) -> pa.Table:
    """Rows [start, stop) of a parquet file or directory, in read_table's order (one process's share in
    distributed training). Only the row groups that hold them are read, in record batches, and only the
    batches that hold rows in range are kept (a slice keeps its batch: at most two partial batches), so memory
    follows the range, not the row groups (pyarrow writes up to 1M rows per group). May have no rows."""
    files = parquet_files(path)
    if files is None:
        raise DmoError(f"{describe(path)} is not parquet: reading a range of rows needs parquet's row-group index")
    try:
        layout = parquet_layout(path, files)
        pieces, offset = [], 0
        for name in files:
            handle = pq.ParquetFile(name, pre_buffer=False)
            for group in range(handle.metadata.num_row_groups):
                rows = handle.metadata.row_group(group).num_rows
                if max(start, offset) < min(stop, offset + rows):
                    for batch in handle.iter_batches(batch_size=batch_size, row_groups=[group]):
                        low, high = max(start, offset), min(stop, offset + batch.num_rows)
                        if low < high:
                            pieces.append(layout.adapt(pa.Table.from_batches([batch.slice(low - offset, high - low)]),
                                                       name, None))
                        offset += batch.num_rows
                        if offset >= stop:  # the rest is another process's: not decoded (the loops end here)
                            break
                else:
                    offset += rows
                if offset >= stop:
                    break
            if offset >= stop:
                break
    except READ_ERRORS as exc:
        raise _read_error(path, exc, "parquet") from exc
    return pa.concat_tables(pieces) if pieces else layout.schema.empty_table()


def _read_csv(path: Path, columns: list[str] | None, text_columns: Collection[str]) -> pa.Table:
    """A whole CSV file. The dataset scanner (about 20 % faster) fixes each column's type from the first block
    and fails at a later value that does not fit (a decimal in an integer column, text in a number column);
    then pyarrow's table reader, which infers from every block, reads the file again (that column float64,
    or text)."""
    import pyarrow.csv as pacsv

    try:
        table = open_dataset(path, text_columns).to_table(columns=columns)
    except pa.ArrowInvalid as exc:
        if _CONVERSION_ERROR.search(str(exc)) is None:
            raise
        parse, convert = _csv_options(path, columns, text_columns)
        table = pacsv.read_csv(path, parse_options=parse, convert_options=convert)  # in include_columns' order
    refuse_repeated_header(table, path)
    return table


def schema(path: Source, text_columns: Collection[str] = ()) -> pa.Schema:
    """The columns of the data; for parquet, as every file is read (dmocli.parquet_layout)."""
    files = parquet_files(path)
    if files is None:
        return open_dataset(path, text_columns).schema
    return parquet_layout(path, files).schema


def iter_batches(
    path: Source, batch_size: int = 65536, columns: list[str] | None = None, low_memory: bool = False,
    text_columns: Collection[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Stream record batches in file order; memory is O(batch), not O(rows).

    Parquet is read file by file, row group by row group, without
    pre-buffering: pyarrow's dataset scanner reads ahead of a slower consumer
    and its peak memory grew with the file (measured in bench/fofo.py).
    low_memory (CSV and other dataset reads): read ahead one file and two
    batches instead of pyarrow's 4 files and 16 batches. text_columns: CSV
    columns read as text (see _csv_options).
    """
    files = parquet_files(path)
    readahead = {"fragment_readahead": 1, "batch_readahead": 2} if low_memory else {}
    try:
        if files is not None:
            layout = parquet_layout(path, files)
            read = layout.file_columns(columns)
            source: Iterator[pa.RecordBatch] = (
                layout.adapt(batch, name, columns) for name in files
                for batch in pq.ParquetFile(name, pre_buffer=False).iter_batches(batch_size=batch_size, columns=read)
            )
        else:
            if isinstance(path, pa.Table):
                yield from (batch for batch in path.select(columns or path.column_names).to_batches(batch_size)
                            if batch.num_rows)
            else:
                yield from _stream_csv(Path(path), batch_size, columns, readahead, text_columns)
            return
        for batch in source:
            if batch.num_rows:
                yield batch
    except READ_ERRORS as exc:
        raise _read_error(path, exc) from exc


def _stream_csv(path: Path, batch_size: int, columns: list[str] | None, readahead: dict[str, int],
                text_columns: Collection[str]) -> Iterator[pa.RecordBatch]:
    """A CSV file's record batches. When a later row shows that an integer column holds decimals, the file
    is opened again with that column as float64 and the rows already yielded are skipped, so the caller
    sees every row once (its batches from then on carry the column as float64)."""
    done = 0
    while True:
        seen = 0
        try:
            for batch in open_dataset(path, text_columns).to_batches(columns=columns, batch_size=batch_size,
                                                                     **readahead):
                if seen + batch.num_rows > done and batch.num_rows:
                    refuse_repeated_header(batch, path, seen)
                    yield batch.slice(max(0, done - seen))
                seen += batch.num_rows
                done = max(done, seen)
            return
        except pa.ArrowInvalid as exc:
            _learn_csv_type(path, exc)


def sample_row_groups(path: Source, columns: list[str],
                      max_rows: int) -> tuple[Iterator[pa.RecordBatch], int] | None:
    """Whole parquet row groups, evenly spaced over the files in order, about `max_rows` rows in all
    (every row group when the data is smaller), and how many rows they hold; None for CSV, which
    cannot be read at random.

    Whole row groups keep the read sequential within each group, and even
    spacing reaches the end of the data, so a file sorted by time or label
    is not summarized by its head alone.
    """
    files = parquet_files(path)
    if files is None:
        return None
    try:
        groups = [(name, i, meta.row_group(i).num_rows)
                  for name in files for meta in [pq.ParquetFile(name).metadata]
                  for i in range(meta.num_row_groups)]
    except READ_ERRORS as exc:
        raise _read_error(path, exc, "parquet") from exc
    total = sum(rows for _, _, rows in groups)
    if total > max_rows:
        wanted = max(1, math.ceil(len(groups) * max_rows / total))
        picks = sorted({int((j + 0.5) * len(groups) / wanted) for j in range(wanted)})  # centred strata
        groups = [groups[j] for j in picks]

    layout = parquet_layout(path, files)

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            handle, current = None, None
            for name, i, _ in groups:  # one whole row group per read: a sample is a few, spread out
                if name != current:
                    handle, current = pq.ParquetFile(name), name
                table = handle.read_row_group(i, columns=layout.file_columns(columns))
                yield from layout.adapt(table, name, columns).to_batches()
        except READ_ERRORS as exc:
            raise _read_error(path, exc, "parquet") from exc

    return batches(), sum(rows for _, _, rows in groups)


def count_rows(path: Source) -> int | None:
    """Row count from parquet metadata without reading data; None for CSV (unknown without a pass)."""
    if isinstance(path, pa.Table):
        return path.num_rows
    files = parquet_files(path)
    if files is None:
        return None
    try:
        return sum(pq.ParquetFile(name).metadata.num_rows for name in files)
    except READ_ERRORS as exc:
        raise _read_error(path, exc, "parquet") from exc


def is_special(path: Path) -> bool:
    """An existing output that is not a regular file or folder (/dev/null, a named pipe, /dev/stdout's link):
    it is written into, as shell users expect, since a rename would replace the device or pipe itself."""
    try:
        mode = os.stat(path).st_mode  # follows links
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _real_target(path: Path) -> Path:
    """Where a regular output goes: through a symbolic link to the file it names (the link stays a link)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only on success.

    A crash or a bad input half-way leaves the old file (or nothing) behind,
    never a truncated output that a batch job could pick up. A link is followed
    (its target is replaced, the link kept); a device or pipe is written into.
    """
    target = Path(path)
    if is_special(target):
        yield target
        return
    target = _real_target(target)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise DmoError(f"output directory does not exist: {directory} (create it or choose another -o path)")
    if not os.access(directory, os.W_OK):
        raise DmoError(f"cannot write to {directory} (permission denied; choose a writable output path)")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        mask = os.umask(0)  # mkstemp (and safetensors) make the file private (0600): give it the mode any new
        os.umask(mask)      # file of the user gets, so a batch job's other readers can open it
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def check_writable(path: str | os.PathLike) -> None:
    """Fail before any expensive work if the output cannot be written."""
    target = Path(path)
    if target.is_dir():
        raise DmoError(f"output path {target} is a directory (give a file name)")
    if is_special(target):
        if not os.access(target, os.W_OK):
            raise DmoError(f"cannot write to {target} (permission denied; choose a writable output path)")
        return
    target = _real_target(target)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise DmoError(f"output directory does not exist: {directory} (create it or choose another output path)")
    if not os.access(directory, os.W_OK):
        raise DmoError(f"cannot write to {directory} (permission denied; choose a writable output path)")


def check_outputs(outputs: dict[str, str | os.PathLike | None], inputs: dict[str, Source | None]) -> None:
    """check_writable for every output, then check_distinct. Keys name the options in messages ("-o", "DATA")."""
    for path in outputs.values():
        if path is not None:
            check_writable(path)
    check_distinct(outputs, inputs)


PART_PREFIX = "part-"  # the files of a directory output written partition by partition (the Dask engine)


def check_parts_output(output: str | os.PathLike, inputs: dict[str, Source | None]) -> None:
    """-o of a pass that writes a directory of part files: it may replace its own earlier output on a
    re-run, but never a directory that holds anything else (a user's data folder given as -o by mistake)."""
    target = Path(output)
    if is_special(target):
        raise DmoError(f"--engine dask writes a directory of part files, but -o {output} is a device or pipe; give a "
                       "directory name, or --engine local")
    resolved = target.resolve()
    here = Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise DmoError(f"-o {output} is the working directory or holds it, and the output replaces that directory; "
                       "give a new directory name")
    for name, source in inputs.items():
        if source is not None and not isinstance(source, pa.Table) and not is_stdin(source) \
                and resolved in Path(source).resolve().parents:
            raise DmoError(f"{name} {source} is inside the -o directory {target}, which the output replaces "
                           "(choose another output path)")
    check_distinct({"-o": target}, inputs, directories=True)
    if not target.is_dir():
        check_writable(target)
        return
    foreign = [p.name for p in target.iterdir()
               if not (p.is_file() and p.name.startswith(PART_PREFIX) and p.suffix == ".parquet")]
    if foreign:
        raise DmoError(f"output path {target} is a directory with other files than the part-*.parquet files dmo "
                       f"writes ({', '.join(sorted(foreign)[:3])}); give a new path, or remove it")
    check_writable(target.parent / f"{target.name}.new")  # the parent must take the staging directory


def check_distinct(outputs: dict[str, str | os.PathLike | None], inputs: dict[str, Source | None],
                   directories: bool = False) -> None:
    """Refuse an output that would replace an input or another output.

    Outputs are written atomically, so a wrong path never leaves a half-written
    file, but `-o data.parquet` would still swap the user's data for a model,
    and a report named like the model would replace it. A parquet output
    inside an input directory would be read as data by the next run, and so
    would any output when `directories` (the outputs are directories of parquet parts).
    """
    given = {name: Path(path) for name, path in outputs.items() if path is not None and not is_special(Path(path))}
    sources = {name: Path(path) for name, path in inputs.items() if path is not None and not isinstance(path, pa.Table)}
    for name, path in given.items():
        target = path.resolve()
        for other, source in sources.items():
            if target == source.resolve() or (target.exists() and source.exists() and os.path.samefile(target, source)):
                raise DmoError(f"{name} {path} is the same file as {other}; writing it would replace that file "
                               "(choose another output path)")
            if source.is_dir() and (directories or target.suffix == ".parquet") and source.resolve() in target.parents:
                raise DmoError(f"{name} {path} is inside the {other} directory {source}, so later runs would read it "
                               "as data (choose a path outside it)")
    resolved = [(name, path.resolve()) for name, path in given.items()]
    for i, (name, target) in enumerate(resolved):
        for other, target2 in resolved[i + 1:]:
            if target == target2:
                raise DmoError(f"{name} and {other} are the same file ({target}); give them different paths")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


class ParquetSink:
    """Write record batches to a parquet file that only appears when closed successfully."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema):
        self._stack = contextlib.ExitStack()
        self._path = path
        self._tmp = self._stack.enter_context(atomic_path(path))
        where: str | pa.PythonFile = str(self._tmp)
        self._stream = None
        if is_special(self._tmp):  # a named pipe cannot seek: arrow's own file stream fails there, a Python one does not
            self._stream = self._stack.enter_context(open(self._tmp, "wb"))
            where = pa.PythonFile(self._stream, mode="w")
        self._writer = pq.ParquetWriter(where, schema)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        with reader_gone_is_an_error(self._path):
            if isinstance(batch, pa.RecordBatch):
                self._writer.write_batch(batch)
            else:
                self._writer.write_table(batch)

    def __enter__(self) -> "ParquetSink":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and self._stream is not None:
            # A pipe's reader must not get a well-formed file of the rows so far: the footer is what makes
            # parquet readable, so the stream is closed first and the writer's footer goes nowhere.
            self._stream.close()
            with contextlib.suppress(Exception):
                self._writer.close()
        else:
            with reader_gone_is_an_error(self._path):
                self._writer.close()
        return self._stack.__exit__(exc_type, exc, tb)


@contextlib.contextmanager
def reader_gone_is_an_error(path: str | os.PathLike) -> Iterator[None]:
    """A named pipe or device output whose reader closed it: one line naming it (a file cannot do this)."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE or "Broken pipe" in str(exc):
            raise DmoError(f"the reader of -o {path} closed it before the output was complete") from exc
        raise


def is_csv_path(path: str | os.PathLike) -> bool:
    """An output named like a CSV file (.csv, .csv.gz, .tsv), which a parquet writer must not fill."""
    return not is_stdin(path) and _is_csv(Path(path))


def refuse_csv_output(path: str | os.PathLike | None, what: str) -> None:
    """One line for `-o sub.csv` where the command writes parquet, instead of parquet bytes under a .csv name."""
    if path is not None and is_csv_path(path):
        raise DmoError(f"{what} is written as parquet, but -o {path} names a CSV file; name it .parquet")


def refuse_foreign_suffix(path: str | os.PathLike | None, what: str, csv: bool) -> None:
    """One line for `-o scores.json` (or .txt, .parquet.gz, .safetensors): a table file under another format's
    name, which the next step of a pipeline would misread. A name without a suffix, or with one that is not a
    word (`run.2024`), is written as parquet."""
    if path is None or is_stdin(path) or is_special(Path(path)):
        return
    name = Path(path).name.lower()
    allowed = (*PARQUET_SUFFIXES, *CSV_SUFFIXES) if csv else PARQUET_SUFFIXES
    suffix = Path(name).suffix
    if re.fullmatch(r"\.[a-z]+", suffix) and not name.endswith(allowed):
        kinds = "parquet (.parquet) or CSV (.csv, .csv.gz, .tsv)" if csv else "parquet (.parquet)"
        raise DmoError(f"-o {path} names a {suffix} file, but {what} can only be written as {kinds}; "
                       f"name it {'.parquet or .csv' if csv else '.parquet'}")


DATA_SUFFIXES = (".parquet", ".csv", ".csv.gz", ".tsv", ".json")


def refuse_misnamed_model(path: str | os.PathLike | None) -> None:
    """`train -o scores.parquet`: a model file under a data file's name would be read as data by the next
    step of a pipeline (and fail there, far from the mistake)."""
    if path is not None and not is_special(Path(path)) and Path(path).name.lower().endswith(DATA_SUFFIXES):
        raise DmoError(f"-o {path} names a data or report file, but the model is a safetensors file; "
                       "name it MODEL.safetensors")


class CsvSink:
    """Write record batches as CSV to standard output (`-o -`), for shell pipelines, or to a CSV file
    (`path`: .csv, .csv.gz gzip-compressed, .tsv tab-separated, renamed into place when complete). Unlike
    a file, a pipe cannot appear only when complete: a failure half-way leaves the rows written so far,
    and the exit code says so."""

    def __init__(self, schema: pa.Schema, path: str | os.PathLike | None = None):
        import pyarrow.csv as pacsv

        self._stack = contextlib.ExitStack()
        sink: Any = sys.stdout.buffer
        options = None
        if path is not None:
            tmp = self._stack.enter_context(atomic_path(path))
            sink = pa.PythonFile(self._stack.enter_context(open(tmp, "wb")), mode="w")
            name = Path(path).name.lower()
            if name.endswith(".gz"):
                sink = self._stack.enter_context(pa.CompressedOutputStream(sink, "gzip"))
            if name.endswith(".tsv"):
                options = pacsv.WriteOptions(delimiter="\t")
        self._file = path is not None
        self._writer = pacsv.CSVWriter(sink, schema, write_options=options)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        try:
            if isinstance(batch, pa.RecordBatch):
                self._writer.write_batch(batch)
            else:
                self._writer.write_table(batch)
        except OSError as exc:  # arrow reports a reader that went away (`| head`) as an OSError
            if exc.errno == errno.EPIPE or "Broken pipe" in str(exc):
                raise BrokenPipeError(str(exc)) from exc
            raise

    def __enter__(self) -> "CsvSink":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self._writer.close()
            if not self._file:
                sys.stdout.buffer.flush()
        return self._stack.__exit__(exc_type, exc, tb)


def write_parquet(path: str | os.PathLike, table: pa.Table) -> None:
    with ParquetSink(path, table.schema) as sink:
        sink.write(table)
