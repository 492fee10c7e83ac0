"""Loading labeled tables into feature matrices for the in-memory solvers."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .features import Preprocessor
from .labels import LabelSpec

OFFSET_PREFIX = "log_accept_"  # LUS subsample columns carrying per-class log acceptance probabilities


@dataclass
class Prepared:
    """Features, integer labels (-1 unlabeled) and optional per-row extras of one table."""

    X: np.ndarray
    y: np.ndarray
    unseen: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> "Prepared":
        return Prepared(self.X[rows], self.y[rows], dict(self.unseen), {k: v[rows] for k, v in self.extra.items()})

    @property
    def n(self) -> int:
        return int(self.y.size)


def prepare(table: pa.Table, pre: Preprocessor, labels: LabelSpec) -> Prepared:
    X, unseen = pre.transform(table)
    y = labels.encode(table.column(labels.column))
    return Prepared(X=X, y=y, unseen=unseen)


def stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, val): `fraction` of each labeled class goes to val; unlabeled rows stay in train."""
    rng = np.random.default_rng(seed)
    val_rows = []
    for cls in np.unique(y[y >= 0]):
        rows = np.flatnonzero(y == cls)
        rng.shuffle(rows)
        k = int(round(fraction * rows.size))
        k = min(max(k, 1), rows.size - 1) if rows.size > 1 else 0
        val_rows.append(rows[:k])
    val = np.sort(np.concatenate(val_rows)) if val_rows else np.empty(0, dtype=np.int64)
    mask = np.ones(y.size, dtype=bool)
    mask[val] = False
    return np.flatnonzero(mask), val


def describe_path(path: str | Path | None) -> str | None:
    return None if path is None else str(path)
