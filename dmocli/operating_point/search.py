"""Exact threshold search for FPOR / FROP / OFBS, optionally confidence-aware.

Every distinct cut of the scores is considered (see curve.py), so the
returned operating point is the true optimum on the given data, not a grid
approximation. With `confidence`, a one-sided Clopper-Pearson lower bound of
the constrained metric must reach the target, so that the target also holds
on new data from the same distribution with probability at least `confidence`;
with `new_rows` instead, the metric measured on a new sample of that many rows
does (new_sample.py's exchangeable test decides which cuts are certified).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.alert_budget import AlertBudget
from dmocli.operating_point.bounds import (
    clopper_pearson_interval,
    clopper_pearson_lower,
    fewest_certifying_trials,
    first_holding,
    fixed_sequence_level,
    fixed_sequence_starts,
)
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.gain import value_at_cuts
from dmocli.operating_point.new_sample import (
    SEQUENCES,
    exchangeable_level,
    fewest_passing_trials,
    fewest_positives,
    fewest_predicted,
    least_successes,
    passes,
    sequence_start_rates,
)
from dmocli.operating_point.problems import OFBS_HAS_NO_BOUND, VALUE_HAS_NO_BOUND, Problem, f_beta, precision, recall
from dmocli.options import POPULATION, check_confidence, check_new_rows, read_new_rows


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
    required_rate: float | None = None  # ... so the metric here at that cut had to reach this rate (None: none)

    def to_dict(self) -> dict:
        return asdict(self)


def search(
    scores: np.ndarray,
    labels: np.ndarray,
    problem: Problem,
    confidence: float | None = None,
    *,
    new_rows: int | float | str | None = None,
    budget: AlertBudget | None = None,
) -> OperatingPoint:
    """Best cut for `problem` on (scores, labels); infeasible -> the closest cut, feasible=False. With a
    `confidence`, the certificate is of the population value, or with `new_rows` N of the value measured on N
    new rows (inf, or "inf": the population value). With a `budget`, only cuts within it (alert_budget.py)."""
    check_confidence(confidence)
    curve = ScoreCurve.from_scores(scores, labels)
    return search_curve(curve, problem, confidence, new_rows, budget=budget)


def _best_index(objective: np.ndarray, tie_break: np.ndarray) -> int:
    """Index of the best objective; ties go to the larger constrained metric, then the higher threshold.

    O(n) with one pass for the maximum; the tie set is usually tiny.
    """
    ties = np.flatnonzero(objective == objective.max())
    return int(ties[np.argmax(tie_break[ties])])


def search_curve(
    curve: ScoreCurve,
    problem: Problem,
    confidence: float | None = None,
    new_rows: int | float | None = None,
    *,
    budget: AlertBudget | None = None,
) -> OperatingPoint:
    """search() on a curve already built: the best admissible cut among every distinct one (see search)."""
    n_pos = curve.n_pos
    if n_pos == 0:
        raise DmoError("no positive rows in the data used for the threshold; it needs both classes")
    check_new_rows(new_rows, confidence)
    new_rows = read_new_rows(new_rows)
    new_rows = None if new_rows == POPULATION else new_rows  # the population value: no new sample
    if confidence is not None and problem.kind in ("ofbs", "value") and budget is None:  # a budget's bound is one
        raise DmoError(OFBS_HAS_NO_BOUND if problem.kind == "ofbs" else VALUE_HAS_NO_BOUND)
    # Candidate cuts: the empty cut (index -1) plus every distinct score.
    tp = np.concatenate(([0], curve.tp))
    fp = np.concatenate(([0], curve.fp))
    objective = _objective(curve, problem, tp=tp, fp=fp)
    constrained = problem.constrained_metric(tp, fp, n_pos)
    cuts = _Admissible(np.zeros(0), np.zeros(0, dtype=bool))  # unconstrained: no bound, no certificate
    if constrained is not None:
        cuts = _admissible(
            curve, problem, tp=tp, fp=fp, constrained=constrained, confidence=confidence, new_rows=new_rows
        )
    if budget is not None:
        cuts = _within_budget(cuts, budget, flagged=tp + fp, confidence=confidence, new_rows=new_rows)
    if constrained is not None or budget is not None:
        best, feasible, best_achievable = _chosen(problem, objective, tp=tp, cuts=cuts)
        best_achievable = best_achievable if constrained is not None else None
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
        constraint_bound=None if cuts.bound is None else float(cuts.bound[best]),
        best_achievable=best_achievable,
        constraint_interval=_constraint_interval(problem, int(tp[best]), int(fp[best]), n_pos),
        certificate=cuts.certificate,
        new_rows=new_rows,
        required_rate=cuts.required(best) if cuts.required is not None else None,
        **(
            _rows_needed(
                problem,
                objective,
                constrained=constrained,
                tp=tp,
                fp=fp,
                n_pos=n_pos,
                confidence=confidence,
                new_rows=new_rows,
                n_neg=curve.n_neg,
            )
            if feasible is False and confidence and constrained is not None
            else {}
        ),
    )


def _objective(curve: ScoreCurve, problem: Problem, *, tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """The objective at every cut (the empty cut first): value's expected value per row from the curve's gains
    (gain.value_at_cuts; its argmax takes the first best, the highest threshold, on ties), else the problem's metric
    of the counts."""
    if problem.kind == "value":
        return value_at_cuts(curve) / (curve.n_pos + curve.n_neg)
    return np.asarray(problem.objective(tp, fp, curve.n_pos), dtype=np.float64)


@dataclass
class _Admissible:
    """The cuts a constrained problem may choose: `ok` where the constraint (or, with a confidence, its
    certificate) holds, `level` the constrained metric or its bound (ties and the closest cut are judged by it),
    and what the operating point says of the certificate."""

    level: np.ndarray
    ok: np.ndarray
    bound: np.ndarray | None = None  # the lower confidence bound of every cut, with a confidence
    certificate: str | None = None
    required: Callable[[int], float | None] | None = None  # the rate a cut had to reach (new rows)


def _admissible(
    curve: ScoreCurve,
    problem: Problem,
    *,
    tp: np.ndarray,
    fp: np.ndarray,
    constrained: np.ndarray,
    confidence: float | None,
    new_rows: int | None,
) -> _Admissible:
    """Which cuts meet the constraint: as measured without a confidence, else certified (precision: by fixed
    sequences, its bound falling and rising with the threshold; recall: by its bound alone, which only falls)."""
    n_pos = curve.n_pos
    if confidence is None:
        level = np.asarray(constrained)
        return _Admissible(level, level >= problem.target - 1e-12)
    if problem.kind == "fpor":
        bound = clopper_pearson_lower(tp, tp + fp, fixed_sequence_level(confidence))
        if new_rows is None:
            passed = bound >= problem.target - 1e-12
            ok = _fixed_sequences(
                passed.size, _sequence_starts(tp + fp, problem, confidence), lambda start: _first_false(passed, start)
            )
            certificate = "fixed-sequence Clopper-Pearson precision bounds from two label-free starting cuts"
            return _Admissible(bound, ok, bound, certificate)
        test = _NewSamplePrecision(
            tp, tp + fp, n_pos + curve.n_neg, target=problem.target, confidence=confidence, new_rows=new_rows
        )
        certificate = (
            f"fixed-sequence exchangeable tests of the precision measured on {new_rows} new rows "
            "from three label-free starting cuts (docs)"
        )
        return _Admissible(bound, test.sequences(), bound, certificate, test.least_rate)
    bound = clopper_pearson_lower(tp, np.full_like(tp, n_pos), confidence)
    if new_rows is None:
        certificate = "Clopper-Pearson recall bound (recall falls with the threshold: no selection effect)"
        return _Admissible(bound, bound >= problem.target - 1e-12, bound, certificate)
    fewest = fewest_positives(new_rows, n_pos, n_pos + curve.n_neg, confidence)
    least = least_successes(
        n_pos, fewest=fewest, target=problem.target, new_rows=new_rows, level=exchangeable_level(confidence)
    )
    certificate = (
        f"exchangeable test of the recall measured on {new_rows} new rows "
        "(recall falls with the threshold: no selection effect; docs)"
    )
    ok = tp >= (least if least is not None else n_pos + 1)
    return _Admissible(bound, ok, bound, certificate, _constant_rate(least, n_pos))


def _within_budget(
    cuts: _Admissible, budget: AlertBudget, *, flagged: np.ndarray, confidence: float | None, new_rows: int | None
) -> _Admissible:
    """The cuts that also keep within an alert budget (certified with a confidence: alert_budget.py). Without a
    constraint of its own the problem may choose any cut that flags a row and keeps within it, and the closest
    (and a tie) is the one flagging fewest rows; with one, the budget narrows the cuts the constraint admits."""
    rows = int(flagged[-1])
    within = budget.admissible(flagged, rows, confidence=confidence, next_rows=budget.period(new_rows))
    if cuts.ok.size:
        return dataclasses.replace(cuts, ok=cuts.ok & within)
    fewest = np.where(flagged > 0, -flagged.astype(np.float64), -np.inf)
    certificate = None
    if confidence is not None:
        period = budget.period(new_rows)
        about = "the population's flagged share" if period is None else f"the alerts of the next {period:,} rows"
        certificate = f"{about} within the alert budget (exact, monotone in the threshold: no selection effect; docs)"
    return _Admissible(fewest, within & (flagged > 0), certificate=certificate)


def _chosen(problem: Problem, objective: np.ndarray, *, tp: np.ndarray, cuts: _Admissible) -> tuple[int, bool, float]:
    """(the cut, feasible, the best constrained level of any cut): the best admissible cut, or, with none, the
    closest: the best constrained metric (or bound) of any cut that predicts a positive."""
    ok, level = cuts.ok, cuts.level
    if problem.kind == "fpor":
        ok &= tp > 0  # recall 0 "meets" precision only vacuously
    if ok.any():
        best = _best_index(np.where(ok, objective, -np.inf), level)
        feasible = True
    else:
        best = int(np.argmax(np.where(tp > 0, level, -np.inf))) if problem.kind == "fpor" else int(np.argmax(level))
        feasible = False
    return best, feasible, float(np.max(np.where(tp > 0, level, 0.0)))


def _constant_rate(least: int | None, trials: int) -> Callable[[int], float | None]:
    """required_rate of every cut when one count decides them all (recall: the positives are the trials)."""
    return lambda cut: None if least is None else least / trials


def _sequence_starts(predicted: np.ndarray, problem: Problem, confidence: float) -> list[int]:
    """The cuts the fixed sequences start from (bounds.fixed_sequence_starts), found from the predicted-positive
    counts alone, never the labels."""
    return [int(np.searchsorted(predicted, count)) for count in fixed_sequence_starts(problem.target, confidence)]


def _first_false(passed: np.ndarray, start: int) -> int:
    """The first cut from `start` on whose test failed; the cut count when none did."""
    failures = np.flatnonzero(~passed[start:])
    return start + int(failures[0]) if failures.size else passed.size


def _fixed_sequences(size: int, starts: list[int], first_failure: Callable[[int], int]) -> np.ndarray:
    """The cuts certified by fixed-sequence tests of "precision >= target".

    Precision is not monotone in the threshold, so taking any cut whose own test passes would select on noise
    among many cuts. Testing them in a fixed order (from the highest threshold down), each at the level of
    bounds.fixed_sequence_level, and stopping at the first that fails, keeps the chance that any certified cut is
    wrong at most that level's error (Learn-Then-Test's fixed-sequence procedure). One sequence runs from each
    label-free start; a cut is certified when any sequence certifies it, and the union bound over the sequences
    keeps the family-wise error at 1 - C. `first_failure(start)` is the first cut from `start` on whose test
    fails (the cut count when none does), so the tests can be run only as far as a sequence needs them.
    """
    certified = np.zeros(size, dtype=bool)
    for start in starts:
        start = min(start, size - 1)
        certified[start : first_failure(start)] = True
    return certified


class _NewSamplePrecision:
    """The fixed sequences of `--new-rows` precision certificates: each cut's test is new_sample's exchangeable
    test, at its predicted-positive count's own m_lo. The tests cost far more than a Clopper-Pearson bound, so
    they run a chunk of cuts at a time and only as far as needed: a sequence ends at its first failing cut, and a
    start is the first cut where its label-free condition holds."""

    SMALLEST_CHUNK, CHUNK = 8, 256

    def __init__(
        self, tp: np.ndarray, predicted: np.ndarray, n: int, *, target: float, confidence: float, new_rows: int
    ):
        self.tp, self.predicted, self.target, self.new_rows = tp, predicted, target, new_rows
        self.fewest = fewest_predicted(new_rows, predicted, n, confidence)
        self.level = exchangeable_level(confidence, SEQUENCES)
        self._tested: dict[tuple[int, int], bool] = {}

    def sequences(self) -> np.ndarray:
        """_fixed_sequences over these tests: the certified cuts."""
        failing = lambda cuts: ~self._passes(cuts, self.tp[cuts])  # noqa: E731
        return _fixed_sequences(self.tp.size, self._starts(), lambda start: self._first(start, failing))

    def least_rate(self, cut: int) -> float | None:
        """The least precision at `cut` (its predicted positives held) that its test passes: required_rate."""
        trials = int(self.predicted[cut])
        least = (
            least_successes(
                trials, fewest=int(self.fewest[cut]), target=self.target, new_rows=self.new_rows, level=self.level
            )
            if trials
            else None
        )
        return None if least is None else least / trials

    def _starts(self) -> list[int]:
        """The label-free starts (new_sample.sequence_start_rates), each the first cut where a record at its rate
        would pass against the cut's own m_lo: cuts that predict too few rows positive for any record to pass
        are passed over."""
        return [
            self._first(0, lambda cuts, rate=rate: self._passes(cuts, np.floor(self.predicted[cuts] * rate + 1e-9)))
            for rate in sequence_start_rates(self.target)
        ]

    def _passes(self, cuts: np.ndarray, successes: np.ndarray) -> np.ndarray:
        """The exchangeable test of each cut at its number of successes, each pair tested once: the sequences
        and their starts scan overlapping runs of cuts, and the same test came back about six times."""
        successes = np.asarray(successes, dtype=np.int64)
        keys = list(zip(cuts.tolist(), successes.tolist()))
        fresh = [i for i, key in enumerate(keys) if key not in self._tested]
        if fresh:
            outcome = passes(
                self.predicted[cuts[fresh]],
                successes[fresh],
                fewest=self.fewest[cuts[fresh]],
                target=self.target,
                new_rows=self.new_rows,
                level=self.level,
            )
            self._tested.update(zip((keys[i] for i in fresh), outcome.tolist()))
        return np.array([self._tested[key] for key in keys], dtype=bool)

    def _first(self, start: int, holds: Callable[[np.ndarray], np.ndarray]) -> int:
        """The first cut from `start` on where `holds`, a chunk of cuts at a time; the cut count when none."""
        return first_holding(start, self.tp.size, holds, smallest=self.SMALLEST_CHUNK, largest=self.CHUNK)


def _constraint_interval(problem: Problem, tp: int, fp: int, n_pos: int) -> list[float] | None:
    if problem.kind == "fpor":
        return clopper_pearson_interval(tp, tp + fp)
    if problem.kind == "frop":
        return clopper_pearson_interval(tp, n_pos)
    return None


def _rows_needed(
    problem: Problem,
    objective: np.ndarray,
    *,
    constrained: np.ndarray,
    tp: np.ndarray,
    fp: np.ndarray,
    n_pos: int,
    confidence: float,
    new_rows: int | None,
    n_neg: int,
) -> dict:
    """How many rows a certificate would need at the rate observed at the cut the plain search would choose
    (the best objective among cuts whose observed constrained metric beats the target): predicted positives for
    precision, positives for recall. With `new_rows`, the rows at which the exchangeable test would pass, the new
    sample's m_lo held. Nothing when no cut beats the target even without a bound."""
    observed = np.asarray(constrained)
    beats = (observed > problem.target) & (tp > 0)
    if not beats.any():
        return {}
    cut = _best_index(np.where(beats, objective, -np.inf), observed)
    rate = float(observed[cut])
    counted = int(tp[cut] + fp[cut]) if problem.kind == "fpor" else int(n_pos)
    if new_rows is None:  # at the level the search tested: precision's fixed sequences share 1 - C
        level = fixed_sequence_level(confidence) if problem.kind == "fpor" else confidence
        needed = fewest_certifying_trials(rate, problem.target, level)
    elif problem.kind == "fpor":
        fewest = int(fewest_predicted(new_rows, np.array([counted]), n_pos + n_neg, confidence)[0])
        level = exchangeable_level(confidence, SEQUENCES)
        needed = fewest_passing_trials(rate, fewest=fewest, target=problem.target, new_rows=new_rows, level=level)
    else:
        fewest = fewest_positives(new_rows, n_pos, n_pos + n_neg, confidence)
        needed = fewest_passing_trials(
            rate, fewest=fewest, target=problem.target, new_rows=new_rows, level=exchangeable_level(confidence)
        )
    return {"rows_needed": needed, "rows_counted": counted}
