"""A fingerprint of the rows a model was trained on, to tell when a later table holds them again.

`dmo threshold MODEL TRAINING.csv` refits the threshold on rows the model has seen: its precision there is
optimistic (0.977 there, 0.923 on a holdout, in the trial that found it), with no warning. The model file keeps a
bottom-k sketch of its training rows: the SKETCH_SIZE smallest 64-bit hashes of (encoded features, label). Each
row of a later table is hashed the same way; among its hashes within the sketch's range, the share found in the
sketch estimates the share of the table that is training rows, whatever the file's format, order or row subset
(a hash-based sample, the same rows are sampled from any table that holds them). 8 KB a model.

Rows are hashed after encoding (the float32 features the network sees, to 11 bits of precision), so a CSV and a
parquet copy of the same rows hash alike.
"""

from __future__ import annotations

import numpy as np

SKETCH_SIZE = 1024
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
TENSOR_NAME = "training_rows.sketch"
# The last 12 mantissa bits are dropped before hashing: a float32 parquet column and its CSV text standardize to
# features a few units in the last place apart (float32 against float64 arithmetic); 11 bits of precision still
# tell rows apart (a collision needs every feature within 0.05 % of another row's and the same label).
_KEPT_BITS = np.uint32(0xFFFFF000)


def row_hashes(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """One 64-bit hash per row of (features (n, d) float32, labels (n,) int codes): FNV-1a over the features'
    32-bit words and the label, then splitmix64's finalizer, so that the smallest hashes are a uniform sample."""
    words = np.ascontiguousarray(features, dtype=np.float32).view(np.uint32) & _KEPT_BITS
    hashes = np.full(words.shape[0], _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(words.shape[1]):
            hashes ^= words[:, column].astype(np.uint64)
            hashes *= _FNV_PRIME
        hashes ^= np.asarray(labels).astype(np.int64).astype(np.uint64)
        hashes *= _FNV_PRIME
        return _finalized(hashes)


def _finalized(hashes: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        hashes = (hashes ^ (hashes >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        hashes = (hashes ^ (hashes >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return hashes ^ (hashes >> np.uint64(31))


def sketch(hashes: np.ndarray, size: int = SKETCH_SIZE) -> np.ndarray:
    """The `size` smallest distinct hashes, ascending: the training rows' fingerprint."""
    return np.unique(hashes)[:size]


def share_of_sketched_rows(stored: np.ndarray, hashes: np.ndarray) -> tuple[float, int]:
    """(share of the table's rows that are training rows, rows the estimate rests on). A full sketch (fewer
    training rows than SKETCH_SIZE) covers every hash; else its range, up to its largest hash."""
    if stored.size == 0 or hashes.size == 0:
        return 0.0, 0
    in_range = hashes[hashes <= stored[-1]] if stored.size >= SKETCH_SIZE else hashes
    if in_range.size == 0:
        return 0.0, 0
    return float(np.isin(in_range, stored).mean()), int(in_range.size)


def check_sketch(stored: np.ndarray) -> None:
    """A stored sketch: at most SKETCH_SIZE distinct uint64 hashes, ascending (ValueError otherwise)."""
    if stored.dtype != np.uint64 or stored.ndim != 1 or stored.size > SKETCH_SIZE:
        raise ValueError("the training rows' fingerprint is malformed")
    if not (stored[1:] > stored[:-1]).all():
        raise ValueError("the training rows' fingerprint is not strictly ascending")
