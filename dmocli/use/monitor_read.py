"""`dmo monitor`'s one pass over NEW, in this process or on Dask workers: each row's logit and label (-1: none),
the feature profile, per chunk too.

Both engines run the same per-batch work (`SectionScorer`): the local engine on record batches, in order; the Dask
engine on each partition (one parquet file, engines/dask_cluster.py), merged in partition order. The merge is
exact: logits and labels are concatenated in row order, and the feature profile counts into the stored profile's
fixed bins and levels (ProfileBuilder.merge), so a section's report is the same on either engine. Scores are
profiled once per section, from its logits in row order (monitor.py), not per batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dmocli import progress
from dmocli.data import sources
from dmocli.data.prefetch import prefetched
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.pipelines.scoring import open_data, row_count
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.prep.row_fingerprint import candidate_hashes, row_hashes

MAX_CHUNKS = 1000  # a chunk column with more values is an id or a timestamp, not a period


@dataclass
class Section:
    """The rows of one chunk (or of all NEW): their logits, labels (-1: none) and feature profile; for all NEW, also
    each row's fingerprint hashes (prep/row_fingerprint.py) where the model keeps a fingerprint."""

    name: str
    logits: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    builder: ProfileBuilder | None = None
    hashes: list[np.ndarray] = field(default_factory=list)  # (n, K) candidate hashes, one column per class

    def add(self, batch: pa.RecordBatch | pa.Table, logits: np.ndarray, labels: np.ndarray) -> None:
        self.logits.append(logits)
        self.labels.append(labels)
        if self.builder is not None:
            self.builder.add(batch)

    def merge(self, other: Section) -> None:
        """Append `other`'s rows, which follow this section's in NEW."""
        self.logits += other.logits
        self.labels += other.labels
        self.hashes += other.hashes
        if self.builder is not None and other.builder is not None:
            self.builder.merge(other.builder)


@dataclass
class Sections:
    """All of NEW (`whole`) and, with --chunk-col or --chunk-size, each chunk by its key, in order of appearance."""

    whole: Section
    keyed: dict[Any, Section] = field(default_factory=dict)
    rows: int = 0
    too_many: bool = False  # a batch with more than MAX_CHUNKS chunks: none made, refused where merged

    def chunk(self, key: Any, model: DmoModel, chunk_col: str | None) -> Section:
        """The chunk of `key`, made on its first row; refused past MAX_CHUNKS chunks."""
        if key not in self.keyed and len(self.keyed) == MAX_CHUNKS:
            raise _too_many(chunk_col)
        return self.keyed.setdefault(key, Section(str(key), builder=profile_builder(model)))

    def merge(self, other: Sections, model: DmoModel, chunk_col: str | None) -> None:
        """Append `other`, the sections of the rows that follow these in NEW."""
        if other.too_many:
            raise _too_many(chunk_col)
        self.whole.merge(other.whole)
        for key, section in other.keyed.items():
            self.chunk(key, model, chunk_col).merge(section)
        self.rows += other.rows


def profile_builder(model: DmoModel) -> ProfileBuilder | None:
    """A builder counting into the model's stored profile's bins and levels; None when the file has no profile."""
    return None if model.profile is None else ProfileBuilder.matching(model.profile, model.preprocessor.categorical)


@dataclass
class SectionScorer:
    """One batch's (or Dask partition's) sections: the per-batch work of both engines, sent to the Dask workers
    once, with the model. `first_rows` holds each partition's first row in NEW (Dask: --chunk-size counts rows
    across partitions); the local engine passes the batch's first row itself."""

    model: DmoModel
    labeled: bool
    chunk_col: str | None = None
    chunk_size: int | None = None
    first_rows: list[int] | None = None

    def __call__(self, batch: pa.RecordBatch | pa.Table, part: int = 0, first_row: int | None = None) -> Sections:
        model = self.model
        derived = model.preprocessor.derived(batch)  # dates as parts, numbers parsed: the profile's columns
        features, _ = model.preprocessor.transform(derived)
        logits = model.logits_of_features(features)
        labels = model.labels.encode(batch.column(model.labels.column)) if self.labeled else np.full(batch.num_rows, -1)
        found = Sections(Section("all", builder=profile_builder(model)), rows=batch.num_rows)
        found.whole.add(derived, logits, labels)
        if model.training_rows is not None:
            found.whole.hashes.append(_row_hashes(features, labels, len(model.labels.classes)))
        if self.chunk_col is not None or self.chunk_size is not None:
            first = first_row if first_row is not None else (self.first_rows or [0])[part]
            keys = _chunk_keys(batch, self.chunk_col, self.chunk_size, first)
            distinct = dict.fromkeys(keys.tolist())
            found.too_many = len(distinct) > MAX_CHUNKS  # said by the client: a Dask worker's error logs a traceback
            for key in [] if found.too_many else distinct:
                rows = np.flatnonzero(keys == key)
                found.chunk(key, model, self.chunk_col).add(derived.take(pa.array(rows)), logits[rows], labels[rows])
        return found


def read_sections(
    model: DmoModel,
    data: sources.Source,
    *,
    chunk_col: str | None,
    chunk_size: int | None,
    engine: EngineChoice = LOCAL,
) -> tuple[Section, list[Section]]:
    """One pass over NEW: all of it, and its chunks in order (numbers by value, text as text, missing last)."""
    engine.check(data)
    schema, batches = open_data(data, model)
    problems = model.preprocessor.column_problems(schema)
    if chunk_col is not None and chunk_col not in schema.names:
        problems.append(f"--chunk-col {chunk_col!r} is not a column of {sources.describe(data)}")
    if problems:
        raise DmoError("; ".join(problems))
    labeled = model.labels.column in schema.names
    columns = [*model.preprocessor.input_columns, *([model.labels.column] if labeled else [])]
    columns += [chunk_col] if chunk_col is not None and chunk_col not in columns else []
    scorer = SectionScorer(model, labeled, chunk_col, chunk_size)
    found = Sections(Section("all", builder=profile_builder(model)))
    if engine.is_dask:
        with engine.dask(data) as cluster:
            scorer.first_rows = _first_rows(cluster.entries)
            for part in cluster.map(scorer, columns):
                found.merge(part, model, chunk_col)
    else:
        with progress.task("monitor", total=lambda: row_count(data), unit="rows") as bar:
            for batch in progress.advancing(prefetched(batches(columns)), bar):
                found.merge(scorer(batch, first_row=found.rows), model, chunk_col)
    if found.rows == 0:
        raise DmoError(f"{sources.describe(data)} has no rows to monitor")
    return found.whole, [found.keyed[key] for key in sorted(found.keyed, key=_sortable)]


def _row_hashes(features: np.ndarray, labels: np.ndarray, classes: int) -> np.ndarray:
    """Each row's fingerprint hash under every class, (n, K); a labeled row's under its own label in every column
    (it matches only as the training row it is)."""
    hashes = candidate_hashes(features, classes)
    labeled = labels >= 0
    if labeled.any():
        hashes[labeled] = row_hashes(features[labeled], labels[labeled])[:, None]
    return hashes


def _too_many(chunk_col: str | None) -> DmoError:
    if chunk_col is None:
        return DmoError(f"--chunk-size makes more than {MAX_CHUNKS} chunks of NEW; give a larger --chunk-size")
    return DmoError(
        f"--chunk-col {chunk_col!r} has more than {MAX_CHUNKS} values (an id or a timestamp?); give "
        "a column of periods (a day, a week), or --chunk-size N"
    )


def _first_rows(entries: list[tuple[str, str]]) -> list[int]:
    """Each partition's (parquet file's) first row in NEW, from the files' metadata: nothing is read."""
    counts = [pq.ParquetFile(path).metadata.num_rows for _, path in entries]
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist() if counts else []


def _chunk_keys(batch: pa.RecordBatch, chunk_col: str | None, chunk_size: int | None, first_row: int) -> np.ndarray:
    """Each row's chunk: its value of --chunk-col, else its position // --chunk-size (with both: the value, and
    within it, the position)."""
    if chunk_col is None:
        return (first_row + np.arange(batch.num_rows)) // chunk_size
    values = np.asarray(pc.cast(batch.column(chunk_col), pa.string()).to_pylist(), dtype=object)
    if chunk_size is None:
        return values
    positions = (first_row + np.arange(batch.num_rows)) // chunk_size
    return np.array([f"{value}/{position}" for value, position in zip(values, positions)], dtype=object)


def _sortable(key: Any) -> tuple[int, Any]:
    """Chunks in order: numbers by value, text (a date, a month) as text; missing values last."""
    if key is None:
        return (2, "")
    return (0, key) if isinstance(key, (int, np.integer)) else (1, str(key))
