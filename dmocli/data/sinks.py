"""Writers of tables that grow batch by batch (parquet and CSV), each under a temporary name until closed."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from dmocli.data.outputs import atomic_path, is_special, reader_gone_is_an_error
from dmocli.errors import ReaderStopped


class ParquetSink:
    """Write record batches to a parquet file that only appears when closed successfully."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema):
        self._stack = contextlib.ExitStack()
        self._path = path
        self._tmp = self._stack.enter_context(atomic_path(path))
        where: str | pa.PythonFile = str(self._tmp)
        self._stream = None
        if is_special(
            self._tmp
        ):  # a named pipe cannot seek: arrow's own file stream fails there, a Python one does not
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


class CsvSink:
    """Write record batches as CSV to standard output (`-o -`), for shell pipelines, or to a CSV file
    (`path`: .csv, .csv.gz gzip-compressed, .tsv tab-separated, renamed into place when complete). Unlike
    a file, a pipe cannot appear only when complete: a failure half-way leaves the rows written so far,
    and the exit code says so.

    `escape` (the default) neutralizes text cells a spreadsheet would run as a formula (see _formula_safe)."""

    def __init__(self, schema: pa.Schema, path: str | os.PathLike | None = None, escape: bool = True):
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
        self._escape = escape
        self._schema = _formula_safe_schema(schema) if escape else schema
        with _reader_may_stop():  # the header is written here
            self._writer = pacsv.CSVWriter(sink, self._schema, write_options=options)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._escape:
            batch = _formula_safe(batch, self._schema)
        with _reader_may_stop():
            if isinstance(batch, pa.RecordBatch):
                self._writer.write_batch(batch)
            else:
                self._writer.write_table(batch)

    def __enter__(self) -> "CsvSink":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            with _reader_may_stop():
                self._writer.close()
                if not self._file:
                    sys.stdout.buffer.flush()
        return self._stack.__exit__(exc_type, exc, tb)


@contextlib.contextmanager
def _reader_may_stop() -> Iterator[None]:
    """A reader of the rows that went away (`| head`, which arrow reports as an OSError) took what it wanted: the
    command ends as every command whose stdout reader stopped does (ReaderStopped: exit 141), wherever the pipe
    broke, header, rows or last flush."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE or "Broken pipe" in str(exc):
            raise ReaderStopped(str(exc)) from exc
        raise


# OWASP's rule for CSV injection: a cell starting with one of these is a formula to Excel, LibreOffice and Google
# Sheets (`=HYPERLINK(...)`, `+cmd|...`, `@SUM(...)`), run on opening; some skip a leading tab or carriage return.
_FORMULA_START = r"^([=+\-@\t\r])"


def _formula_safe(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.Table:
    """`batch` with every text cell that starts like a formula prefixed with a single quote, which spreadsheets
    show as text, under `schema` (the formula-safe header). Number columns are left alone: a logit of -1.5
    stays a number."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    columns = [
        pa.chunked_array([_formula_safe_array(chunk) for chunk in column.chunks], column.type)
        if _holds_text(column.type)
        else column
        for column in table.columns
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _formula_safe_schema(schema: pa.Schema) -> pa.Schema:
    """The CSV header by the same rule: an --id-col named like a formula is a cell as well."""
    names = pa.array(schema.names, pa.string())
    return pa.schema([field.with_name(name) for field, name in zip(schema, _formula_safe_array(names).to_pylist())])


def _formula_safe_array(array: pa.Array) -> pa.Array:
    """The cells of `array` that start like a formula with a single quote in front (OWASP's fix)."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):  # a pandas categorical: its levels are the text
        return pa.DictionaryArray.from_arrays(array.indices, _formula_safe_array(array.dictionary))
    return pc.replace_substring_regex(array, pattern=_FORMULA_START, replacement=r"'\1", max_replacements=1)


def _holds_text(kind: pa.DataType) -> bool:
    """Whether the CSV writer writes a column's cells as text (strings, bytes, a dictionary of either)."""
    if pa.types.is_dictionary(kind):
        return _holds_text(kind.value_type)
    return any(test(kind) for test in _TEXT_TYPES)


_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def write_parquet(path: str | os.PathLike, table: pa.Table) -> None:
    with ParquetSink(path, table.schema) as sink:
        sink.write(table)
