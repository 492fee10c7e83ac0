"""A saved model's logits and labels on a labeled table, streamed in record batches (locally or on Dask
workers): what evaluate, threshold and a streaming solver's validation need, one logit and one label a row."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, NamedTuple

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
from dmocli.prep.row_fingerprint import row_hashes

BATCH_ROWS = 65536


def open_data(data: str | Path, model: DmoModel) -> tuple[pa.Schema, Callable[[list[str]], Iterator[pa.RecordBatch]]]:
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


class LabeledLogits:
    """One batch's logits and encoded labels (unlabeled rows left out) and its level counts: the per-batch
    work of evaluate and threshold, in this process or on a Dask worker (sent there once, with the model)."""

    def __init__(self, model: DmoModel, hashed: bool = False):
        self.model = model
        self.hashed = hashed  # also each labeled row's fingerprint hash (prep/row_fingerprint.py)

    def __call__(
        self, batch: pa.RecordBatch | pa.Table, part: int = 0
    ) -> tuple[np.ndarray, np.ndarray, LevelCounts, int, np.ndarray | None]:
        features, levels = self.model.preprocessor.transform(batch)
        logits = self.model.logits_of_features(features)
        y = self.model.labels.encode(batch.column(self.model.labels.column))
        keep = y >= 0
        hashes = row_hashes(features[keep], y[keep]) if self.hashed else None
        return logits[keep], y[keep], levels, batch.num_rows, hashes


class LabeledScores(NamedTuple):
    """What evaluate and threshold keep of DATA: a logit and a label code per labeled row, the level counts,
    and how many rows had no label (left out of the metrics, and said so: a report's n must not shrink
    silently)."""

    logits: np.ndarray
    y: np.ndarray
    levels: LevelCounts
    unlabeled: int
    row_hashes: np.ndarray | None = None  # with hashed=True: each labeled row's fingerprint hash


def row_count(data: str | Path) -> int | None:
    """DATA's rows when its files say so without a read (parquet); None for CSV and standard input."""
    return None if sources.is_stdin(data) else reading.count_rows(data)


def collect_logits(
    model: DmoModel, data: str | Path, engine: EngineChoice = LOCAL, hashed: bool = False
) -> LabeledScores:
    engine.check(data)
    schema, batches = open_data(data, model)
    label_col = model.labels.column
    problems = model.preprocessor.column_problems(schema)
    if label_col not in schema.names:
        problems.append(f"no label column '{label_col}' in {data} (evaluation needs the true labels)")
    if problems:
        raise DmoError("; ".join(problems))
    columns = model.preprocessor.input_columns + [label_col]
    score = LabeledLogits(model, hashed)
    if engine.is_dask:
        with engine.dask(data) as cluster:
            parts = cluster.map(score, columns)
    else:
        with progress.task("scoring", total=lambda: row_count(data), unit="rows") as bar:
            parts = [score(batch) for batch in progress.advancing(prefetched(batches(columns)), bar)]  # read ahead
    n_rows = sum(rows for *_, rows, _ in parts)
    if not n_rows:
        raise DmoError(f"{sources.describe(data)} has no rows")
    y_all = np.concatenate([y for _, y, *_ in parts])
    if y_all.size == 0:
        raise DmoError(f"{sources.describe(data)} has no labeled rows to evaluate on")
    levels = LevelCounts()
    for _, _, part_levels, *_ in parts:
        levels.add(part_levels)
    hashes = np.concatenate([part[-1] for part in parts]) if hashed else None
    return LabeledScores(np.concatenate([logits for logits, *_ in parts]), y_all, levels, n_rows - y_all.size, hashes)
