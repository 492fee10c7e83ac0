"""Where data comes from: the suffixes of data files, standard input, the parquet files behind a path, and how
reports name a source."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from dmocli.errors import DmoError

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")  # output names written as parquet (any non-CSV file is read as one)
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson", ".json")  # text tables `dmo extract` reads
# Names of data files: an output (a model, a report) given one of these names is refused as a likely mix-up.
DATA_SUFFIXES = (*PARQUET_SUFFIXES, *CSV_SUFFIXES, ".json")


def is_csv_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(CSV_SUFFIXES)


def is_stdin(source: object) -> bool:
    """Whether a DATA or -o path names standard input or output (`-`); dmocli.data.stdin_csv reads it."""
    return isinstance(source, (str, os.PathLike)) and os.fspath(source) == "-"


def _check_exists(path: Path) -> None:
    if is_stdin(path) and not path.exists():
        raise DmoError(
            "'-' (standard input) is read only as the DATA of `dmo evaluate`, `predict`, `threshold`, and "
            "of `dmo train` with a streaming solver (fofo, ofo, lr); save the data to a file here"
        )
    if not path.exists():
        raise DmoError(f"input not found: {path} (check the path; parquet file, directory of parquet files, or CSV)")


Source = str | os.PathLike | pa.Table  # a path on disk, or a table already in memory (the Python API)


STDIN_NAME = "standard input"


def accept(data: Any) -> Source:
    """DATA as the Python API takes it: a path, a pyarrow Table, or a pandas DataFrame (as a Table, its index
    left out); anything else is refused by name rather than failing deep inside a reader."""
    if isinstance(data, (str, os.PathLike, pa.Table)):
        return data
    if type(data).__module__.split(".")[0] == "pandas" and type(data).__name__ == "DataFrame":
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # a column of mixed Python objects
            raise DmoError(f"the DataFrame cannot be read as a table ({exc}); give each column one type") from None
    raise DmoError(f"data must be a path, a pyarrow.Table or a pandas.DataFrame, not {type(data).__name__}")


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
            raise DmoError(
                f"no .parquet files in directory {path} (point to a parquet file, a CSV, or a folder of parquet files)"
            )
        return [str(p) for p in files]
    return None if is_csv_file(path) else [str(path)]


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
