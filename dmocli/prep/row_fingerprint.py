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

from dataclasses import dataclass

import numpy as np

from dmocli.errors import DmoError, option_hint

SKETCH_SIZE = 1024
# evaluate and monitor warn from this share of training rows on: a match is never chance (see _KEPT_BITS), but a
# holdout may repeat a few training rows exactly (sample_data's test split: 21 of 1,095 rows, 1.9 %, about 2 % by
# the fingerprint), which a warning names; under --gate they refuse from GATED_SHARE on, where the rows the model
# has fitted move its figures by points (DATA = the training file: about 100 %)
NOTED_SHARE = 0.02
GATED_SHARE = 0.1
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
    return _with_label(_feature_state(features), np.asarray(labels))


def candidate_hashes(features: np.ndarray, classes: int) -> np.ndarray:
    """Each row's hash under every label it could have, (n, classes): a row without its label (`dmo monitor`'s NEW)
    is a training row when one of them is in the sketch."""
    state = _feature_state(features)
    return np.stack([_with_label(state, np.full(state.size, code)) for code in range(classes)], axis=1)


def _feature_state(features: np.ndarray) -> np.ndarray:
    """FNV-1a's state after the features' 32-bit words, the label not yet mixed in."""
    words = np.ascontiguousarray(features, dtype=np.float32).view(np.uint32) & _KEPT_BITS
    hashes = np.full(words.shape[0], _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(words.shape[1]):
            hashes ^= words[:, column].astype(np.uint64)
            hashes *= _FNV_PRIME
    return hashes


def _with_label(state: np.ndarray, labels: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        hashes = (state ^ labels.astype(np.int64).astype(np.uint64)) * _FNV_PRIME
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
    """(share of the table's rows that are training rows, rows the estimate rests on). `hashes` is (n,) for
    labeled rows, or (n, K) candidate_hashes for rows without their label (a row matches when any of its hashes
    does). A full sketch (fewer training rows than SKETCH_SIZE) covers every hash; else its range, up to its
    largest hash: a row is in range when its true label's hash is, which each column of candidates is for the same
    expected number of rows, so their mean count stands for the rows in range."""
    if stored.size == 0 or hashes.size == 0:
        return 0.0, 0
    hashes = hashes.reshape(hashes.shape[0], -1)
    matched = int(np.isin(hashes, stored).any(axis=1).sum())
    in_range = float(hashes.shape[0])
    if stored.size >= SKETCH_SIZE:
        in_range = float((hashes <= stored[-1]).sum(axis=0).mean())
    if in_range == 0:
        return 0.0, 0
    return min(matched / in_range, 1.0), int(round(in_range))


@dataclass(frozen=True)
class TrainingRowsFound:
    """How much of a table the model was trained on, as its fingerprint estimates it (the reports'
    `training_rows`: docs/report-schema.md)."""

    share: float
    rows_checked: int

    @classmethod
    def of(cls, stored: np.ndarray | None, hashes: np.ndarray | None) -> "TrainingRowsFound | None":
        """None where the model keeps no fingerprint (multi-class, or written before 0.3) or nothing was hashed."""
        if stored is None or hashes is None:
            return None
        return cls(*share_of_sketched_rows(stored, hashes))

    @property
    def noted(self) -> bool:
        """Enough of the table to make its figures optimistic, and more than the fingerprint's noise."""
        return self.share >= NOTED_SHARE

    def describe(self, where: str) -> str:
        return (
            f"{where} holds rows the model was trained on (about {self.share:.0%} of the {self.rows_checked} rows its "
            "fingerprint checks), where its precision and recall are optimistic"
        )

    def to_dict(self) -> dict[str, float | int]:
        return {"share": self.share, "rows_checked": self.rows_checked}


def training_rows_warnings(found: TrainingRowsFound | None, where: str, *, gated: bool) -> list[str]:
    """`dmo evaluate` and `dmo monitor` on rows the model was trained on: a warning naming the share; under a gate
    (`gated`: --gate without --allow-train-rows) a refusal from GATED_SHARE on, since a gate passed there proves
    nothing."""
    if found is None or not found.noted:
        return []
    if gated and found.share >= GATED_SHARE:
        allow = option_hint("--allow-train-rows", "allow_train_rows=True")
        shown = found.describe(where)
        raise DmoError(f"{shown}: a gate there proves nothing; give rows it has not seen, or pass {allow}")
    return [f"{found.describe(where)}; give rows it has not seen for figures that hold on new data"]


def check_sketch(stored: np.ndarray) -> None:
    """A stored sketch: at most SKETCH_SIZE distinct uint64 hashes, ascending (ValueError otherwise)."""
    if stored.dtype != np.uint64 or stored.ndim != 1 or stored.size > SKETCH_SIZE:
        raise ValueError("the training rows' fingerprint is malformed")
    if not (stored[1:] > stored[:-1]).all():
        raise ValueError("the training rows' fingerprint is not strictly ascending")
