"""`dmo monitor`'s one pass over NEW (scoring/scored_pass.py), in this process or on Dask workers: each row's logit
and label (-1: none), the feature profile, per chunk too.

Both engines take the same sections of each scored batch (`MonitorSections.take`): the local engine of record
batches, in order; the Dask engine of each partition (one parquet file, engines/dask_cluster.py), merged in
partition order. The merge is exact: logits and labels are concatenated in row order, and the feature profile
counts into the stored profile's fixed bins and levels (ProfileBuilder.merge), so a section's report is the same on
either engine. Scores are profiled once per section, from its logits in row order (monitor.py), not per batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data import sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.scoring.accumulators import RowHashes
from dmocli.scoring.scored_pass import Scored, ScoredTable

MAX_CHUNKS = 1000  # a chunk column with more values is an id or a timestamp, not a period


@dataclass
class Section:
    """The rows of one chunk (or of all NEW): their logits, labels (-1: none) and feature profile."""

    name: str
    logits: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    builder: ProfileBuilder | None = None

    def add(self, batch: pa.RecordBatch | pa.Table, logits: np.ndarray, labels: np.ndarray) -> None:
        self.logits.append(logits)
        self.labels.append(labels)
        if self.builder is not None:
            self.builder.add(batch)

    def merge(self, other: Section) -> None:
        """Append `other`'s rows, which follow this section's in NEW."""
        self.logits += other.logits
        self.labels += other.labels
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
class MonitorSections:
    """The accumulator of monitor's pass (scoring/scored_pass.py): each batch's (or Dask partition's) sections, taken
    where the batch is, merged in row order. `--chunk-size` counts rows from the batch's first row in NEW."""

    model: DmoModel
    chunk_col: str | None = None
    chunk_size: int | None = None
    found: Sections | None = None  # every section merged so far

    def take(self, scored: Scored) -> Sections:
        model = self.model
        labels = scored.labels if scored.labels is not None else np.full(scored.rows, -1)
        found = Sections(Section("all", builder=profile_builder(model)), rows=scored.rows)
        found.whole.add(scored.batch, scored.logits, labels)
        if self.chunk_col is not None or self.chunk_size is not None:
            keys = _chunk_keys(scored.batch, self.chunk_col, self.chunk_size, scored.first_row)
            distinct = dict.fromkeys(keys.tolist())
            found.too_many = len(distinct) > MAX_CHUNKS  # said by the client: a Dask worker's error logs a traceback
            for key in [] if found.too_many else distinct:
                rows = np.flatnonzero(keys == key)
                section = found.chunk(key, model, self.chunk_col)
                section.add(scored.batch.take(pa.array(rows)), scored.logits[rows], labels[rows])
        return found

    def merge(self, part: Sections) -> None:
        if self.found is None:
            self.found = Sections(Section("all", builder=profile_builder(self.model)))
        self.found.merge(part, self.model, self.chunk_col)


@dataclass(frozen=True, kw_only=True)
class MonitorRead:
    """What monitor's pass keeps of NEW: all of it, its chunks in order, and where the model keeps a fingerprint,
    each row's hashes under every class (scoring/accumulators.py RowHashes)."""

    whole: Section
    chunks: list[Section]
    hashes: np.ndarray | None


def read_sections(
    model: DmoModel,
    data: sources.Source,
    *,
    chunk_col: str | None,
    chunk_size: int | None,
    engine: EngineChoice = LOCAL,
) -> MonitorRead:
    """One pass over NEW: all of it, and its chunks in order (numbers by value, text as text, missing last)."""

    def no_chunk_col(schema: pa.Schema) -> list[str]:
        if chunk_col is None or chunk_col in schema.names:
            return []
        return [f"--chunk-col {chunk_col!r} is not a column of {sources.describe(data)}"]

    table = ScoredTable(model, data, engine=engine, also=no_chunk_col)
    labeled = model.labels.column in table.schema.names
    columns = [*model.preprocessor.input_columns, *([model.labels.column] if labeled else [])]
    columns += [chunk_col] if chunk_col is not None and chunk_col not in columns else []
    sections = MonitorSections(model, chunk_col, chunk_size)
    hashes = [] if model.training_rows is None else [RowHashes(len(model.labels.classes), every_row=True)]
    rows = table.run([sections, *hashes], columns=columns, task="monitor", labeled=labeled, derive=True, positions=True)
    if rows == 0:
        raise DmoError(f"{sources.describe(data)} has no rows to monitor")
    found = sections.found
    chunks = [found.keyed[key] for key in sorted(found.keyed, key=_sortable)]
    return MonitorRead(whole=found.whole, chunks=chunks, hashes=hashes[0].result() if hashes else None)


def _too_many(chunk_col: str | None) -> DmoError:
    if chunk_col is None:
        return DmoError(f"--chunk-size makes more than {MAX_CHUNKS} chunks of NEW; give a larger --chunk-size")
    return DmoError(
        f"--chunk-col {chunk_col!r} has more than {MAX_CHUNKS} values (an id or a timestamp?); give "
        "a column of periods (a day, a week), or --chunk-size N"
    )


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
