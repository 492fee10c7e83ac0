"""`dmo threshold MODEL --adapt NEW | --prior R`: move the threshold for a new positive rate, without new labels.

Under label shift the class-conditional score distributions stay those of the held-out curve the model file
keeps, and precision at a cut becomes r*TPR / (r*TPR + (1-r)*FPR) at the new rate r. The rate is given (--prior)
or estimated on unlabeled NEW rows (PACC on the held-out curve, with its interval); FPOR and OFBS are re-targeted
exactly on the curve reweighted to that rate (shift/adaptation.py). FROP's recall does not move under
label shift, so its threshold stays, and the report says so. With --confidence, an FPOR certificate also covers
the estimated rate's uncertainty: half the error budget goes to the rate (its interval's low end is used, since
precision rises with the rate), half to the precision bound. As train's, that bound is by default about what the
model's own certificate was about (the population value at the new rate, or the sample its info's `new_rows`
names); `--new-rows N` makes it about the metric measured on the next N rows (operating_point/adapted_sample.py).

The cut is searched on the curve's scores. Where the model's own scores are not on that scale (a `--cv` ensemble
of boosted trees averages its members' probabilities; the curve keeps each member's out-of-fold logit, which
reaches far higher), the FPOR or OFBS cut is carried to the model by the share of NEW it is expected to flag
(shift/carry.py, as `--cv-transfer rank` carries an out-of-fold threshold): the report's
`adapted.carried` says "share" or "score" (kept as is). With --prior there are no NEW rows to carry it by: a
warning says the cut is on the held-out scale.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dmocli.command_options import ThresholdOptions
from dmocli.data import outputs, sources
from dmocli.errors import DmoError, UnreachableTarget, option_hint
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_interval, fewest_passing
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.options import check_given
from dmocli.pipelines.review_banding import MOVED_ALONE, band_dropped, without_band
from dmocli.pipelines.saving import finish_threshold, threshold_envelope
from dmocli.pipelines.thresholding import certified_rows
from dmocli.report import binary_split_report, model_summary
from dmocli.scoring.accumulators import Logits
from dmocli.scoring.scored_pass import ScoredTable
from dmocli.shift.adaptation import AdaptedThreshold, adapt_threshold
from dmocli.shift.carry import carried_by_share, expected_share
from dmocli.shift.prevalence import estimate_prevalence
from dmocli.use.recertify import Recertified, noted, recertified, report_fields, with_way_out
from dmocli.use.results.threshold import AdaptResult

# What the model file keeps of the `adapted` section (info.adapted, shown by `dmo info`): the rates, the threshold
# it replaced, and how the curve's cut became the model's (`carried`, `expected_share`, `curve_threshold`), so the
# file says whether its threshold is the held-out curve's cut or the share of NEW that cut was expected to flag.
INFO_KEYS = ("new_rate", "training_rate", "old_threshold", "carried", "expected_share", "curve_threshold")

# Why a model kept within an alert budget is not adapted: the budget bounds the share of rows flagged, which a new
# positive rate moves in a way only the new rows' own scores show (and with a certificate, only about held-out rows),
# so a cut moved for the rate alone would keep neither the problem's promise nor the budget's certificate.
ALERT_BUDGET_HAS_NO_RATE = (
    "--adapt and --prior do not move a model kept within an alert budget (the share it flags at a new rate is not "
    "the held-out one); watch it with dmo monitor MODEL NEW, and re-target with dmo threshold MODEL --max-alert-rate R"
)


def adapt_to_rate(
    model_path: str | Path,
    output: str | Path,
    *,
    new_data: sources.Source | None = None,
    prior: float | None = None,
    confidence: float | None = None,
    allow_infeasible: bool = False,
    report_path: str | Path | None = None,
    new_rows: int | float | str | None = None,
    no_confidence: bool = False,
) -> AdaptResult:
    """The model's threshold re-targeted for the positive rate of `new_data` (estimated) or `prior` (given),
    written to `output`; the `threshold` report with an `adapted` section (docs/monitoring.md). A certified model
    is certified again at its own confidence unless `confidence` is given or `no_confidence` drops the certificate
    (use/recertify.py). `new_rows` is --new-rows as given (module docstring: its default)."""
    started = time.perf_counter()
    _check_rate_source(new_data, prior, confidence=confidence, new_rows=new_rows, no_confidence=no_confidence)
    new_data = None if new_data is None else sources.accept(new_data)
    outputs.check_outputs({"-o": output, "--report": report_path}, {"NEW": new_data} if new_data is not None else {})
    outputs.refuse_misnamed_model(output)
    model, curve = _adaptable(model_path)
    bounded = model.problem.kind not in ("ofbs", "value")  # no constraint to certify: MODEL's certificate dropped
    recertify = recertified(model.decision.certificate, confidence, no_confidence=no_confidence, bounded=bounded)
    confidence = recertify.confidence
    rate, interval, source, logits = _certifiable_rate(model, curve, recertify, new_data=new_data, prior=prior)
    sample = certified_rows(new_rows, confidence, model.decision.certificate.new_rows)  # the model's own, by default
    adapted = adapt_threshold(
        curve,
        model.problem,
        rate,
        confidence=confidence,
        rate_interval=interval,
        threshold=model.threshold,
        new_rows=sample,
    )
    threshold, carried = carry_to_model(model, curve, cut=adapted.threshold, rate=adapted.new_rate, logits=logits)
    scores, labels = curve.rows()  # the curve's figures at the cut on its own scale
    split = binary_split_report(
        scores, labels, threshold=adapted.threshold, problem=model.problem, calibration=model.calibration
    )
    section = {
        **adapted.to_dict(),
        "threshold": threshold,
        "curve_threshold": adapted.threshold,
        **carried,
        "training_rate": curve.rate,
        "rate_interval": interval,
        "rate_source": source,
    }
    info = {
        **noted(_certificate_info(model.info, confidence, adapted), recertify.dropped),
        "adapted": {k: section[k] for k in INFO_KEYS},
        "summary": model_summary({"data": split}),  # at the new threshold (training's place kept)
    }
    moved = model.with_decision(without_band(dataclasses.replace(model.decision, threshold=threshold, info=info)))
    report = threshold_envelope(
        moved,
        model_path,
        data=source,
        engine="local",
        output=output,
        problem_fields=model.problem.to_dict(),
        problem_source="model",
        confidence=confidence,
        **report_fields(recertify),
        previous_threshold=model.threshold,
        threshold=threshold,
        unlabeled_rows=0,
        feasible=adapted.feasible,
        adapted=section,
        warnings=_notes(adapted, model) + _scale_warnings(moved, carried["carried"], logits),
        splits={"data": split},
    )
    refusal = _unreachable(model, adapted, confidence=confidence, source=source) if not allow_infeasible else None
    refusal = with_way_out(refusal, recertify)
    written = finish_threshold(moved, report, output=output, report_path=report_path, started=started, refusal=refusal)
    return AdaptResult.of(written)


def _notes(adapted: AdaptedThreshold, model: DmoModel) -> list[str]:
    """The adapted point's own note (a value model's says what its cut maximizes, in the report's lines, not as a
    warning), and the review band the model had, dropped: a new rate moves the automatic cut alone."""
    note = adapted.note if adapted.note and model.problem.kind != "value" else None
    return ([note] if note else []) + band_dropped(model.decision, MOVED_ALONE)


def _adaptable(model_path: str | Path) -> tuple[DmoModel, HeldOutCurve]:
    """The model and the held-out curve its threshold moves on: a binary model's (a multi-class one has neither a
    threshold nor a curve to move it on)."""
    model = load_model(model_path)
    if not model.binary or model.problem is None:
        raise DmoError("--adapt and --prior apply to binary models; this model is multi-class")
    if model.problem.kind == "alerts" or model.info.get("alert_budget") is not None:
        raise DmoError(ALERT_BUDGET_HAS_NO_RATE)
    return model, model.stored_heldout(model_path)


def _certifiable_rate(
    model: DmoModel,
    curve: HeldOutCurve,
    recertify: Recertified,
    *,
    new_data: sources.Source | None,
    prior: float | None,
) -> tuple[float, tuple[float, float] | None, str, np.ndarray | None]:
    """`_new_rate`'s rate, refused (exit 3, with the ways out) where its interval is too wide for the FPOR
    certificate asked, or MODEL's own, to hold at any threshold (_unbounded_rate)."""
    confidence = recertify.confidence
    rate, interval, source, logits = _new_rate(model, curve, new_data=new_data, prior=prior, confidence=confidence)
    if confidence is not None and interval is not None and model.problem.kind == "fpor":
        unbounded = _unbounded_rate(curve, model, rate=rate, interval=interval, rows=int(logits.size), level=confidence)
        if unbounded is not None:
            raise with_way_out(unbounded, recertify)
    return rate, interval, source, logits


def _certificate_info(info: Mapping[str, Any], confidence: float | None, adapted: AdaptedThreshold) -> dict[str, Any]:
    """The model file's info with its certificate replaced by this adaptation's: the training one was for the old
    threshold at the old rate, and `dmo info` must not claim it for the new file (without --confidence: none)."""
    kept = {key: value for key, value in info.items() if key not in ("confidence", "new_rows", "certified")}
    if confidence is None:
        return {**kept, "confidence": None}
    sample = {"new_rows": adapted.new_rows} if adapted.new_rows is not None else {}
    return {**kept, "confidence": confidence, **sample, "certified": adapted.feasible is not False}


def _check_rate_source(
    new_data: sources.Source | None,
    prior: float | None,
    *,
    confidence: float | None,
    new_rows: Any,
    no_confidence: bool,
) -> None:
    """What `dmo threshold --adapt NEW | --prior R` declares (ThresholdOptions: R's range, one rate and not two,
    the confidence's range, --new-rows with --confidence), and a rate given at all: the command line calls this
    only when one is, a Python caller may give neither."""
    if new_data is None and prior is None:
        raise DmoError(
            f"give one of {option_hint('--adapt NEW', 'new_data=')} and {option_hint('--prior R', 'prior=')}"
        )
    check_given(
        ThresholdOptions,
        adapt=new_data,
        prior=prior,
        confidence=confidence,
        new_rows=new_rows,
        no_confidence=no_confidence or None,  # a flag left out is not given
    )


def _new_rate(
    model: DmoModel,
    curve: HeldOutCurve,
    *,
    new_data: sources.Source | None,
    prior: float | None,
    confidence: float | None,
) -> tuple[float, tuple[float, float] | None, str, np.ndarray | None]:
    """(the positive rate to adapt to, its interval, where it comes from, NEW's logits): `prior` as given, or the
    rate estimated on NEW's scores against the held-out curve (label shift: the score distribution given the class
    is the training one)."""
    if new_data is None:
        return float(prior), None, f"given rate {prior:g}", None
    logits = _scores(model, new_data)
    level = confidence or REPORT_LEVEL
    if confidence is None:  # with a confidence, _unbounded_rate names the rows the certificate needs
        _refuse_too_few_rows(logits.size, curve.rate, level, sources.describe(new_data))
    estimate = estimate_prevalence(curve, logits, model.calibration, level)
    rate = estimate.usable
    interval = _widened(estimate.low, estimate.high, rate=rate, rows=int(logits.size), level=level)
    source = f"rate estimated on {sources.describe(new_data)} ({logits.size} rows, {estimate.method})"
    return rate, interval, source, logits


def _refuse_too_few_rows(rows: int, training_rate: float, level: float, where: str) -> None:
    """Exit 2 when NEW has too few rows to tell any rate from the training one: even with every row's class known,
    the Clopper-Pearson interval of none or all of them positive would still hold the training rate, so the rate
    --adapt moved the threshold for would be made up (one row gave 0.5). Scores tell less than classes, so this is
    a floor of the rows an estimate needs, not enough."""
    needed = _rows_telling(training_rate, level)
    if needed is not None and rows < needed:
        raise DmoError(
            f"{where} has {rows:,} row(s): fewer than {needed:,} cannot tell a positive rate from the training rate "
            f"{training_rate:.4f} at {level:g}, even with every row's class known, so the rate to adapt to would be "
            f"made up; give at least {needed:,} rows, or the rate with {option_hint('--prior R', 'prior=')}"
        )


def _rows_telling(rate: float, level: float) -> int | None:
    """The fewest rows whose Clopper-Pearson interval at `level`, with none positive and with all positive,
    excludes `rate` both times (None past a billion)."""

    def telling(rows: int) -> bool:
        none = clopper_pearson_interval(0, rows, level)
        every = clopper_pearson_interval(rows, rows, level)
        return none[1] < rate < every[0]

    return fewest_passing(telling, 10**9)


def _widened(low: float, high: float, *, rate: float, rows: int, level: float) -> tuple[float, float]:
    """The rate's interval, never narrower than NEW's row count allows: even with every row's class known, `rows`
    rows bound a rate only to the Clopper-Pearson interval of their count of positives, so no estimate from their
    scores can be surer. A bootstrap over a handful of rows collapses (one row gave [0.5, 0.5] once clipped to
    half a row of 0 and 1); the interval kept is the union of the two, not clipped, so its low end is the real
    one a certificate must hold at."""
    known = clopper_pearson_interval(round(rate * rows), rows, level)
    return float(max(0.0, min(low, known[0]))), float(min(1.0, max(high, known[1])))


def _unbounded_rate(
    curve: HeldOutCurve, model: DmoModel, *, rate: float, interval: tuple[float, float], rows: int, level: float
) -> UnreachableTarget | None:
    """The refusal (exit 3) where the rate's low end, not the rate, puts a certificate out of reach: too few NEW
    rows to bound the rate above the lowest one at which the target can be certified. It names that rate, the rows
    a count of known classes would need to bound the rate estimated above it (a floor: scores bound it less
    tightly), and --prior. A rate estimated below that lowest one is out of reach however many rows: the usual
    refusal says so."""
    lowest = _lowest_certifiable_rate(curve, model, level)
    if lowest is None or interval[0] >= lowest or rate < lowest:
        return None
    needed = _rows_bounding(rate, lowest, level)
    more = f"at least about {needed:,} rows" if needed is not None else "more rows"
    return UnreachableTarget(
        f"target {model.problem.constraint_name} >= {model.problem.target:g} cannot be certified at the rate "
        f"estimated on {rows:,} row(s) of NEW: its interval [{interval[0]:.4f}, {interval[1]:.4f}] reaches below "
        f"{lowest:.4f}, the lowest positive rate at which any threshold is certified; {more} bound a rate of "
        f"{rate:.4f} above it (even with every row's class known), or give the rate with "
        f"{option_hint('--prior R', 'prior=')}"
    )


def _lowest_certifiable_rate(curve: HeldOutCurve, model: DmoModel, level: float) -> float | None:
    """The lowest positive rate at which the population's precision is certified at the target (at the level the
    rate's low end leaves it), by bisection: precision rises with the rate. None when none below 1 is."""

    def certified(rate: float) -> bool:
        asked = adapt_threshold(curve, model.problem, rate, confidence=level, rate_interval=(rate, rate))
        return bool(asked.feasible)

    low, high = 0.0, 1.0 - 1e-9
    if not certified(high):
        return None
    for _ in range(40):
        middle = (low + high) / 2.0
        low, high = (low, middle) if certified(middle) else (middle, high)
    return high


def _rows_bounding(rate: float, lowest: float, level: float) -> int | None:
    """The fewest rows whose count of positives at `rate`, were every class known, has its two-sided `level`
    Clopper-Pearson interval above `lowest` (None past a billion)."""
    return fewest_passing(lambda rows: clopper_pearson_interval(round(rate * rows), rows, level)[0] >= lowest, 10**9)


def _unreachable(
    model: DmoModel, adapted: AdaptedThreshold, *, confidence: float | None, source: str
) -> UnreachableTarget | None:
    """The refusal (exit 3) when the target is out of reach at the new rate, naming the ways out; None if it is
    reached."""
    if adapted.feasible is not False:
        return None
    rate = f"the positive rate {adapted.rate_used:.4f} ({source})"
    if adapted.rate_used != adapted.new_rate:  # the certificate holds at the interval's low end, not the estimate
        rate = (
            f"the positive rate {adapted.rate_used:.4f}, the low end of the interval of the rate estimated at "
            f"{adapted.new_rate:.4f} ({source}; {option_hint('--prior R', 'prior=')} where the rate is known)"
        )
    return UnreachableTarget(
        f"target {model.problem.constraint_name} >= {model.problem.target:g} is not "
        f"{'certified' if confidence else 'reachable'} at {rate}"
        + _sample_clause(adapted.new_rows)
        + f"; lower {option_hint('--target', 'target')}, retrain for the new rate, or pass "
        f"{option_hint('--allow-infeasible', 'allow_infeasible=True')} to keep the closest threshold"
    )


def carry_to_model(
    model: DmoModel, curve: HeldOutCurve, *, cut: float, rate: float, logits: np.ndarray | None
) -> tuple[float, dict[str, Any]]:
    """(the model's new threshold, the `adapted` section's `carried` and `expected_share`) for the cut the curve
    gave at `rate`: carried by the share of NEW (`logits`, the model's scores of it) it is expected to flag where
    the model's scores are not on the curve's scale and the cut was re-targeted (FROP's does not move), else kept.
    `expected_share` is None without NEW rows (--prior)."""
    if logits is None:
        return cut, {"carried": "score", "expected_share": None}
    if model.curve_off_scale and model.problem.kind != "frop":
        threshold, share = carried_by_share(curve, cut, rate, logits)
        return threshold, {"carried": "share", "expected_share": share}
    return cut, {"carried": "score", "expected_share": expected_share(curve, cut, rate)}


def _scale_warnings(model: DmoModel, carried: str, logits: np.ndarray | None) -> list[str]:
    """A cut kept on the held-out scale of a model whose scores are not on it (--prior: no NEW rows to carry it
    by; a curve carried to the model's scale at training is on it), or a new threshold above every score of NEW."""
    if logits is not None:
        return _flags_nothing(model.threshold, logits, carried)
    if not model.curve_off_scale or model.problem.kind == "frop":
        return []
    return [
        f"the new threshold {model.threshold:.6g} is on the scale of the held-out scores, which this --cv ensemble "
        "of boosted trees does not share (it averages its members' probabilities), so it may flag far fewer rows "
        "than expected, or none; give unlabeled rows with --adapt NEW instead of --prior to carry the cut to the "
        "model by the share of them it should flag"
    ]


def _flags_nothing(threshold: float, logits: np.ndarray | None, carried: str = "score") -> list[str]:
    """The warning when the new threshold is above every score of NEW: the model would flag none of its rows. Kept
    on the curve's scale, the cut may be above the model's scores (DmoModel.curve_off_scale); carried by share, the
    cut is expected to flag less than half a row."""
    if logits is None or np.count_nonzero(logits >= np.float32(threshold)):
        return []
    why = (
        "the cut is expected to flag less than half a row of NEW"
        if carried == "share"
        else "the held-out scores it was chosen on reach higher than this model's own"
    )
    return [
        f"the new threshold {threshold:.6g} is above every score of NEW (the highest: {float(logits.max()):.6g}), so "
        f"the model flags none of its rows: {why}; a lower --confidence or a larger --new-rows asks less, or retrain"
    ]


def _sample_clause(new_rows: int | None) -> str:
    """What a refused new-sample certificate was about, and the options that ask less."""
    if new_rows is None:
        return ""
    less = f"a larger {option_hint('--new-rows', 'new_rows=')}, or {option_hint('--new-rows inf', 'new_rows=inf')}"
    return f" for the value measured on {new_rows:,} new rows ({less} for the population value, asks less)"


def _scores(model: Any, data: sources.Source) -> np.ndarray:
    """The model's logits on every row of NEW, in one scored pass in this process (labels, if any, are not read)."""
    kept = Logits()
    ScoredTable(model, data).run([kept], columns=model.preprocessor.input_columns)
    logits = kept.result()
    if logits.size == 0:
        raise DmoError(f"{sources.describe(data)} has no rows to estimate the positive rate on")
    return logits
