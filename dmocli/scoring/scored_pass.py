"""The one pass that pushes a table through a saved model: the table opened (a file, a directory of parquet files,
or `-`: a CSV on standard input, read once), its columns checked against the model's in one line, its record
batches read ahead in a thread and scored while the next is read, a progress line, and each scored batch handed to
the accumulators that keep what a command needs (scoring/accumulators.py, use/monitor_read.py) or to a writer of
output rows (use/prediction_output.py).

With `--engine dask` the same per-batch work (`Scorer`) runs on each partition (one parquet file,
engines/dask_cluster.py) and the partitions' parts are merged in partition order, so every accumulator sees the
rows in the order the local engine reads them and the result is the local one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa

from dmocli import progress
from dmocli.data import reading, sources
from dmocli.data.prefetch import prefetched
from dmocli.data.stdin_csv import open_stdin_csv
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.prep.features import LevelCounts

BATCH_ROWS = 65536  # rows of a record batch read from a file (a CSV on standard input comes in its reader's blocks)

Part = TypeVar("Part")


@dataclass(frozen=True, kw_only=True)
class Scored:
    """One record batch (or Dask partition) pushed through the model: what every accumulator reads."""

    batch: pa.RecordBatch | pa.Table  # the columns read (with `derive`, after the stored derivation)
    features: np.ndarray  # the encoded rows the model scored
    levels: LevelCounts  # unseen or missing categorical levels
    logits: np.ndarray
    labels: np.ndarray | None  # the label codes (-1: none), where the pass reads the label column
    first_row: int | None  # the batch's first row in the table; None on Dask unless `positions` was asked

    @property
    def rows(self) -> int:
        return self.batch.num_rows


class Accumulator(Protocol[Part]):
    """What a command keeps of a pass, in two steps, so both engines give the same result: `take` turns one scored
    batch (or Dask partition, on its worker) into a part, small enough to send back, and `merge` folds the parts
    in row order into the result, in this process."""

    def take(self, scored: Scored) -> Part: ...

    def merge(self, part: Part) -> None: ...


class Sink(Protocol):
    """Where a local pass writes its rows (data/sinks.py's CSV and parquet writers, or a list in memory): entered
    before the first batch, left after the last (a file is renamed into place only then)."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> Any: ...

    def write(self, table: pa.Table) -> None: ...


class RowWriter(Protocol):
    """The rows a pass writes for each scored batch (predict's output), in `schema`."""

    schema: pa.Schema

    def rows(self, scored: Scored) -> pa.Table: ...


@dataclass(frozen=True)
class Scorer:
    """The per-batch work of both engines, sent to the Dask workers once (with the model and the accumulators)."""

    model: DmoModel
    labeled: bool = False  # encode the label column (read with the inputs)
    derive: bool = False  # keep the batch after the stored derivation (the profile's columns: dates as parts)
    first_rows: list[int] | None = None  # Dask: each partition's first row in the table

    def __call__(self, batch: pa.RecordBatch | pa.Table, part: int = 0, first_row: int | None = None) -> Scored:
        model = self.model
        if self.derive:
            batch = model.preprocessor.derived(batch)
        features, levels = model.preprocessor.transform(batch)
        logits = model.logits_of_features(features)
        labels = model.labels.encode(batch.column(model.labels.column)) if self.labeled else None
        if first_row is None and self.first_rows is not None:
            first_row = self.first_rows[part]
        return Scored(batch=batch, features=features, levels=levels, logits=logits, labels=labels, first_row=first_row)


@dataclass(frozen=True)
class _PartitionWork:
    """One Dask partition: scored once, each accumulator's part of it sent back with its row count."""

    scorer: Scorer
    accumulators: tuple[Accumulator[Any], ...]

    def __call__(self, table: pa.Table, part: int) -> tuple[int, list[Any]]:
        scored = self.scorer(table, part)
        return scored.rows, [accumulator.take(scored) for accumulator in self.accumulators]


@dataclass(frozen=True)
class _PartitionRows:
    """One Dask partition's output rows and its counts (engines/dask_cluster.py `write`: JSON, one row a part)."""

    scorer: Scorer
    writer: RowWriter

    def process(self, table: pa.Table, part: int = 0) -> tuple[pa.Table, dict[str, Any]]:
        scored = self.scorer(table, part)
        return self.writer.rows(scored), written_counts(scored)


def written_counts(scored: Scored) -> dict[str, Any]:
    """What a written batch leaves behind: its rows and level counts, as JSON (Dask sends it back as text)."""
    return {"rows": scored.rows, "levels": scored.levels.to_dict()}


def open_source(
    data: sources.Source, model: DmoModel
) -> tuple[pa.Schema, Callable[[list[str]], Iterator[pa.RecordBatch]]]:
    """DATA's schema, and a function streaming its batches of some columns: a file, or `-` (a CSV on standard
    input, read once: its integer columns the model uses as numbers are read as float64). A CSV's columns the
    model one-hot encodes are read as text."""
    text = model.preprocessor.text_columns  # from CSV as text, as they were trained ("001" stays "001")
    if sources.is_stdin(data):
        numeric = set(model.preprocessor.numeric)
        source = open_stdin_csv(numeric.__contains__, text)
        return source.schema, source.batches
    return reading.schema(data, text), lambda columns: reading.iter_batches(
        data, BATCH_ROWS, columns=columns, text_columns=text
    )


def row_count(data: sources.Source) -> int | None:
    """DATA's rows when its files say so without a read (parquet); None for CSV and standard input."""
    return None if sources.is_stdin(data) else reading.count_rows(data)


class ScoredTable:
    """A table opened for one scored pass: the engine's choice checked, the model's columns found in its schema
    (with `also`'s problems, in the same one-line refusal), before any row is read."""

    def __init__(
        self,
        model: DmoModel,
        data: sources.Source,
        *,
        engine: EngineChoice = LOCAL,
        also: Callable[[pa.Schema], list[str]] | None = None,
    ):
        engine.check(data)
        self.model, self.data, self.engine = model, data, engine
        self.schema, self._batches = open_source(data, model)
        problems = model.preprocessor.column_problems(self.schema) + (also(self.schema) if also else [])
        if problems:
            raise DmoError("; ".join(problems))

    def run(
        self,
        accumulators: Sequence[Accumulator[Any]],
        *,
        columns: list[str],
        task: str = "scoring",
        labeled: bool = False,
        derive: bool = False,
        positions: bool = False,
    ) -> int:
        """Every row of `columns` scored once and fed, batch by batch (or partition by partition) in row order, to
        each accumulator; the rows read. `positions`: each batch's first row is known on Dask too (read from the
        files' metadata, not their rows)."""
        scorer = Scorer(self.model, labeled=labeled, derive=derive)
        rows = 0
        if self.engine.is_dask:
            with self.engine.dask(self.data) as cluster:
                if positions:
                    scorer = Scorer(self.model, labeled=labeled, derive=derive, first_rows=cluster.first_rows())
                for part_rows, parts in cluster.map(_PartitionWork(scorer, tuple(accumulators)), columns):
                    for accumulator, part in zip(accumulators, parts):
                        accumulator.merge(part)
                    rows += part_rows
            return rows
        with closing(self._scored_locally(scorer, columns, task)) as batches:
            for scored in batches:
                for accumulator in accumulators:
                    accumulator.merge(accumulator.take(scored))
                rows += scored.rows
        return rows

    def write(
        self,
        writer: RowWriter,
        *,
        columns: list[str],
        sink: Sink | None = None,
        output: str | Path | None = None,
        check: Callable[[list[dict[str, Any]]], None] | None = None,
        task: str = "predicting",
    ) -> list[dict[str, Any]]:
        """Every row's output rows written: in this process to `sink`, batch by batch as the next is read ahead; on
        Dask, one part file a partition under the directory `output`. `check(counts)` (the --strict drift refusal)
        runs before the output is in place, so a refusal leaves no output. Each batch's (or partition's) counts,
        in row order."""
        if self.engine.is_dask:
            with self.engine.dask(self.data) as cluster:
                work = _PartitionRows(Scorer(self.model), writer)
                return cluster.write(work, Path(output), schema=writer.schema, columns=columns, check=check)
        counts: list[dict[str, Any]] = []
        with sink, closing(self._scored_locally(Scorer(self.model), columns, task)) as batches:
            for scored in batches:
                sink.write(writer.rows(scored))
                counts.append(written_counts(scored))
            if check is not None:
                check(counts)  # inside the sink: a refusal leaves no output file
        return counts

    def _scored_locally(self, scorer: Scorer, columns: list[str], task: str) -> Iterator[Scored]:
        """This process's batches, each read while the one before is scored, scored in order with its first row."""
        first_row = 0
        with progress.task(task, total=lambda: row_count(self.data), unit="rows") as bar:
            for batch in progress.advancing(prefetched(self._batches(columns)), bar):  # read ahead
                yield scorer(batch, first_row=first_row)
                first_row += batch.num_rows
