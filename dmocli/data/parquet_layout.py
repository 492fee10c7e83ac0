"""How the files of a parquet path are read as one table, the same way by every reader of dmocli.

Data written by several jobs is rarely uniform. A column may be int64 in one
file and double in the next (once a value had a decimal point), string in one
and large_string or dictionary-encoded in another (pandas, polars and Spark
each choose), or in another order. Spark and Hive also keep columns in folder
names (`region=eu/year=2024/part-0.parquet`). The layout fixes one schema for
all files: the first file's columns, each in the common type of its kind
(numbers: int64, or float64 once any file has floats; text: string), then the
partition columns. A column that is text in one file and a number in
another, or missing from a file, is refused naming both files.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from dmocli.data.arrow_numpy import repeated
from dmocli.data.read_errors import READ_ERRORS
from dmocli.errors import DmoError, first_line

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # how Hive and Spark name the folder of a null partition value
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")  # no leading zeros: store=007 or a zip code stays text
_INT64 = (-(2**63), 2**63 - 1)

# string_view came with pyarrow 16; the package accepts 14, which reads such parquet columns as plain strings.
_is_string_view = getattr(pa.types, "is_string_view", lambda kind: False)


def _kind(kind: pa.DataType) -> str:
    """What a column holds, whatever its physical type: number, text, or the type's own name."""
    if pa.types.is_dictionary(kind):
        return _kind(kind.value_type)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "number"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or _is_string_view(kind):
        return "text"
    return str(kind)


def _without_views(schema: pa.Schema) -> pa.Schema:
    """string_view columns (polars and DuckDB write them) as plain strings: text is text whatever its arrow type,
    and the hash and string kernels the features use take plain strings."""
    return pa.schema(
        [pa.field(f.name, pa.string(), f.nullable, f.metadata) if _is_string_view(f.type) else f for f in schema],
        metadata=schema.metadata,
    )


def conform(column: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A column in the layout's type: dictionaries decoded, text as text, numbers widened. An int64 read as
    float64 may round past 2^53, as it would in any float column (no error: safe=False for numbers only)."""
    if column.type == target:
        return column
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    numbers = _kind(column.type) == "number" and _kind(target) == "number"
    return column.cast(target, safe=not numbers)


@dataclass(frozen=True)
class ParquetLayout:
    """The schema every file of a parquet path is read as, and its partition columns (see the module)."""

    schema: pa.Schema  # the files' columns in the first file's order, then the partition columns
    partition_keys: tuple[str, ...]
    partitions: dict[str, dict[str, Any]] = field(default_factory=dict)  # file -> {partition column: value}
    uniform: bool = True  # every file has exactly the schema's types and order, and there are no partitions

    def file_columns(self, columns: list[str] | None) -> list[str] | None:
        """The requested columns that are read from the files (partition columns come from folder names)."""
        return None if columns is None else [c for c in columns if c not in self.partition_keys]

    def adapt(
        self, batch: pa.RecordBatch | pa.Table, file: str, columns: list[str] | None
    ) -> pa.RecordBatch | pa.Table:
        """A batch (or table) of `file` in the layout's types and order, with the requested partition columns."""
        if self.uniform:
            return batch
        names = [c for c in (self.file_columns(columns) or self.schema.names) if c in batch.schema.names]
        fields = [self.schema.field(name) for name in names]
        arrays = [conform(batch.column(name), f.type) for name, f in zip(names, fields)]
        for key in self.partition_keys:
            if columns is None or key in columns:
                fields.append(self.schema.field(key))
                arrays.append(repeated(self.partitions[file][key], self.schema.field(key).type, batch.num_rows))
        build = pa.RecordBatch.from_arrays if isinstance(batch, pa.RecordBatch) else pa.Table.from_arrays
        return build(arrays, schema=pa.schema(fields))

    @property
    def has_null_partition(self) -> bool:
        return any(value is None for values in self.partitions.values() for value in values.values())


def parquet_layout(root: str | os.PathLike, files: list[str]) -> ParquetLayout:
    """The layout of the parquet files behind `root`; cached per file version (name, size, modification
    time), since every pass asks and a rewritten file must be read afresh."""
    try:
        versions = tuple((name, stat.st_size, stat.st_mtime_ns) for name, stat in ((n, os.stat(n)) for n in files))
    except OSError as exc:
        raise DmoError(f"cannot read {root}: {exc} (is it a valid parquet file?)") from exc
    return _layout(str(root), versions)


@functools.lru_cache(maxsize=16)
def _layout(root: str, versions: tuple[tuple[str, int, int], ...]) -> ParquetLayout:
    files = [name for name, _, _ in versions]
    schemas = []
    for name in files:
        try:
            schemas.append(pq.read_schema(name))
        except READ_ERRORS as exc:  # name the file: a folder of thousands says nothing about which one
            hint = (
                "remove or rewrite it"
                if name.endswith(".parquet")
                else "dmo reads parquet files, and CSV files named .csv, .csv.gz or .tsv"
            )
            raise DmoError(f"cannot read {name}: {first_line(exc)} (is it a valid parquet file? {hint})") from exc
    for name, schema in zip(files, schemas):
        check_unique_names(schema.names, name)
    first = schemas[0]
    same = all(s.remove_metadata().equals(first.remove_metadata()) for s in schemas[1:])
    unified = _without_views(first if same else _unify(files, schemas))
    same = same and unified.equals(first, check_metadata=False)
    partitions, keys = _hive_partitions(Path(root), files, set(first.names))
    fields = list(unified)
    for key in keys:
        values = [v[key] for v in partitions.values() if v[key] is not None]
        integers = all(_INTEGER.fullmatch(v) and _INT64[0] <= int(v) <= _INT64[1] for v in values)
        fields.append(pa.field(key, pa.int64() if integers else pa.string()))
        for v in partitions.values():
            if integers and v[key] is not None:
                v[key] = int(v[key])
    return ParquetLayout(pa.schema(fields, metadata=first.metadata), tuple(keys), partitions, uniform=same and not keys)


def check_unique_names(names: list[str], source: object) -> None:
    """Refuse a table naming a column twice (pyarrow writes such parquet files without complaint): no reader
    could tell which one a feature, the label or --drop means."""
    counts = Counter(names)  # one count each: names.count per name was quadratic, 0.4 s at 5,000 columns
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated == [""]:
        raise DmoError(
            f"{source} has {counts['']} columns without a name in its header (the trailing delimiters "
            "a spreadsheet writes after the last column?); delete those columns or give them names"
        )
    if repeated:
        raise DmoError(
            f"{source} names column(s) {', '.join(map(repr, repeated[:6]))} more than once; rename the duplicates"
        )


def _hive_partitions(
    root: Path, files: list[str], file_columns: set[str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """file -> {key: text value} from the `key=value` folders between root and each file, and the keys.
    A key that is also a column of the files is left to the files. Files under differently named folders
    are refused: which rows would lack the column?"""
    if not root.is_dir():
        return {}, []
    found: dict[str, dict[str, Any]] = {}
    for name in files:
        parts = Path(name).relative_to(root).parts[:-1]
        pairs = [part.split("=", 1) for part in parts if "=" in part]
        found[name] = {
            unquote(k): (None if v == HIVE_NULL else unquote(v)) for k, v in pairs if unquote(k) not in file_columns
        }
    keys = [sorted(v) for v in found.values()]
    if not any(keys):
        return {}, []
    odd = next((name for name, k in zip(files, keys) if k != keys[0]), None)
    if odd is not None:
        raise DmoError(
            f"{files[0]} and {odd} are not under the same partition folders (key=value) of {root}; "
            "give a directory whose files are partitioned alike"
        )
    return found, list(found[files[0]])


def _unify(files: list[str], schemas: list[pa.Schema]) -> pa.Schema:
    first = schemas[0]
    for name, other in zip(files[1:], schemas[1:]):
        absent = sorted(set(first.names) ^ set(other.names))
        if absent:
            raise DmoError(
                f"{name} and {files[0]} differ in their columns ({', '.join(absent[:6])}); "
                "give files with the same columns"
            )
    fields = []
    for column in first.names:
        types = [s.field(column).type for s in schemas]
        fields.append(pa.field(column, _common_type(column, types, files)))
    return pa.schema(fields)


def _common_type(column: str, types: list[pa.DataType], files: list[str]) -> pa.DataType:
    present = [(t, name) for t, name in zip(types, files) if not pa.types.is_null(t)]  # an all-null column: any type
    if not present:
        return types[0]
    kinds = {_kind(t) for t, _ in present}
    if len(kinds) > 1 or (len({t for t, _ in present}) > 1 and kinds - {"number", "text"}):
        (a, first_file), (b, other) = present[0], next(p for p in present if p[0] != present[0][0])
        raise DmoError(
            f"column '{column}' is {a} in {first_file} but {b} in {other}; give files with the same column types"
        )
    distinct = {t for t, _ in present}
    if len(distinct) == 1:
        return distinct.pop()
    if kinds == {"text"}:
        return pa.large_string() if any(pa.types.is_large_string(t) for t in distinct) else pa.string()
    values = [t.value_type if pa.types.is_dictionary(t) else t for t in distinct]
    if any(pa.types.is_floating(t) for t in values) or pa.uint64() in values:
        return pa.float64()
    return pa.int64()
