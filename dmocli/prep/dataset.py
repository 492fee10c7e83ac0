"""Loading labeled tables into feature matrices for the in-memory solvers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dmocli.errors import DmoError
from dmocli.operating_point.folds import deal_folds
from dmocli.prep.columns import OFFSET_PREFIX
from dmocli.prep.features import LevelCounts, Preprocessor
from dmocli.prep.labels import LabelSpec


@dataclass
class Prepared:
    """Features, integer labels (-1 unlabeled) and optional per-row extras of one table."""

    X: np.ndarray
    y: np.ndarray
    levels: LevelCounts = field(default_factory=LevelCounts)
    extra: dict[str, Any] = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> "Prepared":
        return Prepared(self.X[rows], self.y[rows], self.levels, {k: v[rows] for k, v in self.extra.items()})

    def labeled(self) -> "Prepared":
        """The labeled rows; itself when every row is (no copy of a large X)."""
        mask = self.y >= 0
        return self if mask.all() else self.take(np.flatnonzero(mask))

    @property
    def n(self) -> int:
        return int(self.y.size)


PREPARE_ROWS = 65536  # rows per block: a few MB of float32 per block for typical widths, cache-friendly


def features_of(table: pa.Table, pre: Preprocessor) -> tuple[np.ndarray, LevelCounts]:
    """Row-major float32 features of a whole table (the in-memory solvers' mini-batches gather rows, one
    cache line per row) and the per-column counts of unseen or missing categorical levels.

    Transformed in row slices of PREPARE_ROWS written into the one output
    array: whole at once, the column-major transform, its row-major copy and
    the combined arrow columns would each be as large as the data (measured:
    500k x 128 float32, 1.37 GB peak vs 0.25 GB of features). Slices, not
    record batches, so many small chunks (files, row groups) still make
    large blocks. A block that is refused (missing values, say) is re-run
    on the whole table so the message counts every row, as it always did.
    """
    X = np.empty((table.num_rows, pre.n_features), dtype=np.float32)
    levels = LevelCounts()
    for start in range(0, table.num_rows, PREPARE_ROWS):
        try:
            block, block_levels = pre.transform(table.slice(start, PREPARE_ROWS))
        except DmoError:
            pre.transform(table)  # raises the whole table's message
            raise
        X[start : start + block.shape[0]] = block
        levels.add(block_levels)
    return X, levels


def prepare(table: pa.Table, pre: Preprocessor, labels: LabelSpec) -> Prepared:
    """Features (see features_of), labels and subsample offsets of a whole table."""
    X, levels = features_of(table, pre)
    y = labels.encode(table.column(labels.column))
    return Prepared(X=X, y=y, levels=levels, extra=offsets_of(table, labels))


def offset_column(cls: Any) -> str:
    """Name of the subsample column holding log a(x, cls)."""
    return f"{OFFSET_PREFIX}{cls}"


def offsets_of(table: pa.Table, labels: LabelSpec) -> dict[str, np.ndarray]:
    """{"offsets": (n, K) float32 log acceptance per class} for a `dmo subsample` file, {} otherwise.

    Columns are matched to classes by name, so the order of the model's
    classes decides the order of the offsets; a binary model (from a
    two-class subsample) gets [negative, positive]. One-vs-rest of a K > 2
    subsample has no exact offset (the rest class mixes acceptances): refused.
    """
    present = [name for name in table.schema.names if name.startswith(OFFSET_PREFIX)]
    if not present:
        return {}
    wanted = [offset_column(c) for c in labels.classes]
    if labels.binary and len(present) != 2:
        raise DmoError(
            f"{len(present)}-class subsample (columns {OFFSET_PREFIX}*) cannot be trained one-vs-rest with --positive: "
            "the offsets are per class; train multi-class (--problem multiclass) or subsample a two-class label"
        )
    missing = [name for name in present if name not in wanted]
    if missing or len(present) != len(wanted):
        raise DmoError(
            f"subsample offset column(s) {', '.join(missing or sorted(set(wanted) - set(present)))} do not match "
            f"the label classes {labels.classes[:10]} (a class with no kept rows?); subsample again with a smaller "
            "--gamma, or drop the rows of that class from the pilot data"
        )
    columns = [table.column(name).to_numpy(zero_copy_only=False) for name in wanted]
    offsets = np.stack(columns, axis=1).astype(np.float32)
    if not np.isfinite(offsets).all():
        raise DmoError(
            f"subsample offset columns {OFFSET_PREFIX}* contain missing or infinite values; "
            "rewrite it with dmo subsample"
        )
    return {"offsets": offsets}


def stopping_split(
    y: np.ndarray, share: float, *, seed: int, class_names: list[Any] | None = None, fewest: int = 1
) -> tuple[np.ndarray, np.ndarray] | None:
    """Row indices (kept, held out) for early stopping without a validation split: a stratified `share` of the
    labeled rows, when there are two classes or more and every one can spare a row for it (and has at least
    `fewest` rows); else None, and the solver stops without held-out rows. Shared by the solvers that stop early
    (wce's adam, the boosted trees), so both hold out the same rows for the same `stop-frac` and seed."""
    counts = np.bincount(y[y >= 0])
    if share <= 0 or counts.size < 2 or counts.min() * share < 1 or counts.min() < fewest:
        return None
    return stratified_split(y, share, seed, class_names)


def stratified_split(
    y: np.ndarray, fraction: float, seed: int, class_names: list[Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, val): `fraction` of each labeled class goes to val; unlabeled rows stay in train.

    A class too small for `fraction` still gets one validation row (4 positives at 0.1), but a fraction
    that would leave a class with no training row, or a class of one row, is refused: before, the count was
    clamped, so `--val-frac 0.999` trained on one row per class without a word, and a class of one row
    went to train only, leaving the threshold search a validation split without it.
    """
    classes, sizes = np.unique(y[y >= 0], return_counts=True)
    counts = np.maximum(np.rint(fraction * sizes).astype(np.int64), 1)
    unsplit = np.flatnonzero(counts > sizes - 1)
    if unsplit.size:  # name the smallest such class: its range of usable fractions is the narrowest
        worst = unsplit[np.argmin(sizes[unsplit])]
        size, cls = int(sizes[worst]), int(classes[worst])
        name = class_names[cls] if class_names is not None else cls
        if size == 1:
            raise DmoError(
                f"class {name!r} has 1 labeled row, which cannot be in both the training and the "
                "validation split of --val-frac; give --val FILE instead"
            )
        raise DmoError(
            f"--val-frac {fraction:g} leaves class {name!r} ({size} labeled rows) with no training row; "
            f"use a --val-frac below {1 - 0.5 / size:.3g}"
        )
    rng = np.random.default_rng(seed)
    val_rows = []
    for cls, k in zip(classes, counts):
        rows = np.flatnonzero(y == cls)
        rng.shuffle(rows)
        val_rows.append(rows[:k])
    val = np.sort(np.concatenate(val_rows)) if val_rows else np.empty(0, dtype=np.int64)
    mask = np.ones(y.size, dtype=bool)
    mask[val] = False
    return np.flatnonzero(mask), val


def stratified_folds(
    y: np.ndarray, k: int, *, seed: int, class_names: list[Any] | None = None, val_pooled: bool = False
) -> np.ndarray:
    """A fold number in [0, k) for every labeled row, each class dealt round-robin over the folds in a seeded
    random order, so every fold holds its share of each class (a class of fewer than k rows is refused: some
    fold's model would never see it held out, and the cross-fitted scores would miss its rows' honest score)."""
    classes, sizes = np.unique(y, return_counts=True)
    if sizes.min() < k:
        small = classes[np.argmin(sizes)]
        name = class_names[small] if class_names is not None else small
        raise DmoError(
            f"--cv {k} needs at least {k} rows of every class; class {name!r} has {sizes.min()}"
            + (" (DATA's and --val's rows together): lower --cv" if val_pooled else ": lower --cv, or give --val FILE")
        )
    return deal_folds(y, k, seed=seed)


def concatenated(first: Prepared, second: Prepared) -> Prepared:
    """The rows of two prepared splits, in order (the validation rows pooled into DATA for --cv). Subsample offsets
    of one part are kept: the other part's rows were not subsampled, so their log acceptance is 0."""
    extra = {}
    for key in sorted(set(first.extra) | set(second.extra)):
        parts = [part.extra.get(key) for part in (first, second)]
        width = next(p for p in parts if p is not None).shape[1:]
        parts = [
            p if p is not None else np.zeros((part.n, *width), dtype=np.float32)
            for p, part in zip(parts, (first, second))
        ]
        extra[key] = np.concatenate(parts)
    levels = LevelCounts()
    levels.add(first.levels)
    levels.add(second.levels)
    return Prepared(np.concatenate([first.X, second.X]), np.concatenate([first.y, second.y]), levels, extra)
