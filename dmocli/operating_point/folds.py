"""Rows dealt to folds class by class: the one assignment of cross-fitting (prep/dataset.py
`stratified_folds`, which first refuses a class too small for the folds) and of the multi-class guard's
internal check (class_offsets_guard.py), here so both layers use the same dealing."""

from __future__ import annotations

import numpy as np


def deal_folds(labels: np.ndarray, folds: int, *, seed: int) -> np.ndarray:
    """A fold number in [0, folds) for every row: each class's rows, in a seeded random order, dealt
    round-robin over the folds, so every fold holds its share of each class."""
    rng = np.random.default_rng(seed)
    fold = np.empty(labels.size, dtype=np.int64)
    for value in np.unique(labels):
        rows = np.flatnonzero(labels == value)
        rng.shuffle(rows)
        fold[rows] = np.arange(rows.size) % folds
    return fold
