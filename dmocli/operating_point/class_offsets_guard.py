"""Do no harm: keep the searched class offsets only where they beat, on held-out rows, a baseline fitting no objective.

Why: the offsets are searched on the same held-out logits they are scored on, and macro figures of a step
function over K offsets fit that sample's noise. On the long-tailed optdigits benchmark the `--problem ofbs`
offsets raised the out-of-fold macro F1 from 0.923 to 0.943 and lowered the test macro F1 from 0.937 to 0.921;
searched on four fifths of the out-of-fold rows and scored on the fifth left out they lost too (0.921 to 0.902),
so the loss is seen before the test split (docs/multiclass.md, "Do no harm").

The same holds for the objective of a floor problem: the full search moves classes the arg-max already
serves down to their floor for a little macro precision (frop) or recall (fpor) on the held-out rows, and on test
those classes then miss the floor more often than under the arg-max.

The rule (`guarded_offsets`) compares the full search with a baseline that does not fit the objective: the
arg-max (ofbs), or for frop / fpor the offsets that move only where needed (`minimal_offsets`: from the
arg-max, each class lifted by the least offset that brings it to its floor; the arg-max itself where it meets
every floor). The held-out rows are dealt into GUARD_FOLDS stratified folds (a fixed seed); for each, both are
fitted on the other folds and decide the fold's rows; the pooled decisions' keys (fewest classes below their
floor, smallest shortfall, then the objective, on the rates) are compared. The full search is kept when it
has fewer classes below a floor or a smaller shortfall, or, equal in both, when its objective beats the
baseline's by more than GUARD_Z standard errors of the difference (a paired Poisson bootstrap over the rows,
GUARD_RESAMPLES draws: one-sided 95%, since the cross-validated difference itself is noisy: on 300 rows of
four symmetric classes, where the arg-max is the optimum, the search beat it cross-validated in 4 of 12 draws
without the margin); the baseline fitted on every held-out row otherwise. The floors stay
point targets (no margin is added for test-time noise; `--confidence` certifies them). `--focus` is the binary
search (not guarded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dmocli.operating_point.class_offsets import (
    ClassOperatingPoint,
    ClassProblem,
    _better,
    _Scorer,
    counts,
    decide,
    minimal_offsets,
    point_at,
    search_offsets,
)
from dmocli.operating_point.folds import deal_folds
from dmocli.operating_point.problems import f_beta, safe_div

GUARD_FOLDS = 5
GUARD_SEED = 0  # fixed: the same logits give the same choice
GUARD_Z = 1.645  # the one-sided 95% normal quantile: the objective gain must be this many standard errors
GUARD_RESAMPLES = 200


@dataclass(frozen=True)
class GuardChoice:
    """What the rule compared: each side's cross-validated figures (the objective and classes below a floor,
    on the rates) and the side chosen."""

    chosen: str  # "offsets" (the full search), "arg-max" or "minimal" (moved only where needed)
    folds: int
    offsets_objective: float
    baseline_objective: float
    offsets_below: int
    baseline_below: int
    gain_se: float  # the bootstrap standard error of offsets_objective - baseline_objective

    def to_dict(self, problem: ClassProblem) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "folds": self.folds,
            "objective": problem.objective_name,
            "offsets_cv": self.offsets_objective,
            "baseline_cv": self.baseline_objective,
            "offsets_cv_below_floor": self.offsets_below,
            "baseline_cv_below_floor": self.baseline_below,
            "gain_se": self.gain_se,
        }


def macro_objective(tp: np.ndarray, predicted: np.ndarray, support: np.ndarray, problem: ClassProblem) -> np.ndarray:
    """The problem's macro objective of each row of per-class counts (rows: resamples, columns: classes)."""
    if problem.kind == "frop":
        return np.asarray(safe_div(tp, predicted)).mean(axis=1)
    if problem.kind == "fpor":
        return np.asarray(safe_div(tp, support)).mean(axis=1)
    return np.asarray(f_beta(tp, predicted - tp, support, problem.beta)).mean(axis=1)


def gain_standard_error(
    mine: np.ndarray, theirs: np.ndarray, labels: np.ndarray, *, problem: ClassProblem, n_classes: int
) -> float:
    """The standard error of the macro objective of decisions `mine` less that of `theirs` on the same rows: a
    paired Poisson bootstrap (each row weighted by a Poisson(1) count, GUARD_RESAMPLES times, fixed seed)."""
    weights = np.random.default_rng(GUARD_SEED).poisson(1.0, (GUARD_RESAMPLES, labels.size)).astype(np.float64)
    truth = np.eye(n_classes)[labels]
    support = weights @ truth

    def objective(decided: np.ndarray) -> np.ndarray:
        chosen = np.eye(n_classes)[decided]
        return macro_objective(weights @ (chosen * truth), weights @ chosen, support, problem)

    return float(np.std(objective(mine) - objective(theirs), ddof=1))


def cross_validated_decisions(
    logits: np.ndarray, labels: np.ndarray, problem: ClassProblem, confidence: float | None, *, fit: Callable
) -> np.ndarray:
    """Each row's class under the offsets `fit` finds on the other folds' rows."""
    fold = deal_folds(labels, GUARD_FOLDS, seed=GUARD_SEED)
    decided = np.empty(labels.size, dtype=np.int64)
    for f in range(GUARD_FOLDS):
        held = fold == f
        if not held.any():
            continue
        found = fit(logits[~held], labels[~held], problem, confidence)
        decided[held] = decide(logits[held], found.offsets)
    return decided


def guarded_offsets(
    logits: np.ndarray, labels: np.ndarray, problem: ClassProblem, confidence: float | None = None
) -> tuple[ClassOperatingPoint, GuardChoice | None]:
    """The full search's offsets, or the baseline's where those do not beat it cross-validated (module
    docstring); the choice is None with `focus`, where the rule does not apply."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    searched = search_offsets(z, y, problem, confidence)
    if problem.focus is not None:
        return searched, None
    n_classes = z.shape[1]
    rates = _Scorer(problem, np.bincount(y, minlength=n_classes), None)

    def cross_validated(fit: Callable) -> np.ndarray:
        return cross_validated_decisions(z, y, problem, confidence, fit=fit)

    def key(decided: np.ndarray) -> np.ndarray:
        return rates.keys(*counts(decided, y, n_classes)[:2])[0]

    mine_decided = cross_validated(search_offsets)
    if problem.kind == "ofbs":
        baseline, name = point_at(z, y, np.zeros(n_classes), problem=problem, confidence=confidence), "arg-max"
        theirs_decided = decide(z, None)
    else:
        baseline = minimal_offsets(z, y, problem, confidence)
        name = "arg-max" if not np.any(baseline.offsets) else "minimal"
        theirs_decided = cross_validated(minimal_offsets)
    mine, theirs = key(mine_decided), key(theirs_decided)
    se = gain_standard_error(mine_decided, theirs_decided, y, problem=problem, n_classes=n_classes)
    if _better(mine[:2], theirs[:2]) or _better(theirs[:2], mine[:2]):
        keep = _better(mine[:2], theirs[:2])  # fewer classes below a floor, or a smaller shortfall
    else:
        keep = mine[2] - theirs[2] > GUARD_Z * se
    choice = GuardChoice(
        chosen="offsets" if keep else name,
        folds=GUARD_FOLDS,
        offsets_objective=float(mine[2]),
        baseline_objective=float(theirs[2]),
        offsets_below=int(-mine[0]),
        baseline_below=int(-theirs[0]),
        gain_se=se,
    )
    return (searched if keep else baseline), choice
