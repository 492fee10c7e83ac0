"""Reading feature tables (parquet file, parquet directory, CSV) whole, by rows or in record batches, with one
set of error messages for every command."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from dmocli.data.parquet_layout import check_unique_names, parquet_layout
from dmocli.errors import DmoError

if TYPE_CHECKING:  # imported on use (open_dataset): it imports pandas
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads
from dmocli.data.csv_dialect import CONVERSION_ERROR, csv_dialect, csv_options, learn_csv_type, refuse_repeated_header
from dmocli.data.read_errors import READ_ERRORS, read_error
from dmocli.data.sources import Source, describe, is_csv_file, parquet_files


def open_dataset(path: Source, text_columns: Collection[str] = ()) -> "pads.Dataset":
    """A pyarrow dataset over a parquet file, a directory of parquet files, a CSV file, or an in-memory table.
    `text_columns`: CSV columns to read as text whatever they look like (see csv_options)."""
    import pyarrow.dataset as pads

    if isinstance(path, pa.Table):
        return pads.dataset(path)
    files = parquet_files(path)
    path = Path(path)
    try:
        if files is not None:
            # Without pre-buffering: it reads each whole column chunk's compressed bytes ahead of decoding, which
            # on a local file buys no speed and adds the compressed file's size to a whole-table read's peak.
            fmt = pads.ParquetFileFormat(
                default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=False)
            )
            return pads.dataset(files if path.is_dir() else files[0], format=fmt)
        if is_csv_file(path):
            if path.stat().st_size == 0:
                raise DmoError(f"{path} is empty (0 bytes); a CSV needs a header line and rows")
            parse, convert = csv_options(path, text_columns=text_columns)
            fmt = pads.CsvFileFormat(parse_options=parse, convert_options=convert, read_options=_csv_blocks(path))
            return pads.dataset(str(path), format=fmt)
        raise AssertionError("unreachable: a path is parquet or CSV")
    except DmoError:
        raise
    except READ_ERRORS as exc:
        raise read_error(path, exc) from exc


def _csv_blocks(path: Path) -> pacsv.ReadOptions:
    """Blocks of about 16 KiB a column (1 to 64 MiB): arrow's 1 MiB default made a 5,000-column CSV a record batch
    of 18 rows, and every step that works per column per batch ran 28 times for 500 rows (bench/wide_table.py)."""
    import pyarrow.csv as pacsv

    return pacsv.ReadOptions(block_size=min(64 << 20, max(1 << 20, len(csv_dialect(path).names) << 14)))


def read_table(path: Source, columns: list[str] | None = None, text_columns: Collection[str] = ()) -> pa.Table:
    """Read a whole table; refuses an empty one since no command can do anything with it. `text_columns`: CSV
    columns read as text (see csv_options)."""
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
            table = pa.concat_tables(
                [
                    layout.adapt(
                        pq.read_table(name, columns=layout.file_columns(columns), pre_buffer=False), name, columns
                    )
                    for name in files
                ]
            )
    except READ_ERRORS as exc:
        raise read_error(path, exc) from exc
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
                            pieces.append(
                                layout.adapt(pa.Table.from_batches([batch.slice(low - offset, high - low)]), name, None)
                            )
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
        raise read_error(path, exc, "parquet") from exc
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
        if CONVERSION_ERROR.search(str(exc)) is None:
            raise
        parse, convert = csv_options(path, columns, text_columns)
        table = pacsv.read_csv(path, parse_options=parse, convert_options=convert)  # in include_columns' order
    if _whole_rows(path, columns):
        refuse_repeated_header(table, path)
    return table


def _whole_rows(path: Path, columns: list[str] | None) -> bool:
    """Whether `columns` are all of the CSV file's. A repeated header line is a row equal to the whole header,
    which some of the columns cannot tell: predict reads a text feature `a` alone, and its level a is no header."""
    return columns is None or set(columns) >= set(csv_dialect(path).names)


def schema(path: Source, text_columns: Collection[str] = ()) -> pa.Schema:
    """The columns of the data; for parquet, as every file is read (dmocli.data.parquet_layout)."""
    files = parquet_files(path)
    if files is None:
        return open_dataset(path, text_columns).schema
    return parquet_layout(path, files).schema


def iter_batches(
    path: Source,
    batch_size: int = 65536,
    *,
    columns: list[str] | None = None,
    low_memory: bool = False,
    text_columns: Collection[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Stream record batches in file order; memory is O(batch), not O(rows).

    Parquet is read file by file, row group by row group, without
    pre-buffering: pyarrow's dataset scanner reads ahead of a slower consumer
    and its peak memory grew with the file (measured in bench/fofo.py).
    low_memory (CSV and other dataset reads): read ahead one file and two
    batches instead of pyarrow's 4 files and 16 batches. text_columns: CSV
    columns read as text (see csv_options).
    """
    files = parquet_files(path)
    readahead = {"fragment_readahead": 1, "batch_readahead": 2} if low_memory else {}
    try:
        if files is not None:
            layout = parquet_layout(path, files)
            read = layout.file_columns(columns)
            source: Iterator[pa.RecordBatch] = (
                layout.adapt(batch, name, columns)
                for name in files
                for batch in pq.ParquetFile(name, pre_buffer=False).iter_batches(batch_size=batch_size, columns=read)
            )
        else:
            if isinstance(path, pa.Table):
                yield from (
                    batch
                    for batch in path.select(columns or path.column_names).to_batches(batch_size)
                    if batch.num_rows
                )
            else:
                yield from _stream_csv(
                    Path(path), batch_size, columns=columns, readahead=readahead, text_columns=text_columns
                )
            return
        for batch in source:
            if batch.num_rows:
                yield batch
    except READ_ERRORS as exc:
        raise read_error(path, exc) from exc


def _stream_csv(
    path: Path, batch_size: int, *, columns: list[str] | None, readahead: dict[str, int], text_columns: Collection[str]
) -> Iterator[pa.RecordBatch]:
    """A CSV file's record batches. When a later row shows that an integer column holds decimals, the file
    is opened again with that column as float64 and the rows already yielded are skipped, so the caller
    sees every row once (its batches from then on carry the column as float64)."""
    done = 0
    whole_rows = _whole_rows(path, columns)
    while True:
        seen = 0
        try:
            for batch in open_dataset(path, text_columns).to_batches(
                columns=columns, batch_size=batch_size, **readahead
            ):
                if seen + batch.num_rows > done and batch.num_rows:
                    if whole_rows:
                        refuse_repeated_header(batch, path, seen)
                    yield batch.slice(max(0, done - seen))
                seen += batch.num_rows
                done = max(done, seen)
            return
        except pa.ArrowInvalid as exc:
            learn_csv_type(path, exc)


def sample_row_groups(path: Source, columns: list[str], max_rows: int) -> tuple[Iterator[pa.RecordBatch], int] | None:
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
        groups = [
            (name, i, meta.row_group(i).num_rows)
            for name in files
            for meta in [pq.ParquetFile(name).metadata]
            for i in range(meta.num_row_groups)
        ]
    except READ_ERRORS as exc:
        raise read_error(path, exc, "parquet") from exc
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
            raise read_error(path, exc, "parquet") from exc

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
        raise read_error(path, exc, "parquet") from exc
