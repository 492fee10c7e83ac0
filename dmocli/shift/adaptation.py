"""A threshold moved to a new positive rate, from the model's stored held-out curve alone (issue 35): FPOR's target
mapped to the curve's own rate and searched exactly (certified, with a confidence, for the population or for N new
rows), OFBS's best F-beta on the curve reweighted to the rate, FROP's cut kept (recall does not move under label
shift), VALUE's best expected value per row at the rate (shift/value.py). `dmo threshold --adapt` and `--prior` call
`adapt_threshold` (use/adapt.py).

Decisions are `logit >= threshold`, compared as the model file compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.adapted_sample import best_certified_cut, recall_passes
from dmocli.operating_point.bounds import clopper_pearson_lower
from dmocli.operating_point.gain import value_under_rate
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import OFBS_HAS_NO_BOUND, VALUE_HAS_NO_BOUND, Problem
from dmocli.operating_point.search import search_curve
from dmocli.shift.at_rate import checked_rate
from dmocli.shift.expected import adapted_curve, expected_at
from dmocli.shift.value import value_at_rate

_RATE_FLOOR = 1e-9  # rates are taken in [_RATE_FLOOR, 1 - _RATE_FLOOR] where odds are formed


@dataclass
class AdaptedThreshold:
    """A threshold re-targeted to a new positive rate, with the metrics expected there at the old and new one.

    Attributes
    ----------
    threshold, old_threshold : float
        The re-targeted cut and the one it replaces (decision: logit >= threshold).
    new_rate : float
        The rate the expected metrics are given at.
    rate_used : float
        The rate the cut was chosen for: new_rate, or under an FPOR certificate the rate interval's low end.
    feasible : bool or None
        Whether the cut meets the target (with `confidence`: certifiably); None for OFBS and VALUE.
    at_old, at_new : dict
        Expected precision, recall and f_beta at new_rate at the old and the new threshold (VALUE: and the
        expected value per row, `value_per_row`).
    certificate, note : str or None
        How a confidence was made to hold; what happened (FROP: the threshold does not move).
    new_rows : int or None
        The size of the new sample the certificate is about (None: the population value at the new rate).
    """

    problem: dict
    threshold: float
    old_threshold: float
    new_rate: float
    rate_used: float
    feasible: bool | None
    at_old: dict
    at_new: dict
    certificate: str | None = None
    note: str | None = None
    new_rows: int | None = None  # with a confidence: the certificate is about the metric measured on this many rows

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def adapt_threshold(
    curve: HeldOutCurve,
    problem: Problem,
    new_rate: float,
    *,
    confidence: float | None = None,
    rate_interval: tuple[float, float] | None = None,
    threshold: float | None = None,
    new_rows: int | None = None,
) -> AdaptedThreshold:
    """Move the operating point's threshold to a new positive rate, from the stored curve alone.

    - FPOR: at rate r a cut's precision odds are the training precision odds times odds(r) / odds(pi), a
      monotone map. So "precision >= a at rate r" is "precision >= a' at the curve's own rate" with
      odds(a') = odds(a) odds(pi) / odds(r), and search.py's exact search (every distinct score a candidate,
      and with `confidence` its fixed-sequence Clopper-Pearson certificate, valid over the selection among
      cuts) runs unchanged with target a'.
    - OFBS: F-beta at rate r is not a monotone map of the training one; the exact scan over every cut of
      adapted_curve picks the best (ties to the higher threshold, as search.py). No confidence: there is no
      constraint to bound.
    - VALUE: the value per row at rate r is r A + (1 - r) B at every cut, A and B the positives' and the
      negatives' mean gain there (shift/value.py); the exact scan over every cut of the stored curve's gains picks
      the best (ties to the higher threshold, as search.py). No confidence: there is no constraint to bound.
    - FROP: recall does not depend on the rate and precision at r is a monotone map of precision at pi, so the
      best cut is the same: the threshold is returned unchanged, and the note says so.

    With `confidence` C and `rate_interval` (FPOR), the certificate also covers the uncertainty of the rate,
    by Bonferroni: precision rises with r, so the cut is chosen for the interval's low end, which errs with
    probability (1 - C) / 2 when the interval is two-sided at level C (estimate_prevalence(..., confidence=C));
    the precision certificate gets the other (1 - C) / 2. Without `rate_interval` the rate is taken as known
    (given, not estimated) and the certificate gets all of 1 - C.

    Parameters
    ----------
    curve : HeldOutCurve
        The model's held-out curve.
    problem : Problem
        The operating-point problem, target included.
    new_rate : float
        The positive rate of the new rows (point estimate or known value), in (0, 1).
    confidence : float, optional
        FPOR/FROP: the level at which the constraint must hold on the new population.
    rate_interval : (float, float), optional
        The rate's two-sided interval at level `confidence` (read only with `confidence`, for FPOR).
    threshold : float, optional
        The model's current threshold; by default the one search.py gives on the curve at its own rate.
    new_rows : int, optional
        With `confidence`: the size of the new sample the certificate is about (None: the population value).

    Returns
    -------
    AdaptedThreshold
    """
    new_rate = checked_rate(new_rate)
    if confidence is not None and problem.kind in ("ofbs", "value"):
        raise DmoError(OFBS_HAS_NO_BOUND if problem.kind == "ofbs" else VALUE_HAS_NO_BOUND)
    if problem.kind not in _CUTS:  # alerts: a budget of flagged rows, which no positive rate moves (use/adapt.py)
        raise DmoError(f"--adapt and --prior move fpor, frop, ofbs and value cuts; a {problem.kind} cut has no rate")
    if threshold is None:
        threshold = search_curve(curve.score_curve(), problem, confidence).threshold
    asked = _Adaptation(curve, problem, new_rate, confidence, rate_interval, new_rows, threshold)
    cut = _CUTS[problem.kind](asked)
    at_old = expected_at(curve, threshold, new_rate, problem.beta)
    at_new = expected_at(curve, cut.threshold, new_rate, problem.beta)
    if problem.kind == "value":
        at_old["value_per_row"] = value_at_rate(curve, threshold, new_rate)
        at_new["value_per_row"] = value_at_rate(curve, cut.threshold, new_rate)
    return AdaptedThreshold(
        problem=problem.to_dict(),
        threshold=float(cut.threshold),
        old_threshold=float(threshold),
        new_rate=new_rate,
        rate_used=cut.rate_used,
        feasible=cut.feasible,
        at_old=at_old,
        at_new=at_new,
        certificate=cut.certificate,
        note=cut.note,
        new_rows=new_rows if confidence is not None and problem.kind in ("fpor", "frop") else None,
    )


@dataclass
class _Cut:
    """One problem's adapted cut: its threshold, whether the target is met (None: OFBS, no constraint), the rate
    it was chosen for (the interval's low end where the certificate covers the rate's uncertainty), and what the
    report says of its certificate."""

    threshold: float
    feasible: bool | None
    rate_used: float
    certificate: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class _Adaptation:
    """What a cut at the new rate is asked for (adapt_threshold's arguments, the threshold settled)."""

    curve: HeldOutCurve
    problem: Problem
    new_rate: float
    confidence: float | None
    rate_interval: tuple[float, float] | None
    new_rows: int | None
    threshold: float


def _ofbs_cut(asked: _Adaptation) -> _Cut:
    """OFBS at the new rate: the best F-beta of the curve with its classes reweighted to the rate."""
    weighted = adapted_curve(asked.curve, asked.new_rate)
    tp, fp = np.concatenate(([0.0], weighted.tp)), np.concatenate(([0.0], weighted.fp))
    best = int(np.argmax(asked.problem.objective(tp, fp, weighted.n_pos)))
    return _Cut(weighted.cut_threshold(best - 1), None, asked.new_rate)


def _value_cut(asked: _Adaptation) -> _Cut:
    """VALUE at the new rate: the cut of the stored curve whose expected value per row at the rate is the highest
    (gain.value_under_rate over the curve's gain sums; np.argmax takes the first best, the highest threshold)."""
    scored = asked.curve.score_curve()
    best = int(np.argmax(value_under_rate(scored, asked.new_rate)))
    note = f"the adapted cut maximizes the expected value per row at the positive rate {asked.new_rate:.4g}"
    return _Cut(scored.cut_threshold(best - 1), None, asked.new_rate, note=note)


def _fpor_cut(asked: _Adaptation) -> _Cut:
    """FPOR at the new rate: the mapped target searched exactly on the curve (see adapt_threshold), certified
    for the population or, with `new_rows`, for the precision measured on that many new rows."""
    curve, problem, confidence, new_rows = asked.curve, asked.problem, asked.confidence, asked.new_rows
    new_rate, rate_interval = asked.new_rate, asked.rate_interval
    split = confidence is not None and rate_interval is not None
    rate_used = float(rate_interval[0]) if split else new_rate
    level = 1.0 - (1.0 - confidence) / 2.0 if split else confidence
    mapped = Problem("fpor", _training_target(problem.target, rate_used, curve.rate))
    point = search_curve(curve.score_curve(), mapped, level)
    new_threshold, feasible = point.threshold, bool(point.feasible)
    certificate = None
    if confidence is not None and new_rows is not None:
        new_threshold, feasible = _new_sample_cut(
            curve, problem, mapped=mapped, rate_low=rate_used, new_rows=new_rows, error=1.0 - level, closest=point
        )
        certificate = (
            f"precision measured on {new_rows} new rows at a rate of at least {rate_used:.4g} >= "
            f"{problem.target:g}, certified by per-class exchangeable tests in fixed sequences (adapted_sample.py) "
            f"at {level:g}"
        )
    elif confidence is not None:
        certificate = (
            f"precision >= {problem.target:g} at rate {rate_used:.4g} is precision >= {mapped.target:.6g} "
            f"on the held-out curve, certified by search.py's fixed-sequence Clopper-Pearson bounds at {level:g}"
        )
    if confidence is not None and split:
        certificate += f"; the rate interval's low end takes the other {(1 - confidence) / 2:g}"
    return _Cut(new_threshold, feasible, rate_used, certificate)


def _frop_cut(asked: _Adaptation) -> _Cut:
    """FROP: recall does not move with the rate, so the threshold stays; only whether the target holds (for new
    rows at the interval's low rate, with `new_rows`) is judged anew."""
    curve, problem, confidence, new_rows = asked.curve, asked.problem, asked.confidence, asked.new_rows
    new_rate, rate_interval, threshold = asked.new_rate, asked.rate_interval, asked.threshold
    rate_used = new_rate
    tp, _ = curve.counts_at(threshold)
    if confidence is not None and new_rows is not None:
        rate_used = float(rate_interval[0]) if rate_interval is not None else new_rate
        error = (1.0 - confidence) / (2.0 if rate_interval is not None else 1.0)
        feasible = recall_passes(
            curve.score_curve(), tp=tp, target=problem.target, rate_low=rate_used, new_rows=new_rows, error=error
        )
    else:
        bound = tp / curve.n_pos
        if confidence is not None:
            bound = float(clopper_pearson_lower(tp, curve.n_pos, confidence))
        feasible = bool(bound >= problem.target - 1e-12)
    note = "recall does not move under label shift, so the FROP threshold stays where it is"
    return _Cut(threshold, feasible, rate_used, None, note)


def _new_sample_cut(
    curve: HeldOutCurve, problem: Problem, *, mapped: Problem, rate_low: float, new_rows: int, error: float, closest
) -> tuple[float, bool]:
    """The FPOR cut certified for the precision measured on `new_rows` new rows (adapted_sample.py), and
    whether there is one; none: the population certificate's cut (`closest`), infeasible."""
    scored = curve.score_curve()
    best = best_certified_cut(
        scored, target=problem.target, mapped_target=mapped.target, rate_low=rate_low, new_rows=new_rows, error=error
    )
    return (closest.threshold, False) if best is None else (scored.cut_threshold(best), True)


_CUTS = {"fpor": _fpor_cut, "frop": _frop_cut, "ofbs": _ofbs_cut, "value": _value_cut}


def _training_target(target: float, rate: float, training_rate: float) -> float:
    """The precision at the curve's own rate equivalent to `target` at `rate`: odds scale with the prior odds.
    Kept below 1 (a rate near 0 makes any target unreachable, which the search then reports as infeasible)."""
    rate = min(max(rate, _RATE_FLOOR), 1.0 - _RATE_FLOOR)
    odds = target / (1.0 - target) * (training_rate / (1.0 - training_rate)) / (rate / (1.0 - rate))
    return min(odds / (1.0 + odds), float(np.nextafter(1.0, 0.0)))
