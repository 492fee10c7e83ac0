"""`dmo monitor MODEL NEW`: what a model's operating point is worth on new, unlabeled rows.

The rows a model meets after training have another positive rate, or have drifted. From the held-out curve and
the training profile the model file keeps, and the new rows' scores alone, the result (use/results/monitor.py)
gives:

- the new rows' positive rate with an interval (PACC on the held-out curve, chosen by bench/label_shift.py), beside
  the training rate and classify-and-count, and the reference rate it is judged against: the training rate, or for
  a model `dmo threshold --adapt` wrote, the rate it was adapted to;
- precision, recall and F-beta at the model's threshold under label shift (class-conditional scores unchanged:
  the held-out curve at the estimated rate) and under covariate shift (calibrated probabilities unchanged), each
  with an interval, and whether the data contradict one of the two assumptions (their rate estimates disagree);
- drift of the score and of each feature against the training profile (PSI and a chi-square test), most drifted
  first, and the unseen levels; a trend feature (a date's days_since) marked expected;
- with labels present, the realized values beside the estimates.

`gate=True` ends the run with exit 3 when one of the verdicts of use/verdicts.py fails: the label-shift estimate
rules the target out (its interval lies below the target), the positive rate moved past the limit from the
reference rate (FPOR and OFBS: by a factor of 1.25 either way, its interval excluding the reference rate), or a
feature other than a trend drifts past the limit (PSI >= 0.25 and significant).
`chunk_col` / `chunk_size` repeat all of it per chunk, in order (a time column, or consecutive rows).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats takes about a second to import)

from dmocli.data import outputs, sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel, file_sha256, load_model
from dmocli.operating_point.alert_budget import AlertBudget, period_alerts
from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_interval
from dmocli.operating_point.calibration import probability
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.pipelines.saving import refuse_with_report
from dmocli.prep.periods import Periods
from dmocli.prep.row_fingerprint import TrainingRowsFound, training_rows_warnings
from dmocli.report import write_report, written_now
from dmocli.shift.drift_stats import FeatureDrift, compare, is_evidence
from dmocli.shift.expected import metrics_under_covariate_shift, metrics_under_label_shift
from dmocli.shift.prevalence import estimate_prevalence
from dmocli.shift.value import expected_value, value_at_rate
from dmocli.use.history import Cut, record_monitor
from dmocli.use.monitor_read import Section, read_sections
from dmocli.use.results.band import ReviewVolume
from dmocli.use.results.common import Envelope, LabelFields, ProblemFields
from dmocli.use.results.monitor import (
    AlertsEstimate,
    Assumptions,
    ChunkBy,
    ChunkSection,
    CovariateShiftEstimate,
    DriftEntry,
    DriftMap,
    ExpectedValueEstimate,
    LabelShiftEstimate,
    MonitorGate,
    MonitorGateFailed,
    MonitorResult,
    MonitorSection,
    PositiveRate,
    Realized,
)
from dmocli.use.verdicts import (
    DRIFT_ALPHA,
    Reason,
    ReferenceRate,
    above_its_scores,
    drift_reasons,
    gate_message,
    past_limit,
    section_reasons,
)

MOST_DRIFTED = 10  # features listed per section (all of them are gated)


def monitor(
    model_path: str | Path,
    data: sources.Source,
    *,
    gate: bool = False,
    chunk_col: str | None = None,
    chunk_size: int | None = None,
    confidence: float = REPORT_LEVEL,
    report_path: str | Path | None = None,
    engine: EngineChoice = LOCAL,
    allow_train_rows: bool = False,
    time_col: str | None = None,
    every: str | None = None,
    history: str | Path | None = None,
) -> MonitorResult:
    """The `monitor` result of `data` for the model at `model_path` (docs/monitoring.md); `engine` scores NEW in
    this process or on Dask workers, with the same report. Rows the model was trained on (its fingerprint) are
    warned about with their share, and refused under the gate unless `allow_train_rows`. A failed gate raises
    MonitorGateFailed (exit 3) with the report, written to `report_path` first. `time_col` and `every` cut NEW into
    periods (prep/periods.py); `history` records the run's periods, gate failed or not (use/history.py)."""
    started = time.perf_counter()
    data = sources.accept(data)
    outputs.check_outputs({"--report": report_path, "--history": history}, {"MODEL": model_path, "NEW": data})
    if chunk_size is not None and chunk_size < 1:
        raise DmoError(f"--chunk-size {chunk_size} must be at least 1 row")
    model = load_model(model_path)
    if not model.binary:
        raise DmoError("monitor applies to binary models; this model is multi-class")
    curve = model.stored_heldout(model_path)
    reference = reference_rate(model, curve, confidence)
    periods = None if every is None else Periods.of(time_col, every, model.preprocessor.derive)
    read = read_sections(model, data, chunk_col=chunk_col, chunk_size=chunk_size, engine=engine, periods=periods)
    seen = TrainingRowsFound.of(model.training_rows, read.hashes)
    seen_warnings = training_rows_warnings(seen, sources.describe(data), gated=gate and not allow_train_rows)
    overall = _section(model, curve, read.whole, confidence=confidence, reference=reference)
    chunks = [
        ChunkSection(chunk=c.name, section=_section(model, curve, c, confidence=confidence, reference=reference))
        for c in read.chunks
    ]
    reasons = _reasons(overall, chunks, model, reference)
    result = MonitorResult(
        envelope=Envelope.of("monitor"),
        model=str(model_path),
        model_sha256=file_sha256(model_path),
        data=sources.describe(data),
        engine=engine.name,
        labels=LabelFields.of(model.labels),
        problem=ProblemFields.of(model.problem),
        threshold=model.threshold,
        training_rate=curve.rate,
        reference_rate=reference,
        confidence=confidence,
        warnings=seen_warnings
        + _too_small_warnings(overall, [c.section for c in chunks], confidence)
        + ([] if periods is None else periods.missing_warnings(read.missing_time)),
        training_rows=seen,
        overall=overall,
        chunk_by=ChunkBy(column=chunk_col or time_col, rows=chunk_size, every=every) if chunks else None,
        chunks=chunks or None,
        gate=MonitorGate(asked=gate, passed=not reasons, reasons=[reason.shown() for reason in reasons]),
    )
    result = replace(result, written_at=written_now(), wall_seconds=time.perf_counter() - started)
    if history is not None:
        record_monitor(history, result, Cut.of(every=every, chunk_col=chunk_col))
    if gate and reasons:
        refuse_with_report(MonitorGateFailed(gate_message(reasons), result), result.to_dict(), report_path, started)
    if report_path is not None:
        write_report(report_path, result.to_dict())
    return result


def reference_rate(model: DmoModel, curve: HeldOutCurve, confidence: float) -> ReferenceRate:
    """The positive rate the model's threshold was chosen at: the held-out rows' (with their Clopper-Pearson
    interval at `confidence`), or, for a model `dmo threshold --adapt/--prior` wrote, the rate it was adapted to
    (its `info.adapted.new_rate`, with the interval adapt kept where it kept one): the threshold was searched on the
    held-out curve reweighted to that rate, so a NEW at that rate is what the model expects, not a drift."""
    adapted = model.info.get("adapted")
    if adapted is None:
        return ReferenceRate.training(curve, confidence)
    kept = adapted.get("rate_interval")
    return ReferenceRate(source="adapted", rate=adapted["new_rate"], interval=None if kept is None else list(kept))


def _section(
    model: DmoModel, curve: HeldOutCurve, section: Section, *, confidence: float, reference: ReferenceRate
) -> MonitorSection:
    """One section's estimates, realized figures (labeled rows) and drift (a model file with a drift profile)."""
    logits = np.concatenate(section.logits).astype(np.float32)
    labels = np.concatenate(section.labels)
    beta = model.problem.beta if model.problem is not None else 1.0
    calibration = model.calibration
    out = label_shift_section(
        curve, logits, calibration, model.threshold, beta=beta, confidence=confidence, curve_cut=_curve_cut(model)
    )
    covariate = metrics_under_covariate_shift(logits, model.threshold, calibration, beta, confidence=confidence)
    if out.too_small:  # the normal approximation's intervals collapse on a handful of rows (one row: [0, 0])
        covariate = _unbounded(covariate)
    low, high = out.positive_rate.interval
    labeled = labels >= 0
    realized = Realized.at_threshold(model, logits[labeled], labels[labeled]) if labeled.any() else None
    drift, reasons, drift_map = _drift(model, section, logits)
    return MonitorSection(
        rows=out.rows,
        too_small=out.too_small,
        positive_rate=out.positive_rate,
        label_shift=out.label_shift,
        covariate_shift=CovariateShiftEstimate(**covariate),
        assumptions=_assumptions(low, high, _mean_probability(logits, calibration, confidence)),
        realized=realized,
        drift=drift,
        drift_reasons=reasons,
        drift_map=drift_map,
        value=_expected_value(model, curve, out, reference=reference, confidence=confidence),
        alerts=_alerts(model, logits, confidence),
        review_volume=ReviewVolume.of(model, logits),
    )


def _alerts(model: DmoModel, logits: np.ndarray, confidence: float) -> AlertsEstimate | None:
    """A model trained within an alert budget: the alerts its threshold raises on the section's own rows against the
    budget (operating_point/alert_budget.py:period_alerts); None for any other model."""
    try:
        budget = AlertBudget.from_info(model.info.get("alert_budget"))
    except ValueError as exc:
        raise DmoError(f"the model file's alert budget cannot be read ({exc}); retrain it") from exc
    if budget is None:
        return None
    flagged = int(np.count_nonzero(logits >= np.float32(model.threshold)))
    return AlertsEstimate(**period_alerts(budget, flagged, int(logits.size), confidence=confidence))


def _drift(
    model: DmoModel, section: Section, logits: np.ndarray
) -> tuple[list[DriftEntry] | None, list[str] | None, DriftMap | None]:
    """The section's most drifted features, the gate's reasons among all of them and every feature's drift (None: no
    stored profile). A trend feature (Preprocessor.trend_features) is listed, marked expected, and never a reason."""
    if section.builder is None:
        return None, None, None
    if _score_comparable(model):
        section.builder.add_scores(logits)  # once, in row order: on either engine the same bins
    drifts = compare(model.profile, section.builder.finish())
    expected = frozenset(model.preprocessor.trend_features())
    listed = [_drift_entry(drift, len(drifts), expected) for drift in drifts[:MOST_DRIFTED]]
    return listed, drift_reasons(drifts, expected), DriftMap.of(drifts, past_limit(drifts, expected))


@dataclass(frozen=True, kw_only=True)
class RateSection:
    """What a section's scores alone say under label shift: its positive rate and the metrics there (the figures
    the gate reads, with no drift: use/verdicts.py section_reasons takes it as it takes a whole MonitorSection)."""

    rows: int
    too_small: bool
    positive_rate: PositiveRate
    label_shift: LabelShiftEstimate
    drift_reasons: list[str] | None = None
    alerts: AlertsEstimate | None = None  # never: the scores alone of bench/monitor_coverage.py carry no budget


def label_shift_section(
    curve: HeldOutCurve,
    logits: np.ndarray,
    calibration: Any,
    threshold: float,
    *,
    beta: float,
    confidence: float,
    curve_cut: float | None = None,
) -> RateSection:
    """A section's rows, positive rate and metrics under label shift (bench/monitor_coverage.py simulates the gate
    on these alone); `too_small` where its rows are too few for any outcome to tell its rate from the training rate
    (prevalence.exact_rate_interval's `rows_needed`): its figures are shown, never gated. The metrics are read off
    the curve at `curve_cut` where the model's `threshold` is not on the curve's scale (`_curve_cut`)."""
    rate = estimate_prevalence(curve, logits, calibration, confidence)
    positive_rate = PositiveRate(
        estimate=rate.rate,
        interval=[rate.low, rate.high],
        method=rate.method,
        classify_and_count=float(np.mean(logits >= np.float32(threshold))),
        training=curve.rate,
        training_interval=clopper_pearson_interval(curve.n_pos, curve.n_pos + curve.n_neg, confidence),
        rows_needed=rate.rows_needed,
    )
    cut = threshold if curve_cut is None else curve_cut
    label_shift = LabelShiftEstimate(**metrics_under_label_shift(curve, cut, rate, beta))
    return RateSection(
        rows=int(logits.size), too_small=rate.too_few_rows, positive_rate=positive_rate, label_shift=label_shift
    )


def _expected_value(
    model: DmoModel, curve: HeldOutCurve, out: RateSection, *, reference: ReferenceRate, confidence: float
) -> ExpectedValueEstimate | None:
    """A model with a gain matrix: the value per row expected on the section at its estimated rate, with the rate's
    interval carried through, and at the reference rate (shift/value.py); None for any other model."""
    if curve.gain is None or curve.gains is None:
        return None
    rate, cut = out.positive_rate, _value_cut(model)
    interval = rate.interval if rate.interval and None not in rate.interval else [rate.estimate, rate.estimate]
    value = expected_value(curve, cut, rate.estimate, (interval[0], interval[1]), rows=out.rows, confidence=confidence)
    return ExpectedValueEstimate(
        gain=curve.gain.text,
        rate=value.rate,
        per_row=value.per_row,
        per_row_interval=list(value.per_row_interval),
        total=value.total,
        total_interval=list(value.total_interval),
        confidence=confidence,
        reference_rate=reference.rate,
        per_row_at_reference=value_at_rate(curve, cut, reference.rate),
    )


def _value_cut(model: DmoModel) -> float:
    """The threshold on the held-out curve's scale, where the value is read (`_curve_cut`)."""
    cut = _curve_cut(model)
    return model.threshold if cut is None else cut


def _curve_cut(model: DmoModel) -> float | None:
    """The cut on the held-out curve's scale where `dmo threshold --adapt` carried it to the model's own scores by
    the share of NEW it flags (a gbdt `--cv` ensemble, whose averaged probabilities are on another scale than its
    members' out-of-fold scores: use/adapt.py): the label-shift estimates are read there, where adapt searched
    them. None where the model's threshold is the curve's cut."""
    adapted = model.info.get("adapted") or {}
    return adapted.get("curve_threshold") if adapted.get("carried") == "share" else None


def _too_small_warnings(overall: MonitorSection, chunks: list[MonitorSection], confidence: float) -> list[str]:
    """Sections too small to say anything, said: their figures are shown but nothing is gated on them."""
    needed = overall.positive_rate.rows_needed
    why = f"to tell a positive rate from the training rate at {confidence:g} (at least {needed} needed)"
    warnings = []
    if overall.too_small:
        warnings.append(f"NEW has {overall.rows} row(s), too few {why}: nothing is gated on it")
    small = [chunk for chunk in chunks if chunk.too_small]
    if small:
        warnings.append(
            f"{len(small)} of {len(chunks)} chunks have too few rows {why}: they are shown, not gated (give a larger "
            "--chunk-size or a coarser --chunk-col)"
        )
    return warnings


def _score_comparable(model: DmoModel) -> bool:
    """Whether the model's score on NEW can be compared with its stored held-out scores: only a single model's.
    An ensemble's stored scores are its members' out-of-fold scores, one member a row, and its own score averages
    the members' probabilities: a scale the held-out scores never had (boosted trees: PSI 6.6 on sample_data with
    no drift at all). That figure is not drift, so it is neither listed as drift nor gated."""
    return model.architecture.members == 1


def _drift_entry(drift: FeatureDrift, tests: int, expected: frozenset[str]) -> DriftEntry:
    """A listed feature's figures, and whether its change is evidence of drift at all (`significant`: more than
    the section's rows could show by chance), without which its PSI's severity means nothing."""
    return DriftEntry(
        **dataclasses.asdict(drift),
        severity=drift.severity,
        significant=is_evidence(drift, tests, DRIFT_ALPHA),
        expected=True if drift.name in expected else None,
    )


def _unbounded(estimates: dict[str, Any]) -> dict[str, Any]:
    """A too-small section's estimates with the intervals its rows can promise: none, [0, 1]."""
    wide = {f"{metric}_interval": [0.0, 1.0] for metric in ("precision", "recall", "f_beta")}
    return {**estimates, **{key: value for key, value in wide.items() if key in estimates}}


def _mean_probability(logits: np.ndarray, calibration: Any, confidence: float) -> list[float]:
    """The positive rate if calibrated probabilities are unchanged (covariate shift): their mean, with a normal
    interval of the Poisson-binomial count."""
    p = probability(logits, calibration)
    spread = float(ndtri(0.5 + confidence / 2) * np.sqrt(np.sum(p * (1 - p))) / p.size)
    return [float(p.mean()) - spread, float(p.mean()) + spread]


def _assumptions(low: float, high: float, interval: list[float]) -> Assumptions:
    """Under label shift the held-out curve's rate estimate is right; under covariate shift the mean calibrated
    probability is. Where their intervals do not meet, the data contradict at least one of the two."""
    agree = not (interval[1] < low or interval[0] > high)
    if agree:
        note = "the label-shift and covariate-shift estimates of the positive rate agree"
    else:
        note = (
            f"the positive rate is [{low:.4f}, {high:.4f}] from the stored curve (label shift) but "
            f"[{interval[0]:.4f}, {interval[1]:.4f}] from the calibrated probabilities (covariate shift): the data "
            "contradict at least one assumption; trust neither estimate of precision without labels"
        )
    return Assumptions(agree=agree, note=note)


def _reasons(
    overall: MonitorSection, chunks: list[ChunkSection], model: DmoModel, reference: ReferenceRate
) -> list[Reason]:
    """The gate's reasons on every section (all rows, then each chunk): the threshold above the model's own scores,
    the target ruled out by the label-shift interval, the positive rate or a feature drifted past its limit
    (use/verdicts.py). Recorded whether or not --gate was asked; only --gate turns a failure into exit 3."""
    reasons = above_its_scores(model.threshold, getattr(model.heldout, "highest_own", None))
    reasons += section_reasons(overall, model.problem, reference, "all rows")
    for chunk in chunks:
        reasons += section_reasons(chunk.section, model.problem, reference, f"chunk {chunk.chunk}")
    return reasons
