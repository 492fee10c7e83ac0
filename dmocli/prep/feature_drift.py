"""Drift of each feature and of the model's score between training and new data, from compact profiles.

A `Profile` is what a model file can carry from training so that `dmo monitor` can compare new data later
without the training data: per numeric feature (and for the score, the logit on the held-out rows) about ten
quantile bins and their row counts, per categorical feature the row counts of its most frequent levels, and
the missing values of each. It is JSON (`Profile.to_dict`): about 10 KB for 20 numeric and 5 categorical
columns and the score.

`compare` measures each feature's drift two ways, because neither alone makes a good alarm:

- the population stability index (PSI), an effect size: sum over bins of (new - old share) * ln(new / old
  share). The common industry reading: below 0.1 no real change, 0.1 to 0.25 moderate, 0.25 or more major.
  It does not shrink with sample size, but on a few hundred rows it is noisy.
- a chi-square test of homogeneity on the same cells, a p-value: is the new sample from the same
  distribution? Valid on binned counts as they are (each side a multinomial sample over the cells); the
  Kolmogorov-Smirnov test is not, since its null distribution assumes continuous, untied values. On a large
  sample it calls negligible shifts significant.

`drift_gate` fires on a feature only when both say so: PSI at or above the limit, and the test significant
after a Bonferroni correction over the features compared. A big sample then does not fire on a negligible
shift, nor a small one on noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data.arrow_numpy import to_numpy
from dmocli.errors import DmoError
from dmocli.prep.columns import MAX_CATEGORICAL_LEVELS
from dmocli.prep.features import Preprocessor, folded, level_text

PROFILE_FORMAT = 1
N_BINS = 10  # quantile bins per numeric feature (deciles), plus the outer percentiles kept apart
FINE_BINS = 100  # percentile bins counted while streaming, merged into N_BINS at the end
SAMPLE_ROWS = 10_000  # the first values of a column, in stream order, that its percentiles come from
MAX_LEVELS = 50  # levels counted one by one per categorical feature; the rest together as "other"
PSI_EPSILON = 1e-4  # the share an empty cell is taken to have, so PSI stays finite
PSI_MODERATE = 0.1  # PSI from here: moderate drift (industry rule of thumb)
PSI_MAJOR = 0.25  # PSI from here: major drift
DRIFT_ALPHA = 0.01  # the family-wise level of the drift gate's chi-square tests
MIN_EXPECTED = 5.0  # chi-square cells expecting fewer rows are pooled (Cochran's rule)

Columns = Union[pa.RecordBatch, pa.Table, Mapping[str, Any]]


@dataclass
class Binned:
    """One numeric feature's (or the score's) profile: row counts in bins, and the missing values.

    Attributes
    ----------
    edges : list of float
        Increasing bin edges; bin i holds values in [edges[i-1], edges[i]), the first and last are open.
    counts : list of int
        Rows per bin, ``len(edges) + 1`` of them.
    missing : int
        Rows missing, NaN or infinite: the values training refuses or imputes.
    """

    edges: list[float]
    counts: list[int]
    missing: int

    @property
    def rows(self) -> int:
        """Every row counted, missing ones included: the shares' denominator."""
        return sum(self.counts) + self.missing

    def cells(self) -> list[int]:
        """The counts the comparison reads: the bins, then missing."""
        return [*self.counts, self.missing]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, for the model file."""
        return {"edges": self.edges, "counts": self.counts, "missing": self.missing}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Binned":
        """Read back `to_dict`, refusing what a damaged or hand-edited model file could hold."""
        edges = [float(e) for e in data["edges"]]
        if not all(math.isfinite(e) for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError("profile bin edges must be finite and increasing")
        binned = cls(edges, _counts(data["counts"]), _counts([data["missing"]])[0])
        if len(binned.counts) != len(edges) + 1:
            raise ValueError("a profile needs one count more than bin edges")
        return binned


@dataclass
class Levels:
    """One categorical feature's profile: row counts of its most frequent levels and of the rest.

    Attributes
    ----------
    levels : list of str
        The levels counted one by one (the most frequent, at most MAX_LEVELS), as the model matches them.
    counts : list of int
        Rows per level in `levels`.
    other : int
        Rows at other levels the model knows.
    unseen : int
        Rows at levels the model (or the reference profile) never saw.
    missing : int
        Rows missing or blank.
    """

    levels: list[str]
    counts: list[int]
    other: int = 0
    unseen: int = 0
    missing: int = 0

    @property
    def rows(self) -> int:
        """Every row counted, missing ones included: the shares' denominator."""
        return sum(self.counts) + self.other + self.unseen + self.missing

    def cells(self) -> list[int]:
        """The counts the comparison reads: the levels, other, unseen, then missing."""
        return [*self.counts, self.other, self.unseen, self.missing]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, for the model file."""
        return {
            "levels": self.levels,
            "counts": self.counts,
            "other": self.other,
            "unseen": self.unseen,
            "missing": self.missing,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Levels":
        """Read back `to_dict`, refusing what a damaged or hand-edited model file could hold."""
        levels = list(data["levels"])
        if not all(isinstance(level, str) for level in levels) or len(set(levels)) != len(levels):
            raise ValueError("profile levels must be distinct text")
        other, unseen, missing = _counts([data["other"], data["unseen"], data["missing"]])
        found = cls(levels, _counts(data["counts"]), other, unseen, missing)
        if len(found.counts) != len(levels):
            raise ValueError("a profile needs one count per level")
        return found


@dataclass
class Profile:
    """What training leaves for later drift checks: per feature `Binned` or `Levels`, and the score's `Binned`.

    Attributes
    ----------
    numeric : dict of str to Binned
    categorical : dict of str to Levels
    score : Binned or None
        The model's score (logit) on the held-out rows; None when none was profiled.
    trim_text, fold_case : bool
        How levels were matched (the model's Preprocessor), so new data is read the same way.
    """

    numeric: dict[str, Binned] = field(default_factory=dict)
    categorical: dict[str, Levels] = field(default_factory=dict)
    score: Binned | None = None
    trim_text: bool = True
    fold_case: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: lists of numbers and text, for the model file."""
        return {
            "format": PROFILE_FORMAT,
            "numeric": {name: binned.to_dict() for name, binned in self.numeric.items()},
            "categorical": {name: levels.to_dict() for name, levels in self.categorical.items()},
            "score": None if self.score is None else self.score.to_dict(),
            "trim_text": self.trim_text,
            "fold_case": self.fold_case,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Profile":
        """Read back `to_dict`; ValueError on another format or malformed content."""
        if data.get("format") != PROFILE_FORMAT:
            raise ValueError(f"profile format {data.get('format')!r} is not known (expected {PROFILE_FORMAT})")
        return cls(
            numeric={name: Binned.from_dict(entry) for name, entry in data["numeric"].items()},
            categorical={name: Levels.from_dict(entry) for name, entry in data["categorical"].items()},
            score=None if data["score"] is None else Binned.from_dict(data["score"]),
            trim_text=bool(data["trim_text"]),
            fold_case=bool(data["fold_case"]),
        )


@dataclass(frozen=True)
class FeatureDrift:
    """How far one feature (or the score) moved between a reference profile and new data.

    Attributes
    ----------
    name : str
    kind : str
        "numeric", "categorical" or "score".
    psi : float
        Population stability index over the cells (bins or levels, and missing).
    p_value : float
        Chi-square test of homogeneity on the same cells.
    rows_before, rows_after : int
    missing_before, missing_after : float
        Shares of rows missing.
    unseen_after : int
        New rows at levels the reference never saw (categorical only).
    """

    name: str
    kind: str
    psi: float
    p_value: float
    rows_before: int
    rows_after: int
    missing_before: float
    missing_after: float
    unseen_after: int = 0

    @property
    def severity(self) -> str:
        """The PSI's reading by the rule of thumb: "major", "moderate" or "none"."""
        return psi_severity(self.psi)


def psi_severity(psi: float) -> str:
    """Read a PSI by the common industry rule: >= 0.25 major drift, 0.1 to 0.25 moderate, below none.

    Parameters
    ----------
    psi : float

    Returns
    -------
    str
        "major", "moderate" or "none".
    """
    return "major" if psi >= PSI_MAJOR else "moderate" if psi >= PSI_MODERATE else "none"


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


def compare(reference: Profile, new: Profile | Columns | Iterable[Columns]) -> list[FeatureDrift]:
    """Each feature's drift from `reference` to `new`, the most drifted (highest PSI) first.

    The cells compared are a numeric feature's bins plus missing, a categorical feature's levels plus other,
    unseen and missing: a feature that goes missing, or moves to levels the model never saw, drifts too.
    The score is compared when both profiles have one.

    Parameters
    ----------
    reference : Profile
        From training.
    new : Profile, or record batches (mappings of column to array), or one of them
        A profile built by `ProfileBuilder.matching(reference)` (the way to include scores), or the new data's
        batches, profiled here the same way.

    Returns
    -------
    list of FeatureDrift

    Raises
    ------
    ValueError
        When `new` is a profile with other columns, bins or levels than `reference`.
    DmoError
        When either side has no rows.
    """
    if isinstance(new, (pa.RecordBatch, pa.Table, Mapping)):  # one batch, not an iterable of its columns
        new = [new]
    if not isinstance(new, Profile):
        builder = ProfileBuilder.matching(reference)
        for columns in new:
            builder.add(columns)
        new = builder.finish()
    pairs: list[tuple[str, str, Binned | Levels, Binned | Levels]] = [
        *(("numeric", name, binned, new.numeric.get(name)) for name, binned in reference.numeric.items()),
        *(("categorical", name, levels, new.categorical.get(name)) for name, levels in reference.categorical.items()),
    ]
    if reference.score is not None and new.score is not None:
        pairs.append(("score", "score", reference.score, new.score))
    drifts = [_drift(kind, name, before, after) for kind, name, before, after in pairs]
    return sorted(drifts, key=lambda d: (-d.psi, d.name))


def _drift(kind: str, name: str, before: Binned | Levels, after: Binned | Levels | None) -> FeatureDrift:
    """One feature's FeatureDrift; the two profiles must count it into the same cells."""
    if after is None or _cell_names(before) != _cell_names(after):
        raise ValueError(f"the new profile counts {kind} '{name}' in other cells: build it with matching()")
    for side, profile in (("reference", before), ("new", after)):
        if not profile.rows:
            raise DmoError(f"{kind} '{name}' has no rows in the {side} data to compare")
    old, new = np.asarray(before.cells(), dtype=np.float64), np.asarray(after.cells(), dtype=np.float64)
    return FeatureDrift(
        name=name,
        kind=kind,
        psi=psi(old, new),
        p_value=chi_square_p(old, new),
        rows_before=before.rows,
        rows_after=after.rows,
        missing_before=before.missing / before.rows,
        missing_after=after.missing / after.rows,
        unseen_after=after.unseen if isinstance(after, Levels) else 0,
    )


def _cell_names(profile: Binned | Levels) -> list[float] | list[str]:
    """What a profile's cells are: its bin edges, or its levels."""
    return profile.edges if isinstance(profile, Binned) else profile.levels


def psi(before: np.ndarray, after: np.ndarray) -> float:
    """Population stability index of two count vectors over the same cells.

    Parameters
    ----------
    before, after : numpy.ndarray
        Row counts per cell; cells empty on both sides add nothing.

    Returns
    -------
    float
        sum((q - p) * ln(q / p)) over the cells' shares p (before) and q (after), each at least PSI_EPSILON,
        so a cell empty on one side adds a large but finite term.
    """
    used = (before > 0) | (after > 0)
    p = np.maximum(before[used] / before.sum(), PSI_EPSILON)
    q = np.maximum(after[used] / after.sum(), PSI_EPSILON)
    return float(np.sum((q - p) * np.log(q / p)))


def chi_square_p(before: np.ndarray, after: np.ndarray) -> float:
    """P-value of the chi-square test of homogeneity of two count vectors over the same cells.

    Cells expecting fewer than MIN_EXPECTED rows on either side are pooled into one (and that into the smallest
    other cell if still short), where the chi-square approximation holds. Percentile bins from the reference's
    own first rows make its counts less variable than a multinomial sample: the test is, if anything,
    conservative.

    Parameters
    ----------
    before, after : numpy.ndarray
        Row counts per cell.

    Returns
    -------
    float
        1.0 when fewer than two cells remain (nothing to tell apart).
    """
    # On use: scipy adds a quarter second to every command's start-up. chdtrc is chi2.sf without scipy.stats'
    # argument checks, 200 us a call: 30,000 calls (5,000 columns x 6 monitor sections) took 6 s.
    from scipy.special import chdtrc

    table = _pooled(np.vstack([before, after]))
    if table.shape[1] < 2:
        return 1.0
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
    statistic = float(np.sum((table - expected) ** 2 / expected))
    return float(chdtrc(table.shape[1] - 1, statistic))


def _pooled(table: np.ndarray) -> np.ndarray:
    """A 2 x cells table with the sparse cells pooled (Cochran's rule), so each expects MIN_EXPECTED rows."""
    table = table[:, table.sum(axis=0) > 0]
    expected = table.sum(axis=1).min() * table.sum(axis=0) / table.sum()
    sparse = expected < MIN_EXPECTED
    if not sparse.any():
        return table
    pooled = np.column_stack([table[:, ~sparse], table[:, sparse].sum(axis=1)])
    if pooled.shape[1] > 1 and table.sum(axis=1).min() * pooled[:, -1].sum() / table.sum() < MIN_EXPECTED:
        smallest = int(np.argmin(pooled[:, :-1].sum(axis=0)))
        pooled[:, smallest] += pooled[:, -1]
        pooled = pooled[:, :-1]
    return pooled


def drift_gate(drifts: Sequence[FeatureDrift], psi_limit: float = PSI_MAJOR, alpha: float = DRIFT_ALPHA) -> list[str]:
    """Why new data should stop the model: one reason per feature that drifted both far and surely.

    A feature fires when its PSI is at least `psi_limit` and its chi-square p-value is below `alpha` divided by
    the number of features compared (Bonferroni: `alpha` bounds the chance that any feature fires on noise).

    Parameters
    ----------
    drifts : sequence of FeatureDrift
        From `compare`, all of them (their number sets the correction).
    psi_limit : float
        PSI_MAJOR (0.25) by default, the industry's "major drift".
    alpha : float
        Family-wise significance level.

    Returns
    -------
    list of str
        Empty when nothing fires.
    """
    return [
        _reason(d, psi_limit, alpha, len(drifts))
        for d in drifts
        if d.psi >= psi_limit and is_evidence(d, len(drifts), alpha)
    ]


def is_evidence(drift: FeatureDrift, tests: int, alpha: float = DRIFT_ALPHA) -> bool:
    """Whether the change in a feature's cells is more than the new rows' chance could give: its chi-square p-value
    below `alpha` over the `tests` features compared (Bonferroni). A PSI alone is not: on a handful of rows every
    empty bin makes it large (one row: PSI about 8 with p = 1), so the summary calls a PSI "major" only beside
    this."""
    return drift.p_value < alpha / max(tests, 1)


def _reason(drift: FeatureDrift, psi_limit: float, alpha: float, tests: int) -> str:
    """One line naming the feature, its PSI and p-value against their limits, and its missing and unseen rows."""
    unseen = f", {drift.unseen_after} rows at unseen levels" if drift.unseen_after else ""
    return (
        f"{drift.kind} '{drift.name}' drifted: PSI {drift.psi:.3f} ({drift.severity}, limit {psi_limit:g}), "
        f"chi-square p = {drift.p_value:.2g} < {alpha:g}/{tests} (Bonferroni over the features compared); missing "
        f"{drift.missing_before:.1%} -> {drift.missing_after:.1%}{unseen}"
    )


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


def _counts(values: Sequence[Any]) -> list[int]:
    """Row counts read from JSON: whole, non-negative numbers."""
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError("profile counts must be non-negative integers")
    return [int(v) for v in values]
