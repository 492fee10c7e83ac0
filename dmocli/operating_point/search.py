"""Exact threshold search for FPOR / FROP / OFBS, optionally confidence-aware.

Every distinct cut of the scores is considered (see curve.py), so the
returned operating point is the true optimum on the given data, not a grid
approximation. With `confidence`, a one-sided Clopper-Pearson lower bound of
the constrained metric must reach the target, so that the target also holds
on new data from the same distribution with probability at least `confidence`;
with `new_rows` as well, the metric measured on a new sample of that many rows
does (new_sample.py says what the bound must then reach).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.bounds import (
    clopper_pearson_interval,
    clopper_pearson_lower,
    fewest_certifying_trials,
    fixed_sequence_level,
    fixed_sequence_starts,
)
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.new_sample import certificate_confidence, fewest_positives, fewest_predicted, required_rates
from dmocli.operating_point.problems import Problem, f_beta, precision, recall
from dmocli.options import check_confidence, check_new_rows


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
    constraint_interval: list[float] | None = None  # its two-sided Clopper-Pearson interval (REPORT_LEVEL)
    certificate: str | None = None  # how a --confidence bound was made valid for the selected cut
    rows_needed: int | None = None  # infeasible under --confidence: rows a certificate needs at the observed rate
    rows_counted: int | None = None  # ... against the rows it counted here (predicted positives or positives)
    new_rows: int | None = None  # the certificate is about the metric measured on a new sample of this many rows
    required_rate: float | None = None  # ... so the population metric had to be certified at this rate (None: none)

    def to_dict(self) -> dict:
        return asdict(self)


def search(
    scores: np.ndarray,
    labels: np.ndarray,
    problem: Problem,
    confidence: float | None = None,
    new_rows: int | None = None,
) -> OperatingPoint:
    """Best cut for `problem` on (scores, labels); infeasible -> the closest cut, feasible=False."""
    check_confidence(confidence)
    curve = ScoreCurve.from_scores(scores, labels)
    return search_curve(curve, problem, confidence, new_rows)


def _best_index(objective: np.ndarray, tie_break: np.ndarray) -> int:
    """Index of the best objective; ties go to the larger constrained metric, then the higher threshold.

    O(n) with one pass for the maximum; the tie set is usually tiny.
    """
    ties = np.flatnonzero(objective == objective.max())
    return int(ties[np.argmax(tie_break[ties])])


def search_curve(
    curve: ScoreCurve, problem: Problem, confidence: float | None = None, new_rows: int | None = None
) -> OperatingPoint:
    n_pos = curve.n_pos
    if n_pos == 0:
        raise DmoError("no positive rows in the data used for the threshold; it needs both classes")
    check_new_rows(new_rows, confidence)
    # Candidate cuts: the empty cut (index -1) plus every distinct score.
    tp = np.concatenate(([0], curve.tp))
    fp = np.concatenate(([0], curve.fp))
    objective = np.asarray(problem.objective(tp, fp, n_pos), dtype=np.float64)
    constrained = problem.constrained_metric(tp, fp, n_pos)
    bound = None
    certificate = None
    targets = np.full(tp.shape, problem.target if problem.target is not None else np.nan)
    if constrained is not None:
        if confidence is None:
            level = np.asarray(constrained)
            ok = level >= problem.target - 1e-12
        else:
            proven = confidence if new_rows is None else certificate_confidence(confidence)
            if new_rows is not None:
                targets = _new_sample_targets(problem, tp, tp + fp, n_pos + curve.n_neg, n_pos, confidence, new_rows)
            if problem.kind == "fpor":
                level = bound = clopper_pearson_lower(tp, tp + fp, fixed_sequence_level(proven))
                starts = _sequence_starts(tp + fp, targets, problem.target, proven, new_rows is not None)
                ok, stopped = _fixed_sequences(bound, targets, starts)
                certificate = "fixed-sequence Clopper-Pearson precision bounds from two label-free starting cuts"
            else:
                level = bound = clopper_pearson_lower(tp, np.full_like(tp, n_pos), proven)
                ok = level >= targets - 1e-12
                certificate = "Clopper-Pearson recall bound (recall falls with the threshold: no selection effect)"
            if new_rows is not None:
                certificate += f", for the metric measured on {new_rows} new rows (union bound, docs)"
        if problem.kind == "fpor":
            ok &= tp > 0  # recall 0 "meets" precision only vacuously
        if ok.any():
            best = _best_index(np.where(ok, objective, -np.inf), level)
            feasible = True
        else:
            best = int(np.argmax(np.where(tp > 0, level, -np.inf))) if problem.kind == "fpor" else int(np.argmax(level))
            if certificate is not None and problem.kind == "fpor":
                best = stopped  # the cut whose failed test ended the sequence: what kept every cut uncertified
            feasible = False
        best_achievable = float(level[best]) if feasible is False else float(np.max(np.where(tp > 0, level, 0.0)))
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
        constraint_interval=_constraint_interval(problem, int(tp[best]), int(fp[best]), n_pos),
        certificate=certificate,
        new_rows=new_rows,
        required_rate=float(targets[best]) if new_rows is not None and np.isfinite(targets[best]) else None,
        **(
            _rows_needed(problem, objective, constrained, tp, fp, n_pos, confidence, targets)
            if feasible is False and confidence
            else {}
        ),
    )


def _new_sample_targets(
    problem: Problem, tp: np.ndarray, predicted: np.ndarray, n: int, n_pos: int, confidence: float, new_rows: int
) -> np.ndarray:
    """Per cut, the population rate the certificate must reach for the metric on `new_rows` new rows to meet the
    target (new_sample.py): recall counts the new sample's positives, bounded from the positive rate here;
    precision counts its predicted positives, bounded from every cut's predicted-positive rate at once (the
    threshold is chosen after looking)."""
    if problem.kind == "frop":
        fewest = np.full(tp.shape, fewest_positives(new_rows, n_pos, n, confidence))
    else:
        fewest = fewest_predicted(new_rows, predicted, n, confidence)
    return required_rates(fewest, problem.target, new_rows, confidence)


def _sequence_starts(
    predicted: np.ndarray, targets: np.ndarray, target: float, confidence: float, per_cut: bool
) -> list[int]:
    """The cuts the fixed sequences start from (bounds.fixed_sequence_starts), found from the predicted-positive
    counts and the targets alone, never the labels. With per-cut targets (a new sample's), each start is the first
    cut where its condition holds against that cut's own target: a cut whose target no count can certify (too few
    rows predicted positive in the new sample) is passed over instead of stopping the sequence at once."""
    if not per_cut:
        return [int(np.searchsorted(predicted, count)) for count in fixed_sequence_starts(target, confidence)]
    level = fixed_sequence_level(confidence)
    halfway = np.floor(predicted * (1.0 + np.minimum(targets, 1.0)) / 2.0)
    conditions = (
        clopper_pearson_lower(predicted, predicted, level) >= targets,  # a perfect record certifies
        clopper_pearson_lower(halfway, predicted, level) >= targets,  # halfway between the target and 1 does
    )
    return [int(np.argmax(met)) if met.any() else predicted.size for met in conditions]


def _fixed_sequences(bound: np.ndarray, targets: np.ndarray, starts: list[int]) -> tuple[np.ndarray, int]:
    """The cuts certified by fixed-sequence tests of "precision >= target", and the cut whose failed test stopped
    the first sequence (the last cut when none failed).

    Precision is not monotone in the threshold, so taking any cut whose own bound reaches the target would
    select on noise among many cuts. Testing them in a fixed order (from the highest threshold down), each with
    `bound` (at the level of bounds.fixed_sequence_level), and stopping at the first that fails, keeps the chance
    that any certified cut is wrong at most that level's error (Learn-Then-Test's fixed-sequence procedure).
    One sequence runs from each label-free start (_sequence_starts); a cut is certified when any
    sequence certifies it, and the union bound over the sequences keeps the family-wise error at 1 - C.
    """
    certified = np.zeros(bound.shape, dtype=bool)
    first_stop = None
    for start in starts:
        start = min(start, bound.size - 1)
        failures = np.flatnonzero(bound[start:] < targets[start:] - 1e-12)
        stop = start + int(failures[0]) if failures.size else bound.size
        certified[start:stop] = True
        first_stop = min(stop, bound.size - 1) if first_stop is None else first_stop
    return certified, first_stop


def _constraint_interval(problem: Problem, tp: int, fp: int, n_pos: int) -> list[float] | None:
    if problem.kind == "fpor":
        return clopper_pearson_interval(tp, tp + fp)
    if problem.kind == "frop":
        return clopper_pearson_interval(tp, n_pos)
    return None


def _rows_needed(
    problem: Problem,
    objective: np.ndarray,
    constrained: np.ndarray,
    tp: np.ndarray,
    fp: np.ndarray,
    n_pos: int,
    confidence: float,
    targets: np.ndarray,
) -> dict:
    """How many rows a certificate would need at the rate observed at the cut the plain search would choose
    (the best objective among cuts whose observed constrained metric beats the rate the certificate must reach
    there): predicted positives for precision, positives for recall. Nothing when no cut beats it even without
    a bound."""
    observed = np.asarray(constrained)
    beats = (observed > targets) & (tp > 0)
    if not beats.any():
        return {}
    cut = _best_index(np.where(beats, objective, -np.inf), observed)
    needed = fewest_certifying_trials(float(observed[cut]), float(targets[cut]), confidence)
    counted = int(tp[cut] + fp[cut]) if problem.kind == "fpor" else int(n_pos)
    return {"rows_needed": needed, "rows_counted": counted}
