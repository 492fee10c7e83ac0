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
from dmocli.prep.periods import MISSING_TIME, Periods, merged_order
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
    """All of NEW (`whole`) and, with --chunk-col, --chunk-size or --every, each chunk by its key, in order of
    appearance; under --every, the order of day and month NEW's text dates were read in."""

    whole: Section
    keyed: dict[Any, Section] = field(default_factory=dict)
    rows: int = 0
    too_many: bool = False  # a batch with more than MAX_CHUNKS chunks: none made, refused where merged
    order: str | None = None

    def chunk(self, key: Any, reader: MonitorSections) -> Section:
        """The chunk of `key`, made on its first row; refused past MAX_CHUNKS chunks."""
        if key not in self.keyed and len(self.keyed) == MAX_CHUNKS:
            raise reader.too_many()
        return self.keyed.setdefault(key, Section(str(key), builder=profile_builder(reader.model)))

    def merge(self, other: Sections, reader: MonitorSections) -> None:
        """Append `other`, the sections of the rows that follow these in NEW."""
        if other.too_many:
            raise reader.too_many()
        if reader.periods is not None:
            self.order = merged_order(self.order, other.order, reader.periods.column)
        self.whole.merge(other.whole)
        for key, section in other.keyed.items():
            self.chunk(key, reader).merge(section)
        self.rows += other.rows


def profile_builder(model: DmoModel) -> ProfileBuilder | None:
    """A builder counting into the model's stored profile's bins and levels; None when the file has no profile."""
    return None if model.profile is None else ProfileBuilder.matching(model.profile, model.preprocessor.categorical)


@dataclass
class MonitorSections:
    """The accumulator of monitor's pass (scoring/scored_pass.py): each batch's (or Dask partition's) sections, taken
    where the batch is, merged in row order. `--chunk-size` counts rows from the batch's first row in NEW. Under
    `periods` the pass hands over the batch as read (COL may be a date feature the derivation replaces by its
    parts): the periods are named from it, and the profile counts it derived."""

    model: DmoModel
    chunk_col: str | None = None
    chunk_size: int | None = None
    found: Sections | None = None  # every section merged so far
    periods: Periods | None = None

    def take(self, scored: Scored) -> Sections:
        model = self.model
        labels = scored.labels if scored.labels is not None else np.full(scored.rows, -1)
        found = Sections(Section("all", builder=profile_builder(model)), rows=scored.rows)
        batch = scored.batch if self.periods is None else model.preprocessor.derived(scored.batch)
        found.whole.add(batch, scored.logits, labels)
        if self.chunk_col is not None or self.chunk_size is not None or self.periods is not None:
            keys = self._keys(scored, found)
            distinct = dict.fromkeys(keys.tolist())
            found.too_many = len(distinct) > MAX_CHUNKS  # said by the client: a Dask worker's error logs a traceback
            for key in [] if found.too_many else distinct:
                rows = np.flatnonzero(keys == key)
                section = found.chunk(key, self)
                section.add(batch.take(pa.array(rows)), scored.logits[rows], labels[rows])
        return found

    def _keys(self, scored: Scored, found: Sections) -> np.ndarray:
        """Each row's chunk: its period (noting the order its dates were read in), or its --chunk-col/--chunk-size
        key."""
        if self.periods is None:
            return _chunk_keys(scored.batch, self.chunk_col, self.chunk_size, scored.first_row)
        periods = self.periods.keys(scored.batch)
        found.order = periods.order
        return periods.names

    def merge(self, part: Sections) -> None:
        if self.found is None:
            self.found = Sections(Section("all", builder=profile_builder(self.model)))
        self.found.merge(part, self)

    def too_many(self) -> DmoError:
        """The refusal of more than MAX_CHUNKS chunks, in the words of the option that made them."""
        if self.periods is not None:
            return DmoError(
                f"--every {self.periods.every} makes more than {MAX_CHUNKS} periods of NEW; give a longer period"
            )
        return _too_many(self.chunk_col)


@dataclass(frozen=True, kw_only=True)
class MonitorRead:
    """What monitor's pass keeps of NEW: all of it, its chunks in order, and where the model keeps a fingerprint,
    each row's hashes under every class (scoring/accumulators.py RowHashes)."""

    whole: Section
    chunks: list[Section]
    hashes: np.ndarray | None

    @property
    def missing_time(self) -> int:
        """Rows of NEW without a readable --time-col, in the section MISSING_TIME (prep/periods.py)."""
        return next((sum(len(part) for part in c.logits) for c in self.chunks if c.name == MISSING_TIME), 0)


def read_sections(
    model: DmoModel,
    data: sources.Source,
    *,
    chunk_col: str | None,
    chunk_size: int | None,
    engine: EngineChoice = LOCAL,
    periods: Periods | None = None,
) -> MonitorRead:
    """One pass over NEW: all of it, and its chunks in order (numbers by value, text as text, missing last;
    periods by their first day, MISSING_TIME last)."""

    def no_chunk_col(schema: pa.Schema) -> list[str]:
        if periods is not None:
            return periods.column_problems(schema, sources.describe(data))
        if chunk_col is None or chunk_col in schema.names:
            return []
        return [f"--chunk-col {chunk_col!r} is not a column of {sources.describe(data)}"]

    table = ScoredTable(model, data, engine=engine, also=no_chunk_col)
    labeled = model.labels.column in table.schema.names
    columns = [*model.preprocessor.input_columns, *([model.labels.column] if labeled else [])]
    columns += [chunk_col] if chunk_col is not None and chunk_col not in columns else []
    columns += [periods.column] if periods is not None and periods.column not in columns else []
    sections = MonitorSections(model, chunk_col, chunk_size, periods=periods)
    hashes = [] if model.training_rows is None else [RowHashes(len(model.labels.classes), every_row=True)]
    derive = periods is None  # under periods, MonitorSections derives the batch itself, after reading COL
    accumulators = [sections, *hashes]
    rows = table.run(accumulators, columns=columns, task="monitor", labeled=labeled, derive=derive, positions=True)
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
