"""The drift profile's stored form: what a model file carries from training so that `dmo monitor` can compare new
data later without the training data.

Per numeric feature (and for the score, the logit on the held-out rows) about ten quantile bins and their row
counts (`Binned`), per categorical feature the row counts of its most frequent levels (`Levels`), and the missing
values of each. It is JSON (`Profile.to_dict`, read back and checked by `from_dict`): about 10 KB for 20 numeric
and 5 categorical columns and the score. prep/drift_counting.py counts a profile from columns; drift_stats.py
compares two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

PROFILE_FORMAT = 1


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
        The levels counted one by one (the most frequent, at most prep/drift_counting.py's MAX_LEVELS), as the
        model matches them.
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


def _counts(values: Sequence[Any]) -> list[int]:
    """Row counts read from JSON: whole, non-negative numbers."""
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError("profile counts must be non-negative integers")
    return [int(v) for v in values]
