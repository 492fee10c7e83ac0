"""Writers of tables that grow batch by batch (parquet and CSV), each under a temporary name until closed."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dmocli.data.outputs import atomic_path, is_special, reader_gone_is_an_error


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
