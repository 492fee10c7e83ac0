"""A drift profile counted from columns in one pass over record batches (the stored form: shift/drift_profile.py).

Training profiles its rows with `ProfileBuilder.for_preprocessor` (numeric bins from the first rows in stream
order, the most frequent levels); `dmo monitor` counts new data into the reference's own bins and levels with
`ProfileBuilder.matching`, so shift/drift_stats.py can compare the two cell by cell. Levels are matched as the
model's Preprocessor matches them (trimmed, case-folded), which is why this lives in prep/.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data.arrow_numpy import to_numpy
from dmocli.errors import DmoError
from dmocli.prep.columns import MAX_CATEGORICAL_LEVELS
from dmocli.prep.features import Preprocessor, folded, level_text
from dmocli.shift.drift_profile import Binned, Levels, Profile

N_BINS = 10  # quantile bins per numeric feature (deciles), plus the outer percentiles kept apart
FINE_BINS = 100  # percentile bins counted while streaming, merged into N_BINS at the end
SAMPLE_ROWS = 10_000  # the first values of a column, in stream order, that its percentiles come from
MAX_LEVELS = 50  # levels counted one by one per categorical feature; the rest together as "other"

Columns = Union[pa.RecordBatch, pa.Table, Mapping[str, Any]]


class _BinTally:
    """Counts one column into bins in one pass: fixed edges (a reference's), or percentile edges taken from the
    first `sample_rows` finite values in stream order, counting every value, and merged to fewer bins at the end.

    The edges depend only on the values' order, never on where batches split, so any batching gives the same
    profile exactly. Data sorted or trending in time puts the first values' range off the rest; the merge
    still balances bins by every row's count, but values beyond the sample's 1st and 99th percentile share a
    bin each (they are kept apart, so values beyond training's range stand out)."""

    def __init__(self, sample_rows: int, edges: Sequence[float] | None = None):
        self.sample_rows = sample_rows
        self.fixed = edges is not None
        self.edges = None if edges is None else np.asarray(edges, dtype=np.float64)
        self.counts = None if self.edges is None else np.zeros(len(self.edges) + 1, dtype=np.int64)
        self.held: list[np.ndarray] = []
        self.n_held = 0
        self.missing = 0
        self.rows = 0

    def add(self, values: np.ndarray) -> None:
        finite = values[np.isfinite(values)]
        self.rows += values.size
        self.missing += values.size - finite.size
        if self.edges is not None:
            self._count(finite)
            return
        self.held.append(finite)
        self.n_held += finite.size
        if self.n_held >= self.sample_rows:
            self._fix_edges()

    def _fix_edges(self) -> None:
        """Percentile edges of the first `sample_rows` values held, then count all of them."""
        held = np.concatenate(self.held) if self.held else np.empty(0)
        sample = held[: self.sample_rows]
        levels = np.arange(1, FINE_BINS) / FINE_BINS
        self.edges = np.unique(np.quantile(sample, levels)) if sample.size else np.empty(0)
        self.counts = np.zeros(len(self.edges) + 1, dtype=np.int64)
        self.held = []
        self._count(held)

    def merge(self, other: "_BinTally") -> None:
        """Add another tally's counts into the same fixed bins (a reference's edges: counts add up exactly)."""
        if not (self.fixed and other.fixed and np.array_equal(self.edges, other.edges)):
            raise ValueError("only tallies into the same fixed bins merge")
        self.counts += other.counts
        self.missing += other.missing
        self.rows += other.rows

    def _count(self, finite: np.ndarray) -> None:
        # Rows below each edge, from the sorted values: the same counts as searchsorted(edges, values, "right")
        # binned one by one, about ten times faster on a streaming batch (few edges, many values).
        below = np.searchsorted(np.sort(finite), self.edges, side="left")
        self.counts += np.diff(below, prepend=0, append=finite.size)

    def finish(self, bins: int) -> Binned:
        if self.edges is None:
            self._fix_edges()
        edges, counts = (self.edges, self.counts) if self.fixed else _merge_bins(self.edges, self.counts, bins)
        return Binned([float(e) for e in edges], [int(c) for c in counts], self.missing)


def _merge_bins(edges: np.ndarray, counts: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Fine bins merged into about `bins` of equal row counts (by every row, not the sample), keeping the first
    and last fine bins (beyond the sample's outer percentiles) apart."""
    if not len(edges):
        return edges, counts
    cumulative = np.cumsum(counts)
    targets = cumulative[-1] * np.arange(1, bins) / bins
    cuts = np.union1d(np.searchsorted(cumulative, targets, side="left"), [0, len(edges) - 1])
    cuts = cuts[cuts < len(edges)]  # a cut after the last bin has no edge
    return edges[cuts], np.add.reduceat(counts, np.concatenate([[0], cuts + 1]))


class _LevelTally:
    """Counts one categorical column's levels. Free: every level the model knows (`known`; None: any level, up to
    MAX_CATEGORICAL_LEVELS distinct, past which new ones count as other), the most frequent kept at the end.
    Fixed (a reference's levels): those one by one, the rest as other when known, else unseen."""

    def __init__(self, known: frozenset[str] | None, fixed: Sequence[str] | None = None):
        self.known = known
        self.fixed = fixed is not None
        self.counts: dict[str, int] = dict.fromkeys(fixed or (), 0)
        self.other = 0
        self.unseen = 0
        self.missing = 0

    def add(self, text: pa.Array) -> None:
        self.missing += text.null_count
        tally = pc.value_counts(text.drop_null())
        for level, count in zip(tally.field("values").to_pylist(), tally.field("counts").to_pylist()):
            self._place(level, count)

    def _place(self, level: str, count: int) -> None:
        if level in self.counts:
            self.counts[level] += count
        elif self.known is not None and level not in self.known:
            self.unseen += count
        elif self.fixed or len(self.counts) >= MAX_CATEGORICAL_LEVELS:
            self.other += count
        else:
            self.counts[level] = count

    def merge(self, other: "_LevelTally") -> None:
        """Add another tally's counts of the same fixed levels (a reference's: counts add up exactly)."""
        if not (self.fixed and other.fixed and list(self.counts) == list(other.counts)):
            raise ValueError("only tallies of the same fixed levels merge")
        for level, count in other.counts.items():
            self.counts[level] += count
        self.other += other.other
        self.unseen += other.unseen
        self.missing += other.missing

    def finish(self, max_levels: int) -> Levels:
        ranked = list(self.counts.items())
        if not self.fixed:  # most frequent first; ties in text order, so any batching gives the same levels
            ranked.sort(key=lambda item: (-item[1], item[0]))
        kept = ranked if self.fixed else ranked[:max_levels]
        other = self.other + sum(count for _, count in ranked[len(kept) :])
        return Levels([level for level, _ in kept], [count for _, count in kept], other, self.unseen, self.missing)


class ProfileBuilder:
    """Builds a `Profile` in one pass over record batches: `add` each batch of feature columns, `add_scores` the
    model's scores (on other rows if need be, e.g. the held-out ones), then `finish`.

    Numeric bin edges come from the first `sample_rows` finite values of each column in stream order (see
    _BinTally): the profile is the same for any batch sizes, exactly, and the same as building it from one
    batch. Categorical counts are exact.

    Parameters
    ----------
    numeric : sequence of str
        Numeric feature columns.
    categorical : mapping of str to sequence of str, or sequence of str
        Categorical feature columns; as a mapping, with the levels the model knows (as Preprocessor.categorical
        holds them), so rows at any other level count as unseen.
    trim_text, fold_case : bool
        Level matching, as the model's Preprocessor does it (features.level_text, features.folded).
    bins : int
        Quantile bins per numeric column (the outer percentiles add up to two).
    max_levels : int
        Levels counted one by one per categorical column.
    sample_rows : int
        Values per numeric column the bin edges come from.
    """

    def __init__(
        self,
        numeric: Sequence[str] = (),
        categorical: Mapping[str, Sequence[str]] | Sequence[str] = (),
        *,
        trim_text: bool = True,
        fold_case: bool = False,
        bins: int = N_BINS,
        max_levels: int = MAX_LEVELS,
        sample_rows: int = SAMPLE_ROWS,
    ):
        known = categorical if isinstance(categorical, Mapping) else dict.fromkeys(categorical)
        self._numeric = {name: _BinTally(sample_rows) for name in numeric}
        self._categorical = {
            name: _LevelTally(None if levels is None else frozenset(levels)) for name, levels in known.items()
        }
        self._score = _BinTally(sample_rows)
        self.trim_text = trim_text
        self.fold_case = fold_case
        self.bins = bins
        self.max_levels = max_levels

    @classmethod
    def for_preprocessor(cls, pre: Preprocessor, **settings: Any) -> "ProfileBuilder":
        """A builder for a fitted model's feature columns, levels and level matching.

        An embedding model's features are one vector column: only its score is profiled.

        Parameters
        ----------
        pre : Preprocessor
        **settings
            `bins`, `max_levels`, `sample_rows` of ProfileBuilder.
        """
        return cls(pre.numeric, pre.categorical, trim_text=pre.trim_text, fold_case=pre.fold_case, **settings)

    @classmethod
    def matching(cls, reference: Profile, known: Mapping[str, Sequence[str]] | None = None) -> "ProfileBuilder":
        """A builder for new data that counts into `reference`'s bins and levels, so the two compare cell by cell.

        A level outside the reference's counted ones is "other" when it is in `known` (the model's levels); it
        is "unseen" when it is not, or, without `known`, when the reference counted all its levels one by one.
        Without `known`, a reference that had other levels cannot tell them from unseen ones: all count as other.

        Parameters
        ----------
        reference : Profile
        known : mapping of str to sequence of str, optional
            Preprocessor.categorical of the model.
        """
        builder = cls(trim_text=reference.trim_text, fold_case=reference.fold_case)
        builder._numeric = {name: _BinTally(0, binned.edges) for name, binned in reference.numeric.items()}
        builder._categorical = {
            name: _LevelTally(_known_levels(levels, (known or {}).get(name)), levels.levels)
            for name, levels in reference.categorical.items()
        }
        builder._score = _BinTally(SAMPLE_ROWS, None if reference.score is None else reference.score.edges)
        return builder

    def add(self, columns: Columns) -> None:
        """Count one batch of feature columns.

        Parameters
        ----------
        columns : pyarrow.RecordBatch, pyarrow.Table or mapping of str to array
            Holding every profiled column (arrow arrays, numpy arrays or lists).
        """
        for name, tally in self._numeric.items():
            tally.add(_numbers(_column(columns, name)))
        for name, tally in self._categorical.items():
            text = level_text(_arrow(_column(columns, name)), self.trim_text)
            tally.add(folded(text) if self.fold_case else text)

    def merge(self, other: "ProfileBuilder") -> None:
        """Add the feature counts of `other`, a builder `matching` the same reference over other rows (a Dask
        partition's): the reference's bins and levels are fixed, so the merged counts are those of one pass over
        all the rows. Scores are not merged: add them once, in row order (without reference edges, their bins
        depend on the values' order)."""
        for name, tally in self._numeric.items():
            tally.merge(other._numeric[name])
        for name, tally in self._categorical.items():
            tally.merge(other._categorical[name])

    def add_scores(self, scores: np.ndarray | pa.Array | Sequence[float]) -> None:
        """Count one batch of the model's scores (logits); NaN counts as missing."""
        self._score.add(_numbers(scores))

    def finish(self) -> Profile:
        """The profile of everything added; the score's only if scores were added."""
        return Profile(
            numeric={name: tally.finish(self.bins) for name, tally in self._numeric.items()},
            categorical={name: tally.finish(self.max_levels) for name, tally in self._categorical.items()},
            score=self._score.finish(self.bins) if self._score.rows else None,
            trim_text=self.trim_text,
            fold_case=self.fold_case,
        )


def _known_levels(reference: Levels, known: Sequence[str] | None) -> frozenset[str] | None:
    """The levels new data may hold without being unseen: the model's, else the reference's when it counted every
    level it saw one by one; None (no level unseen) when neither is known."""
    if known is not None:
        return frozenset(known)
    return frozenset(reference.levels) if reference.other == 0 else None


def _column(columns: Columns, name: str) -> Any:
    """One profiled column of a batch, or the error naming it: new data must hold every training column."""
    try:
        return columns[name]  # RecordBatch, Table and mappings all index by name
    except KeyError:
        raise DmoError(f"data is missing column '{name}' of the drift profile (use data with the training columns)")


def _numbers(values: Any) -> np.ndarray:
    """Values as float64, nulls as NaN (booleans and decimals as numbers, as the model reads them)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return to_numpy(values.cast(pa.float64(), safe=False), fill=np.nan)
    return np.asarray(values, dtype=np.float64).ravel()


def _arrow(values: Any) -> pa.Array | pa.ChunkedArray:
    """Text values as arrow, which level_text reads (a list or numpy array of str from a caller's mapping)."""
    return values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())
