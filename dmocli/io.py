"""Reading feature tables (parquet file, parquet directory, CSV) and writing outputs atomically.

Everything that touches the file system for data goes through here so that
commands share one set of error messages and one "never half-written" rule.
"""
from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import DmoError

if TYPE_CHECKING:  # imported on use (open_dataset): it imports pandas
    import pyarrow.dataset as pads

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")


def _is_csv(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(CSV_SUFFIXES)


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise DmoError(f"input not found: {path} (check the path; parquet file, directory of parquet files, or CSV)")


Source = str | os.PathLike | pa.Table  # a path on disk, or a table already in memory (the Python API)


def describe(source: Source) -> str:
    """What a report calls the data: its path, or a short description of an in-memory table."""
    if isinstance(source, pa.Table):
        return f"<in-memory table: {source.num_rows} rows x {source.num_columns} columns>"
    return str(source)


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
        files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
        if not files:
            raise DmoError(f"no .parquet files in directory {path} (point to a parquet file, a CSV, or a folder of parquet files)")
        return [str(p) for p in files]
    return None if _is_csv(path) else [str(path)]


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # how Hive and Spark name the directory of a null partition value


@dataclass(frozen=True)
class ParquetLayout:
    """How the files of a parquet path are read as one table: the schema every file is read as, and the
    columns held in Hive-style directory names (`region=eu/part-0.parquet`), as Spark and Hive write them.

    Files written by different jobs often disagree on a numeric column's
    width or kind (int64 in one, double in the next, once a value had a
    decimal point); such columns are read as the wider type, as pyarrow's
    permissive promotion does. A column that is text in one file and a
    number in another, or missing from a file, is refused naming both files.
    A partition column is int64 when every value is an integer, else text;
    a column of the files themselves wins over a directory name.
    """

    schema: pa.Schema  # the files' columns, then the partition columns
    cast: bool  # some file's own types differ from the schema's
    partitions: dict[str, dict[str, Any]]  # file -> {partition column: value}

    def adapt(self, batch: pa.RecordBatch | pa.Table, file: str, columns: list[str] | None):
        """A batch of `file` in the layout's types, with the requested partition columns appended."""
        if self.cast:
            batch = batch.cast(pa.schema([self.schema.field(name) for name in batch.schema.names]))
        values = self.partitions.get(file, {})
        for name, value in values.items():
            if columns is None or name in columns:
                kind = self.schema.field(name).type
                batch = batch.append_column(self.schema.field(name), pa.array([value] * batch.num_rows, kind))
        return batch

    def file_columns(self, columns: list[str] | None) -> list[str] | None:
        """The requested columns that are read from the files (partition columns come from the paths)."""
        keys = set(next(iter(self.partitions.values()), {}))
        return None if columns is None else [c for c in columns if c not in keys]


def parquet_layout(root: Source, files: list[str]) -> ParquetLayout:
    """The layout of the parquet files behind `root` (see ParquetLayout); cached, since every pass asks."""
    return _parquet_layout(str(root), tuple(files))


@functools.lru_cache(maxsize=16)
def _parquet_layout(root: str, files: tuple[str, ...]) -> ParquetLayout:
    try:
        schemas = [pq.read_schema(name).remove_metadata() for name in files]
    except READ_ERRORS as exc:
        raise _read_error(root, exc, "parquet") from exc
    first = schemas[0]
    cast = not all(other.equals(first) for other in schemas[1:])
    unified = _unify(files, schemas) if cast else pq.read_schema(files[0])
    partitions = _hive_partitions(Path(root), files, set(first.names))
    fields = list(unified)
    for key in next(iter(partitions.values()), {}):
        values = [v[key] for v in partitions.values() if v[key] is not None]
        integers = all(_INTEGER.fullmatch(v) for v in values)
        fields.append(pa.field(key, pa.int64() if integers else pa.string()))
        if integers:
            for v in partitions.values():
                v[key] = None if v[key] is None else int(v[key])
    return ParquetLayout(pa.schema(fields, metadata=unified.metadata), cast, partitions)


_INTEGER = re.compile(r"[-+]?[0-9]+")


def _hive_partitions(root: Path, files: tuple[str, ...], file_columns: set[str]) -> dict[str, dict[str, Any]]:
    """file -> {key: text value} from the `key=value` directories between root and the file; {} when the
    directories are not named that way, or not the same keys for every file."""
    if not root.is_dir():
        return {}
    found: dict[str, dict[str, Any]] = {}
    for name in files:
        parts = Path(name).relative_to(root).parts[:-1]
        pairs = [part.split("=", 1) for part in parts if "=" in part]
        found[name] = {unquote(k): (None if v == HIVE_NULL else unquote(v)) for k, v in pairs
                       if unquote(k) not in file_columns}
    keys = [list(v) for v in found.values()]
    if not keys[0] or any(k != keys[0] for k in keys):
        return {}
    return found


def _unify(files: tuple[str, ...], schemas: list[pa.Schema]) -> pa.Schema:
    first = schemas[0]
    for name, other in zip(files[1:], schemas[1:]):
        absent = [c for c in first.names if c not in other.names] + [c for c in other.names if c not in first.names]
        if absent:
            raise DmoError(f"{name} and {files[0]} differ in their columns ({', '.join(absent[:6])}); "
                           "give files with the same columns")
    try:
        unified = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        unified = None
    if unified is not None and all(
            _numeric_or_same(unified.field(c).type, s.field(c).type) for s in schemas for c in s.names):
        return unified
    for name, other in zip(files[1:], schemas[1:]):
        for column in first.names:
            a, b = first.field(column).type, other.field(column).type
            if a != b and not (_is_number(a) and _is_number(b)):
                raise DmoError(f"column '{column}' is {a} in {files[0]} but {b} in {name}; "
                               "give files with the same column types")
    raise DmoError(f"the files of {Path(files[0]).parent} do not share one schema; give files with the same "
                   "columns and types")


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _numeric_or_same(unified: pa.DataType, own: pa.DataType) -> bool:
    """A file's column may be read as the unified type: the same type, or numbers widened to numbers."""
    return unified == own or (_is_number(unified) and _is_number(own)) or pa.types.is_null(own)


def open_dataset(path: Source) -> "pads.Dataset":
    """A pyarrow dataset over a parquet file, a directory of parquet files, a CSV file, or an in-memory table."""
    import pyarrow.csv as pacsv
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
            if not path.is_dir():
                return pads.dataset(files[0], format=fmt)
            layout = parquet_layout(path, files)
            partition_keys = list(next(iter(layout.partitions.values()), {}))
            partitioning = pads.partitioning(pa.schema([layout.schema.field(k) for k in partition_keys]),
                                             flavor="hive") if partition_keys else None
            return pads.dataset(files, format=fmt, schema=layout.schema, partitioning=partitioning,
                                partition_base_dir=str(path))
        if _is_csv(path):
            dialect = csv_dialect(path)
            # an empty cell is missing in every column, strings included (a missing label = an unlabeled row)
            fmt = pads.CsvFileFormat(parse_options=pacsv.ParseOptions(delimiter=dialect.delimiter),
                                     convert_options=pacsv.ConvertOptions(strings_can_be_null=True,
                                                                          decimal_point=dialect.decimal_point))
            return pads.dataset(str(path), format=fmt)
        raise AssertionError("unreachable: a path is parquet or CSV")
    except DmoError:
        raise
    except READ_ERRORS as exc:
        raise _read_error(path, exc) from exc


@dataclass(frozen=True)
class CsvDialect:
    delimiter: str
    decimal_point: str


SNIFF_LINES = 50
_DECIMAL_COMMA = re.compile(r"[-+]?[0-9]*,[0-9]+")
_DECIMAL_POINT = re.compile(r"[-+]?[0-9]*\.[0-9]+")


def csv_dialect(path: Path) -> CsvDialect:
    """How a CSV file is written, read from its first lines. Delimiter: a tab for .tsv; otherwise a comma,
    unless the header has none but has semicolons, tabs or pipes. Decimal point: a comma when the delimiter
    is not one and the numbers of the first lines are written 1,5 (never 1.5), as spreadsheets in many
    locales export. Refuses a header that names a column twice, which no reader could map to one feature."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
            lines = [line for _, line in zip(range(SNIFF_LINES + 1), handle)]
    except (OSError, EOFError) as exc:
        raise _read_error(path, exc, "CSV") from exc
    header = lines[0] if lines else ""
    if path.name.lower().endswith(".tsv"):
        delimiter = "\t"
    else:
        delimiter = next((d for d in ",;\t|" if d in header), ",")
    rows = list(csv.reader(lines, delimiter=delimiter))
    names = rows[0] if rows else []
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DmoError(f"{path} names column(s) {', '.join(map(repr, repeated[:6]))} more than once in its header; "
                       "rename the duplicates")
    cells = [cell.strip() for row in rows[1:] for cell in row]
    comma = delimiter != "," and any(_DECIMAL_COMMA.fullmatch(c) for c in cells) and not any(
        _DECIMAL_POINT.fullmatch(c) for c in cells)
    return CsvDialect(delimiter, "," if comma else ".")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (arrow's run on for many lines)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


READ_ERRORS = (pa.ArrowInvalid, OSError)  # pyarrow's ArrowIOError is OSError


def _read_error(path: object, exc: BaseException, kinds: str = "parquet or CSV") -> DmoError:
    """The one-line message every failed read ends in."""
    return DmoError(f"cannot read {path}: {first_line(exc)} (is it a valid {kinds} file?)")


def read_table(path: Source, columns: list[str] | None = None) -> pa.Table:
    """Read a whole table; refuses an empty one since no command can do anything with it."""
    if isinstance(path, pa.Table):
        if path.num_rows == 0:
            raise DmoError("the table has no rows (give a table with at least one row)")
        return path if columns is None else path.select(columns)
    dataset = open_dataset(path)
    try:
        table = dataset.to_table(columns=columns)
    except READ_ERRORS as exc:
        raise _read_error(path, exc) from exc
    pa.default_memory_pool().release_unused()  # decoding's scratch pages: the table is what stays
    if table.num_rows == 0:
        raise DmoError(f"{path} has no rows (give a table with at least one row)")
    return table


def schema(path: Source) -> pa.Schema:
    """The columns of the data; for a parquet directory, as every file is read (ParquetLayout)."""
    files = parquet_files(path)
    if files is None:
        return open_dataset(path).schema
    return parquet_layout(path, files).schema


def iter_batches(
    path: Source, batch_size: int = 65536, columns: list[str] | None = None, low_memory: bool = False
) -> Iterator[pa.RecordBatch]:
    """Stream record batches in file order; memory is O(batch), not O(rows).

    Parquet is read file by file, row group by row group, without
    pre-buffering: pyarrow's dataset scanner reads ahead of a slower consumer
    and its peak memory grew with the file (measured in bench/fofo.py).
    low_memory (CSV and other dataset reads): read ahead one file and two
    batches instead of pyarrow's 4 files and 16 batches.
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
            source = open_dataset(path).to_batches(columns=columns, batch_size=batch_size, **readahead)
        for batch in source:
            if batch.num_rows:
                yield batch
    except READ_ERRORS as exc:
        raise _read_error(path, exc) from exc


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


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only on success.

    A crash or a bad input half-way leaves the old file (or nothing) behind,
    never a truncated output that a batch job could pick up.
    """
    target = Path(path)
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
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def check_writable(path: str | os.PathLike) -> None:
    """Fail before any expensive work if the output cannot be written."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise DmoError(f"output path {target} is a directory (give a file name)")
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


def check_distinct(outputs: dict[str, str | os.PathLike | None], inputs: dict[str, Source | None]) -> None:
    """Refuse an output that would replace an input or another output.

    Outputs are written atomically, so a wrong path never leaves a half-written
    file, but `-o data.parquet` would still swap the user's data for a model,
    and a report named like the model would replace it. A parquet output
    inside an input directory would be read as data by the next run.
    """
    given = {name: Path(path) for name, path in outputs.items() if path is not None}
    sources = {name: Path(path) for name, path in inputs.items() if path is not None and not isinstance(path, pa.Table)}
    for name, path in given.items():
        target = path.resolve()
        for other, source in sources.items():
            if target == source.resolve() or (target.exists() and source.exists() and os.path.samefile(target, source)):
                raise DmoError(f"{name} {path} is the same file as {other}; writing it would replace that file "
                               "(choose another output path)")
            if source.is_dir() and target.suffix == ".parquet" and source.resolve() in target.parents:
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
        self._tmp = self._stack.enter_context(atomic_path(path))
        self._writer = pq.ParquetWriter(str(self._tmp), schema)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if isinstance(batch, pa.RecordBatch):
            self._writer.write_batch(batch)
        else:
            self._writer.write_table(batch)

    def __enter__(self) -> "ParquetSink":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._writer.close()
        return self._stack.__exit__(exc_type, exc, tb)


def write_parquet(path: str | os.PathLike, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, str(tmp))
