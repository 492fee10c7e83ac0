"""What the commands keep of a scored pass (scoring/scored_pass.py), one small accumulator each: the labeled rows'
logits and labels (evaluate, threshold, a streaming solver's validation), every row's logit (`threshold --adapt`),
the level counts, and the rows' fingerprint hashes (the training rows found in DATA). Each `take`s its part of a
scored batch (on a Dask worker, for a partition) and `merge`s the parts in row order; `labeled_scores` is the pass
evaluate and threshold make, with its refusals. Monitor's chunk sections (use/monitor_read.py) and predict's rows
(use/prediction_output.py) are kept by their commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data import sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.prep.features import LevelCounts
from dmocli.prep.row_fingerprint import candidate_hashes, row_hashes
from dmocli.scoring.scored_pass import Scored, ScoredTable


class LabeledLogits:
    """The labeled rows' logits and label codes, in row order; the unlabeled rows only counted (left out of the
    metrics, and said so: a report's n must not shrink silently)."""

    def __init__(self) -> None:
        self.logits: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.unlabeled = 0

    def take(self, scored: Scored) -> tuple[np.ndarray, np.ndarray, int]:
        keep = scored.labels >= 0
        return scored.logits[keep], scored.labels[keep], scored.rows - int(keep.sum())

    def merge(self, part: tuple[np.ndarray, np.ndarray, int]) -> None:
        logits, labels, unlabeled = part
        self.logits.append(logits)
        self.labels.append(labels)
        self.unlabeled += unlabeled


class Logits:
    """Every row's logit, in row order, labels unread (`dmo threshold --adapt`: NEW's scores)."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []

    def take(self, scored: Scored) -> np.ndarray:
        return scored.logits

    def merge(self, part: np.ndarray) -> None:
        self.parts.append(part)

    def result(self) -> np.ndarray:
        """The logits as float32 (an mlp's come as torch gives them), an empty array for a table of no rows."""
        logits = np.concatenate(self.parts) if self.parts else np.zeros(0, np.float32)
        return logits.astype(np.float32)


class LevelTotals:
    """The categorical columns' unseen and missing levels, added up over every batch (the drift warnings)."""

    def __init__(self) -> None:
        self.levels = LevelCounts()

    def take(self, scored: Scored) -> LevelCounts:
        return scored.levels

    def merge(self, part: LevelCounts) -> None:
        self.levels.add(part)


class RowHashes:
    """Each row's fingerprint hash (prep/row_fingerprint.py), in row order, for the share of a table the model was
    trained on. `every_row` False: the labeled rows' own, one a row (the rows evaluate and threshold count); True:
    every row's under each class it could have, (n, K), a labeled row's under its own label in every column (it
    matches only as the training row it is), since monitor's NEW rows need no label."""

    def __init__(self, classes: int, *, every_row: bool = False):
        self.classes, self.every_row = classes, every_row
        self.parts: list[np.ndarray] = []

    def take(self, scored: Scored) -> np.ndarray:
        labels = scored.labels if scored.labels is not None else np.full(scored.rows, -1)
        labeled = labels >= 0
        if not self.every_row:
            return row_hashes(scored.features[labeled], labels[labeled])
        hashes = candidate_hashes(scored.features, self.classes)
        if labeled.any():
            hashes[labeled] = row_hashes(scored.features[labeled], labels[labeled])[:, None]
        return hashes

    def merge(self, part: np.ndarray) -> None:
        self.parts.append(part)

    def result(self) -> np.ndarray | None:
        return np.concatenate(self.parts) if self.parts else None


class LabeledColumns:
    """The labeled rows' values of some columns of DATA as float64, in row order (a null as NaN): the gain matrix's
    amounts evaluate counts a realized value from (operating_point/gain.py). A column DATA lacks is not read
    (`columns_in`), and `result` leaves it out: the caller says what is missing."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.parts: dict[str, list[np.ndarray]] = {}

    def columns_in(self, schema: pa.Schema) -> list[str]:
        """The named columns DATA has: the ones the pass reads for this accumulator."""
        return [name for name in self.names if name in schema.names]

    def take(self, scored: Scored) -> dict[str, np.ndarray]:
        keep = scored.labels >= 0
        found = [name for name in self.names if name in scored.batch.schema.names]
        return {name: _floats(scored.batch.column(name), name)[keep] for name in found}

    def merge(self, part: dict[str, np.ndarray]) -> None:
        for name, values in part.items():
            self.parts.setdefault(name, []).append(values)

    def result(self) -> dict[str, np.ndarray]:
        return {name: np.concatenate(parts) for name, parts in self.parts.items()}


def _floats(column: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """A column's values as float64, a null as NaN; refused in one line where they are not numbers."""
    try:
        values = pc.cast(column, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise DmoError(
            f"column '{name}' holds values that are not numbers; the gain matrix needs numbers there"
        ) from error
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)


class LabeledScores(NamedTuple):
    """What evaluate and threshold keep of DATA: a logit and a label code per labeled row, the level counts, and
    how many rows had no label."""

    logits: np.ndarray
    y: np.ndarray
    levels: LevelCounts
    unlabeled: int
    row_hashes: np.ndarray | None = None  # with hashed=True: each labeled row's fingerprint hash


def labeled_scores(
    model: DmoModel,
    data: sources.Source | Path,
    engine: EngineChoice = LOCAL,
    hashed: bool = False,
    *,
    kept: LabeledColumns | None = None,
) -> LabeledScores:
    """One pass over labeled DATA: its labeled rows' logits and labels, level counts and (`hashed`) fingerprint
    hashes; refused in one line where a training column or the label column is missing, or no row is labeled.
    `kept` keeps the labeled rows' values of the columns it names that DATA has (evaluate's gain columns)."""
    label = model.labels.column

    def no_label(schema: pa.Schema) -> list[str]:
        return (
            [] if label in schema.names else [f"no label column '{label}' in {data} (evaluation needs the true labels)"]
        )

    table = ScoredTable(model, data, engine=engine, also=no_label)
    labeled, levels = LabeledLogits(), LevelTotals()
    hashes = [RowHashes(len(model.labels.classes))] if hashed else []
    columns = [*model.preprocessor.input_columns, label]
    extra = [] if kept is None else [name for name in kept.columns_in(table.schema) if name not in columns]
    also = [] if kept is None else [kept]
    rows = table.run([labeled, levels, *hashes, *also], columns=[*columns, *extra], labeled=True)
    if not rows:
        raise DmoError(f"{sources.describe(data)} has no rows")
    y = np.concatenate(labeled.labels)
    if y.size == 0:
        raise DmoError(f"{sources.describe(data)} has no labeled rows to evaluate on")
    found = hashes[0].result() if hashes else None
    return LabeledScores(np.concatenate(labeled.logits), y, levels.levels, labeled.unlabeled, found)
