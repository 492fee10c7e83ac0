"""Exact threshold search for FPOR / FROP / OFBS, optionally confidence-aware.

Every distinct cut of the scores is considered (see curve.py), so the
returned operating point is the true optimum on the given data, not a grid
approximation. With `confidence`, a one-sided Clopper-Pearson lower bound of
the constrained metric must reach the target, so that the target also holds
on new data from the same distribution with probability about `confidence`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.problems import Problem, f_beta, precision, recall
from dmocli.options import check_confidence


def clopper_pearson_lower(successes: np.ndarray, trials: np.ndarray, confidence: float) -> np.ndarray:
    """One-sided lower bound: P(true rate >= bound) >= confidence."""
    from scipy.special import betaincinv  # on use: scipy adds a quarter second to every command's start-up

    successes = np.asarray(successes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore"):
        bound = betaincinv(successes, trials - successes + 1, alpha)  # the Beta(k, n-k+1) quantile
    return np.where(successes > 0, np.nan_to_num(bound, nan=0.0), 0.0)


@dataclass
class OperatingPoint:
    """The chosen cut with its counts and metrics on the data it was fitted on."""

    threshold: float
    tp: int
    fp: int
    tn: int
    fn: int
    precision: float
    recall: float
    f_beta: float
    objective: float
    feasible: bool | None
    constraint_bound: float | None  # lower confidence bound of the constrained metric, if confidence was asked
    best_achievable: float | None  # best constrained metric over all cuts (or its bound), for messages

    def to_dict(self) -> dict:
        return asdict(self)


def search(scores: np.ndarray, labels: np.ndarray, problem: Problem, confidence: float | None = None) -> OperatingPoint:
    """Best cut for `problem` on (scores, labels); infeasible -> the closest cut, feasible=False."""
    check_confidence(confidence)
    curve = ScoreCurve.from_scores(scores, labels)
    return search_curve(curve, problem, confidence)


def _best_index(objective: np.ndarray, tie_break: np.ndarray) -> int:
    """Index of the best objective; ties go to the larger constrained metric, then the higher threshold.

    O(n) with one pass for the maximum; the tie set is usually tiny.
    """
    ties = np.flatnonzero(objective == objective.max())
    return int(ties[np.argmax(tie_break[ties])])


def search_curve(curve: ScoreCurve, problem: Problem, confidence: float | None = None) -> OperatingPoint:
    n_pos = curve.n_pos
    if n_pos == 0:
        raise DmoError("no positive rows in the data used for the threshold; it needs both classes")
    # Candidate cuts: the empty cut (index -1) plus every distinct score.
    tp = np.concatenate(([0], curve.tp))
    fp = np.concatenate(([0], curve.fp))
    objective = np.asarray(problem.objective(tp, fp, n_pos), dtype=np.float64)
    constrained = problem.constrained_metric(tp, fp, n_pos)
    bound = None
    if constrained is not None:
        if confidence is None:
            level = np.asarray(constrained)
        elif problem.kind == "fpor":
            level = bound = clopper_pearson_lower(tp, tp + fp, confidence)
        else:
            level = bound = clopper_pearson_lower(tp, np.full_like(tp, n_pos), confidence)
        ok = level >= problem.target - 1e-12
        if problem.kind == "fpor":
            ok &= tp > 0  # recall 0 "meets" precision only vacuously
        if ok.any():
            best = _best_index(np.where(ok, objective, -np.inf), level)
            feasible = True
        else:
            best = int(np.argmax(np.where(tp > 0, level, -np.inf))) if problem.kind == "fpor" else int(np.argmax(level))
            feasible = False
        best_achievable = float(np.max(np.where(tp > 0, level, 0.0)))
    else:
        best = int(np.argmax(objective))
        feasible = None
        best_achievable = None
    k = best - 1
    return OperatingPoint(
        threshold=curve.cut_threshold(k),
        tp=int(tp[best]),
        fp=int(fp[best]),
        tn=int(curve.n_neg - fp[best]),
        fn=int(n_pos - tp[best]),
        precision=float(precision(tp[best], fp[best])),
        recall=float(recall(tp[best], n_pos)),
        f_beta=float(f_beta(tp[best], fp[best], n_pos, problem.beta)),
        objective=float(objective[best]),
        feasible=feasible,
        constraint_bound=None if bound is None else float(bound[best]),
        best_achievable=best_achievable,
    )
