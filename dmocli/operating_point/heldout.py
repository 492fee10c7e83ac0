"""The held-out evidence a binary model file keeps: its threshold's curve, so the operating point can be moved later.

Training searches the threshold on held-out scores (the out-of-fold scores with --cv, the validation split with
--val). Kept as the exact curve (each distinct score with its positive and negative counts), they let `dmo
threshold MODEL --target A` re-target without new labels, with the same exact search and certificate as train
(the curve is the search's own input, so the threshold is train's to the bit), and let `dmo monitor` and
`--adapt` reason about a changed positive rate: the class-conditional score distributions are these counts.

Size: 12 bytes a distinct score (float32 score, two uint32 counts); a held-out split has about as many distinct
scores as rows (fewer for trees). Up to MAX_EXACT_POINTS distinct scores the curve is exact; beyond, adjacent
scores are merged into MAX_EXACT_POINTS bins of about equal row counts, each bin kept at its lowest score. Every
stored cut is then still an exact cut of the held-out rows (all of a bin's rows score at least its lowest score),
so metrics at the stored cuts are exact; what is lost is the cuts inside a bin, each holding at most about
rows / MAX_EXACT_POINTS rows (docs/operating-points.md, "Held-out evidence").

Trained with `--problem value --gain ...`, the curve also keeps the gain matrix and, per distinct score and class,
the sum and sum of squares of each column it names (gain.ColumnSums, float64 tensors `heldout.gain_pos`,
`gain_neg`, `gain_pos_sq`, `gain_neg_sq` of shape (columns, k)): merged bins add them, so the value at every stored
cut stays exact, and a re-target may weigh the same columns differently.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.gain import ColumnSums, CurveGains, GainMatrix

MAX_EXACT_POINTS = 65_536  # 786 KB at most in the model file
TENSOR_PREFIX = "heldout."
SPLITS = ("cv", "val", "data", "train")
TENSOR_DTYPES = {"scores": np.float32, "positives": np.uint32, "negatives": np.uint32}
NO_GAINS = (
    "--problem value needs the held-out gains, and MODEL was trained without --gain; retrain it with --problem value "
    "--gain ..."
)
GAIN_TENSORS = ("pos", "neg", "pos_sq", "neg_sq")  # ColumnSums' arrays, stored as heldout.gain_<name>


@dataclass(frozen=True)
class HeldOutCurve:
    """Distinct held-out scores, ascending, with the positive and negative rows at each.

    Attributes
    ----------
    scores : ndarray of shape (k,), float32, strictly increasing
    positives, negatives : ndarray of shape (k,), uint32
    split : str
        Which rows: "cv" (out-of-fold), "val" (the validation split), "data" (the labeled rows of a later `dmo
        threshold MODEL DATA`) or "train" (the training rows: optimistic).
    certified_rows : int
        One held-out split's rows (one fold, or the split), for the record: a certificate's sample is the model
        info's `new_rows` (absent: the population value), not this.
    exact : bool
        False when adjacent scores were merged (more than MAX_EXACT_POINTS distinct scores).
    carried : bool
        True when the held-out scores were carried to the saved model's own scores by rank (`--cv-transfer rank`:
        shift/carry.carried_by_rank), so the curve is on the scale the model decides on; False when they
        are kept as they came (or a file written before).
    highest_own : float or None
        The highest score the saved model gives its own training rows, where the curve holds out-of-fold scores
        that were not carried (a `--cv` model): a cut above it flags none of them, whatever the curve says there
        (a gbdt fold ensemble's scores lie far below its members' at the top). None: not kept.
    """

    scores: np.ndarray
    positives: np.ndarray
    negatives: np.ndarray
    split: str
    certified_rows: int
    exact: bool = True
    carried: bool = False
    highest_own: float | None = None
    gain: GainMatrix | None = None  # --problem value: the gain matrix the threshold maximized
    column_sums: ColumnSums | None = None  # ... and its columns' sums at each score (None: no --gain)

    @classmethod
    def from_scores(
        cls,
        scores: np.ndarray,
        labels: np.ndarray,
        *,
        split: str = "val",
        certified_rows: int | None = None,
        max_points: int = MAX_EXACT_POINTS,
        carried: bool = False,
        highest_own: float | None = None,
        gain: GainMatrix | None = None,
        gain_values: np.ndarray | None = None,
    ) -> "HeldOutCurve":
        """The curve of held-out float32 scores and 0/1 labels (merged into `max_points` bins beyond that);
        `certified_rows` defaults to the rows counted. With `gain`, `gain_values` ((rows, columns) in
        `gain.columns` order) are summed at each score."""
        scores = np.asarray(scores, dtype=np.float32)
        distinct, index = np.unique(scores, return_inverse=True)
        positives = np.bincount(index, weights=np.asarray(labels) == 1, minlength=distinct.size)
        negatives = np.bincount(index, minlength=distinct.size) - positives
        sums = None
        if gain is not None:
            sums = ColumnSums.of_rows(gain.columns, gain_values, labels, index.reshape(-1), k=distinct.size)
        exact = distinct.size <= max_points
        if not exact:
            distinct, positives, negatives, starts = _merged(distinct, positives, negatives, max_points)
            sums = None if sums is None else sums.merged(starts)
        return cls(
            distinct,
            positives.astype(np.uint32),
            negatives.astype(np.uint32),
            split,
            int(certified_rows if certified_rows is not None else scores.size),
            exact,
            carried,
            highest_own,
            gain,
            sums,
        )

    @property
    def gains(self) -> CurveGains | None:
        """The gain matrix's cells summed at each distinct score (ascending, as `scores`); None without --gain."""
        if self.gain is None or self.column_sums is None:
            return None
        return self.gain.curve_gains(self.column_sums, self.positives, self.negatives)

    def with_gain(self, gain: GainMatrix) -> "HeldOutCurve":
        """The curve weighed by another gain matrix over the columns it keeps (a DmoError naming any it lacks)."""
        if self.column_sums is None:
            raise DmoError(NO_GAINS)
        gain.curve_gains(self.column_sums, self.positives, self.negatives)  # refuses a column it lacks
        return dataclasses.replace(self, gain=gain)

    @property
    def n_pos(self) -> int:
        return int(self.positives.sum(dtype=np.int64))

    @property
    def n_neg(self) -> int:
        return int(self.negatives.sum(dtype=np.int64))

    @property
    def rate(self) -> float:
        """The held-out rows' positive rate pi = P / (P + N): the rate the model's precision was measured at, and
        the prior its calibrated probabilities answer under."""
        return self.n_pos / max(self.n_pos + self.n_neg, 1)

    def first_at(self, threshold: float) -> int:
        """Index of the first score with `score >= threshold` (compared in float32, as the model decides)."""
        return int(np.count_nonzero(self.scores < np.float32(threshold)))

    def counts_at(self, threshold: float) -> tuple[int, int]:
        """(TP, FP): held-out positives and negatives with `score >= threshold`."""
        first = self.first_at(threshold)
        return int(self.positives[first:].sum(dtype=np.int64)), int(self.negatives[first:].sum(dtype=np.int64))

    def score_curve(self) -> ScoreCurve:
        """The search's curve, exactly as ScoreCurve.from_scores builds it from the rows these counts came from."""
        descending = slice(None, None, -1)
        gains = self.gains
        return ScoreCurve(
            self.scores[descending].astype(np.float64),
            np.cumsum(self.positives[descending], dtype=np.int64),
            np.cumsum(self.negatives[descending], dtype=np.int64),
            self.n_pos,
            self.n_neg,
            np.float32,
            _reversed(gains),
        )

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(scores, labels) of the rows the curve counts, for the split reports that take rows."""
        scores = np.concatenate([np.repeat(self.scores, self.positives), np.repeat(self.scores, self.negatives)])
        labels = np.concatenate([np.ones(self.n_pos, np.int8), np.zeros(self.n_neg, np.int8)])
        return scores, labels

    def tensors(self) -> dict[str, np.ndarray]:
        tensors = {f"{TENSOR_PREFIX}{name}": getattr(self, name) for name in TENSOR_DTYPES}
        if self.column_sums is not None:
            for name in GAIN_TENSORS:
                tensors[f"{TENSOR_PREFIX}gain_{name}"] = np.ascontiguousarray(getattr(self.column_sums, name))
        return tensors

    def info(self) -> dict[str, Any]:
        """What the model file's metadata says of the curve (its tensors hold the counts)."""
        return {
            "split": self.split,
            "certified_rows": self.certified_rows,
            "exact": self.exact,
            "rows": self.n_pos + self.n_neg,
            "positives": self.n_pos,
            **({"carried": True} if self.carried else {}),
            **({"highest_own": self.highest_own} if self.highest_own is not None else {}),
            **(
                {"gain": self.gain.text, "gain_columns": list(self.column_sums.columns)}
                if self.gain is not None and self.column_sums is not None
                else {}
            ),
        }

    @classmethod
    def from_file(cls, tensors: dict[str, np.ndarray], info: Any) -> "HeldOutCurve":
        """The curve from a model file's tensors and metadata; ValueError naming what is wrong."""
        arrays = {}
        for name, dtype in TENSOR_DTYPES.items():
            array = tensors.get(f"{TENSOR_PREFIX}{name}")
            if array is None or array.dtype != dtype or array.ndim != 1:
                raise ValueError(f"the held-out curve's {name} are missing or not 1-D {np.dtype(dtype)}")
            arrays[name] = array
        if not arrays["scores"].size == arrays["positives"].size == arrays["negatives"].size:
            raise ValueError("the held-out curve's scores and counts differ in length")
        if not np.isfinite(arrays["scores"]).all() or (np.diff(arrays["scores"]) <= 0).any():
            raise ValueError("the held-out curve's scores are not finite and increasing")
        if not isinstance(info, dict) or info.get("split") not in SPLITS:
            raise ValueError("the held-out curve's metadata is malformed")
        rows = info.get("certified_rows")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ValueError("the held-out curve's certified_rows is not a positive whole number")
        carried = info.get("carried", False)
        if not isinstance(carried, bool):
            raise ValueError("the held-out curve's carried is not true or false")
        highest = info.get("highest_own")
        if highest is not None and (isinstance(highest, bool) or not isinstance(highest, (int, float))):
            raise ValueError("the held-out curve's highest_own is not a number")
        if highest is not None and not np.isfinite(highest):
            raise ValueError("the held-out curve's highest_own is not finite")
        return cls(
            **arrays,
            split=info["split"],
            certified_rows=rows,
            exact=bool(info.get("exact", True)),
            carried=carried,
            highest_own=None if highest is None else float(highest),
            **_stored_gain(tensors, info, arrays["scores"].size),
        )


def _stored_gain(tensors: dict[str, np.ndarray], info: dict[str, Any], points: int) -> dict[str, Any]:
    """The gain matrix and its columns' sums a curve trained with --gain keeps (nothing for a file without);
    ValueError naming what is wrong."""
    if "gain" not in info:
        return {}
    columns = info.get("gain_columns")
    if (
        not isinstance(info["gain"], str)
        or not isinstance(columns, list)
        or not all(isinstance(name, str) for name in columns)
    ):
        raise ValueError("the held-out curve's gain or gain_columns is malformed")
    try:
        gain = GainMatrix.parse(info["gain"])
    except DmoError as exc:
        raise ValueError(f"the held-out curve's gain does not read: {exc}") from exc
    if set(gain.columns) - set(columns):
        raise ValueError("the held-out curve's gain names columns whose sums it does not keep")
    arrays = {}
    for name in GAIN_TENSORS:
        array = tensors.get(f"{TENSOR_PREFIX}gain_{name}")
        if array is None or array.dtype != np.float64 or array.shape != (len(columns), points):
            raise ValueError(f"the held-out curve's gain_{name} is missing or not float64 of (columns, scores)")
        if not np.isfinite(array).all():
            raise ValueError(f"the held-out curve's gain_{name} is not finite")
        arrays[name] = array
    return {"gain": gain, "column_sums": ColumnSums(tuple(columns), **arrays)}


def _merged(
    scores: np.ndarray, positives: np.ndarray, negatives: np.ndarray, points: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Adjacent distinct scores merged into `points` bins of about equal rows, each at its lowest score; and where
    each bin starts (the gain sums merge the same)."""
    rows = positives + negatives
    edges = np.searchsorted(np.cumsum(rows), np.linspace(0, rows.sum(), points + 1)[1:-1], side="right")
    starts = np.unique(np.concatenate(([0], edges[edges < scores.size])))
    return scores[starts], np.add.reduceat(positives, starts), np.add.reduceat(negatives, starts), starts


def _reversed(gains: CurveGains | None) -> CurveGains | None:
    """A curve's gains in the other order of its scores (the search walks them from the highest down)."""
    if gains is None:
        return None
    return CurveGains(*(getattr(gains, field.name)[::-1] for field in dataclasses.fields(gains)))
