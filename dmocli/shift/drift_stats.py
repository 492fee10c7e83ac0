"""How far each feature and the model's score moved between two drift profiles (when that should stop the model,
the gate's limits, is decided in dmocli/use/verdicts.py).

`compare` measures each feature's drift two ways, because neither alone makes a good alarm:

- the population stability index (PSI), an effect size: sum over bins of (new - old share) * ln(new / old
  share). The common industry reading: below 0.1 no real change, 0.1 to 0.25 moderate, 0.25 or more major.
  It does not shrink with sample size, but on a few hundred rows it is noisy.
- a chi-square test of homogeneity on the same cells, a p-value: is the new sample from the same
  distribution? Valid on binned counts as they are (each side a multinomial sample over the cells); the
  Kolmogorov-Smirnov test is not, since its null distribution assumes continuous, untied values. On a large
  sample it calls negligible shifts significant.

The gate (use/verdicts.py:drift_reasons) fires on a feature only when both say so: PSI at or above its limit, and
the test significant after a Bonferroni correction over the features compared (`is_evidence`). A big sample then
does not fire on a negligible shift, nor a small one on noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dmocli.errors import DmoError
from dmocli.shift.drift_profile import Binned, Levels, Profile

PSI_EPSILON = 1e-4  # the share an empty cell is taken to have, so PSI stays finite
PSI_MODERATE = 0.1  # PSI from here: moderate drift (industry rule of thumb)
PSI_MAJOR = 0.25  # PSI from here: major drift
MIN_EXPECTED = 5.0  # chi-square cells expecting fewer rows are pooled (Cochran's rule)


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


def compare(reference: Profile, new: Profile) -> list[FeatureDrift]:
    """Each feature's drift from `reference` to `new`, the most drifted (highest PSI) first.

    The cells compared are a numeric feature's bins plus missing, a categorical feature's levels plus other,
    unseen and missing: a feature that goes missing, or moves to levels the model never saw, drifts too.
    The score is compared when both profiles have one.

    Parameters
    ----------
    reference : Profile
        From training.
    new : Profile
        The new data's, counted into the reference's cells by `ProfileBuilder.matching(reference)`
        (prep/drift_counting.py).

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


def is_evidence(drift: FeatureDrift, tests: int, alpha: float) -> bool:
    """Whether the change in a feature's cells is more than the new rows' chance could give: its chi-square p-value
    below `alpha` over the `tests` features compared (Bonferroni). A PSI alone is not: on a handful of rows every
    empty bin makes it large (one row: PSI about 8 with p = 1), so the summary calls a PSI "major" only beside
    this."""
    return drift.p_value < alpha / max(tests, 1)
