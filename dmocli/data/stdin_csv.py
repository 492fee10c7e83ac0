"""DATA `-`: a CSV (plain or gzip) read once from standard input, for the streaming solvers in shell pipelines.

`zcat day-*.csv.gz | dmo train - --solver fofo -o model.safetensors` must work
without a temporary file, so nothing here needs a second look at the data:
the dialect is sniffed from the first lines and the column types from the
first block, both kept in memory and replayed in front of the rest of the
stream. Integer feature columns are read as float64 (the features are floats
anyway): a pipe cannot be re-read when a decimal turns up after the first
block, as a file can (io._stream_csv).
"""

from __future__ import annotations

import gzip
import io as pyio
import re
import sys
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Callable, Collection, Iterator

import pyarrow as pa

from dmocli.data.csv_dialect import (
    SNIFF_LINES,
    conversion_error_message,
    dialect_of_lines,
    refuse_non_utf8_header,
    refuse_repeated_header,
)
from dmocli.data.sources import STDIN_NAME as NAME
from dmocli.errors import DmoError

if TYPE_CHECKING:
    import pyarrow.csv as pacsv

_HEAD_BYTES = 1 << 20  # what the column types are inferred from: arrow's own first block
_BLOCK_BYTES = 1 << 22  # what is parsed at a time: large enough for arrow's threads, small next to memory
_LONGEST_LINE = 1 << 26  # a CSV line longer than this is not a row: refused before memory runs out
_ROW = re.compile(r"Row #(\d+)")


class _Replay(pyio.RawIOBase):
    """The bytes already read from a stream, then the rest of it: the sniffed head is not lost."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._head.nbytes:
            n = min(len(buffer), self._head.nbytes)
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@dataclass
class StdinCsv:
    """A CSV on standard input: its schema (from the head) and, once, its record batches."""

    schema: pa.Schema
    _head: bytes
    _rest: BinaryIO
    _parse: "pacsv.ParseOptions"
    _convert: "pacsv.ConvertOptions"
    _opened: bool = False

    def batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """The record batches of `columns` (the others are not even parsed); a pipe can be read only once."""
        if self._opened:
            raise DmoError(f"{NAME} can be read only once; save the data to a file for a second pass")
        self._opened = True
        self._convert.include_columns = columns
        return self._read()

    def _read(self) -> Iterator[pa.RecordBatch]:
        """Each block parsed here, on this thread: arrow's streaming reader would read the Python stream from
        a background thread, and a read still running while Python exits (after an error) aborts the process."""
        names = self.schema.names
        self._convert.column_types = {name: self.schema.field(name).type for name in self._convert.include_columns}
        lines_before = 0  # line ends in the blocks before: an error's row number counts from its block's start
        try:
            for number, block in enumerate(self._blocks()):
                if number == 0:
                    block = block.lstrip(b"\r\n")  # blank lines before the header: the header is skipped below
                    if not _line_ends(block):
                        continue  # the header alone
                try:
                    table = self._parse_block(block, header=number == 0, threads=True)
                except pa.ArrowInvalid:  # again on one thread, whose message has the row number, made the line's
                    self._parse_block(block, header=number == 0, threads=False, lines_before=lines_before)
                    raise
                lines_before += _line_ends(block)
                yield from (batch for batch in table.to_batches() if batch.num_rows)
        except (pa.ArrowInvalid, OSError, EOFError, zlib.error) as exc:
            raise DmoError(
                conversion_error_message(
                    NAME,
                    names,
                    exc,
                    fix="leave the column out (train: --drop "
                    "it), or save the data to a file, which dmo reads with types "
                    "inferred from every row",
                )
            ) from exc

    def _parse_block(self, block: bytes, header: bool, threads: bool, lines_before: int = 0) -> pa.Table:
        import pyarrow.csv as pacsv

        read = pacsv.ReadOptions(column_names=self.schema.names, skip_rows=1 if header else 0, use_threads=threads)
        try:
            return pacsv.read_csv(
                pa.BufferReader(block), read_options=read, parse_options=self._parse, convert_options=self._convert
            )
        except pa.ArrowInvalid as exc:
            if not lines_before:
                raise
            shifted = _ROW.sub(lambda m: f"Row #{int(m.group(1)) + lines_before}", str(exc), count=1)
            raise pa.ArrowInvalid(shifted) from exc

    def _blocks(self) -> Iterator[bytes]:
        """The stream (head first) in pieces of about _BLOCK_BYTES, each cut after a line end, so no row is split."""
        carry = self._head
        while chunk := self._rest.read(_BLOCK_BYTES):
            data = carry + chunk
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if cut:
                yield data[:cut]
            carry = data[cut:]
            if len(carry) > _LONGEST_LINE:
                raise _too_long()
        if carry.strip():
            yield carry


def _line_ends(block: bytes) -> int:
    """Lines in a block: its \n, or its \r in a file with old Mac line ends."""
    return block.count(b"\n") or block.count(b"\r")


def open_stdin_csv(
    is_feature: Callable[[str], bool], text_columns: Collection[str] = (), stream: BinaryIO | None = None
) -> StdinCsv:
    """Sniff the dialect and the column types from the head of the stream (standard input by default).

    Integer (and all-empty) columns for which is_feature(name) holds are read as float64, `text_columns` (a
    model's one-hot columns) as text; the others (the label, an id column) keep the type the head shows."""
    import pyarrow.csv as pacsv

    if stream is None and sys.stdin.isatty():  # reading would wait for the user to type
        raise DmoError(
            f"DATA '-' reads a CSV from {NAME}, which is a terminal here: pipe the data in "
            "(e.g. zcat data.csv.gz | dmo train - ...)"
        )
    raw: BinaryIO = sys.stdin.buffer if stream is None else stream
    magic = raw.read(2)
    if magic in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16's byte-order mark
        raise DmoError(f"{NAME} is UTF-16 text; dmo reads UTF-8 CSV: convert it (e.g. iconv -f utf-16 -t utf-8)")
    source: BinaryIO = pyio.BufferedReader(_Replay(magic, raw))
    if magic == b"\x1f\x8b":
        source = gzip.GzipFile(fileobj=source)  # type: ignore[assignment]
    try:
        head = _read_head(source)
    except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt gzip stream
        raise DmoError(f"cannot read {NAME}: {exc}") from exc
    if not head.strip():
        raise DmoError(f"{NAME} is empty: pipe a CSV with a header line into dmo")
    if head[:4] in _BINARY_MAGIC:
        raise DmoError(
            f"{NAME} holds a {_BINARY_MAGIC[head[:4]]} file, and dmo reads only CSV from it: give the file's path "
            "as DATA instead of piping it"
        )
    refuse_non_utf8_header(head, NAME)
    complete = head if head.endswith(b"\n") or len(head) < _HEAD_BYTES else head[: head.rfind(b"\n") + 1]
    lines = complete.decode("utf-8", errors="replace").splitlines(keepends=True)
    dialect = dialect_of_lines(lines[: SNIFF_LINES + 1], NAME)
    parse = pacsv.ParseOptions(delimiter=dialect.delimiter)
    convert = pacsv.ConvertOptions(strings_can_be_null=True, decimal_point=dialect.decimal_point)
    try:
        head_table = pacsv.read_csv(pa.BufferReader(complete), parse_options=parse, convert_options=convert)
    except pa.ArrowInvalid as exc:
        raise DmoError(f"cannot read {NAME} as CSV: {str(exc).splitlines()[0]}") from exc
    refuse_repeated_header(head_table, NAME)
    inferred = head_table.schema
    del head_table
    types = {
        field.name: pa.float64()
        for field in inferred
        if is_feature(field.name) and (pa.types.is_integer(field.type) or pa.types.is_null(field.type))
    }
    types.update({name: pa.string() for name in text_columns if name in inferred.names})
    convert.column_types = types
    schema = pa.schema([pa.field(f.name, types.get(f.name, f.type)) for f in inferred])
    return StdinCsv(schema, head, source, parse, convert)


_BINARY_MAGIC = {b"PAR1": "parquet", b"ARRO": "Arrow IPC", b"PK\x03\x04": "zip"}  # first 4 bytes: not CSV text


def _read_head(source: BinaryIO) -> bytes:
    """About the first MB, and at least the header and SNIFF_LINES lines when they are longer."""
    chunks: list[bytes] = []
    size = lines = 0
    while size < _HEAD_BYTES or lines <= SNIFF_LINES:
        chunk = source.read(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        lines += chunk.count(b"\n")
        if size > _LONGEST_LINE:
            raise _too_long()
    return b"".join(chunks)


def _too_long() -> DmoError:
    return DmoError(
        f"{NAME} has a line longer than {_LONGEST_LINE >> 20} MB (no line end in it): is it a CSV file? "
        "Pipe a CSV with one row per line"
    )
