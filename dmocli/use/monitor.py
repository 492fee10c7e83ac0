"""`dmo monitor MODEL NEW`: what a model's operating point is worth on new, unlabeled rows.

The rows a model meets after training have another positive rate, or have drifted. From the held-out curve and
the training profile the model file keeps, and the new rows' scores alone, the report gives:

- the new rows' positive rate with an interval (PACC on the held-out curve, chosen by bench/label_shift.py), beside
  the training rate and classify-and-count;
- precision, recall and F-beta at the model's threshold under label shift (class-conditional scores unchanged:
  the held-out curve at the estimated rate) and under covariate shift (calibrated probabilities unchanged), each
  with an interval, and whether the data contradict one of the two assumptions (their rate estimates disagree);
- drift of the score and of each feature against the training profile (PSI and a chi-square test), most drifted
  first, and the unseen levels;
- with labels present, the realized values beside the estimates.

`gate=True` ends the run with exit 3 when the label-shift estimate rules the target out (its interval lies below
the target), the positive rate moved past the documented limit (FPOR and OFBS: by a factor of 1.25 either way,
its interval excluding the training rate), or a feature drifts past the documented limit (shift/drift_stats.py:
PSI >= 0.25 and significant).
`chunk_col` / `chunk_size` repeat all of it per chunk, in order (a time column, or consecutive rows).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats takes about a second to import)

from dmocli.data import outputs, sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError, UnreachableTarget
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_interval
from dmocli.operating_point.calibration import probability
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.pipelines.saving import refuse_with_report
from dmocli.pipelines.thresholding import problem_fields
from dmocli.prep.row_fingerprint import TrainingRowsFound, training_rows_warnings
from dmocli.report import binary_split_report, envelope, label_fields, write_report
from dmocli.shift.drift_stats import FeatureDrift, compare, drift_gate, is_evidence
from dmocli.shift.expected import metrics_under_covariate_shift, metrics_under_label_shift
from dmocli.shift.prevalence import estimate_prevalence
from dmocli.use.apply import heldout_curve
from dmocli.use.monitor_read import Section, read_sections

MOST_DRIFTED = 10  # features listed per section (all of them are gated)
# The positive rate drifts past the limit when it moved by this factor or more, either way, and its interval
# excludes the training rate: far and surely, as a feature's PSI >= 0.25 and significant (docs/monitoring.md).
RATE_DRIFT_FACTOR = 1.25
RATE_DEPENDENT = ("fpor", "ofbs")  # FROP's threshold is the same at any rate: its recall does not move


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
) -> dict[str, Any]:
    """The `monitor` report of `data` for the model at `model_path` (docs/monitoring.md); `engine` scores NEW in
    this process or on Dask workers, with the same report. Rows the model was trained on (its fingerprint) are
    warned about with their share, and refused under the gate unless `allow_train_rows`."""
    started = time.perf_counter()
    data = sources.accept(data)
    outputs.check_outputs({"--report": report_path}, {"MODEL": model_path, "NEW": data})
    if chunk_size is not None and chunk_size < 1:
        raise DmoError(f"--chunk-size {chunk_size} must be at least 1 row")
    model = load_model(model_path)
    if not model.binary:
        raise DmoError("monitor applies to binary models; this model is multi-class")
    curve = heldout_curve(model, model_path)
    read = read_sections(model, data, chunk_col=chunk_col, chunk_size=chunk_size, engine=engine)
    seen = TrainingRowsFound.of(model.training_rows, read.hashes)
    seen_warnings = training_rows_warnings(seen, sources.describe(data), gated=gate and not allow_train_rows)
    overall = _section_report(model, curve, read.whole, confidence)
    sections = [{"chunk": c.name, **_section_report(model, curve, c, confidence)} for c in read.chunks]
    chunked = {"chunk_by": {"column": chunk_col, "rows": chunk_size}, "chunks": sections} if read.chunks else {}
    verdict = _gate(overall, sections, model, gate)
    report = envelope(
        "monitor",
        model=str(model_path),
        data=sources.describe(data),
        engine=engine.name,
        **label_fields(model.labels),
        **problem_fields(model.problem),
        threshold=model.threshold,
        training_rate=curve.rate,
        confidence=confidence,
        warnings=seen_warnings + _too_small_warnings(overall, sections, confidence),
        training_rows=None if seen is None else seen.to_dict(),
        **overall,
        **chunked,
        gate=verdict,
        wall_seconds=time.perf_counter() - started,
    )
    if gate and not verdict["passed"]:
        refuse_with_report(UnreachableTarget(_gate_message(verdict)), report, report_path, started)
    if report_path is not None:
        write_report(report_path, report)
    return report


def _section_report(model: DmoModel, curve: HeldOutCurve, section: Section, confidence: float) -> dict[str, Any]:
    logits = np.concatenate(section.logits).astype(np.float32)
    labels = np.concatenate(section.labels)
    beta = model.problem.beta if model.problem is not None else 1.0
    calibration = model.calibration
    out = label_shift_section(curve, logits, calibration, model.threshold, beta=beta, confidence=confidence)
    out["covariate_shift"] = metrics_under_covariate_shift(
        logits, model.threshold, calibration, beta, confidence=confidence
    )
    if out["too_small"]:  # the normal approximation's intervals collapse on a handful of rows (one row: [0, 0])
        out["covariate_shift"] = _unbounded(out["covariate_shift"])
    low, high = out["positive_rate"]["interval"]
    out["assumptions"] = _assumptions(low, high, _mean_probability(logits, calibration, confidence))
    labeled = labels >= 0
    if labeled.any():
        out["realized"] = {
            "rows": int(labeled.sum()),
            "positive_rate": float(np.mean(labels[labeled] == 1)),
            **_realized(model, logits[labeled], labels[labeled]),
        }
    if section.builder is not None:
        if _score_comparable(model):
            section.builder.add_scores(logits)  # once, in row order: on either engine the same bins
        drifts = compare(model.profile, section.builder.finish())
        out["drift"] = [_drift_entry(drift, len(drifts)) for drift in drifts[:MOST_DRIFTED]]
        out["drift_reasons"] = drift_gate(drifts)
    return out


def label_shift_section(
    curve: HeldOutCurve, logits: np.ndarray, calibration: Any, threshold: float, *, beta: float, confidence: float
) -> dict[str, Any]:
    """A section's rows, positive rate and metrics under label shift (bench/monitor_coverage.py simulates the gate
    on these alone); `too_small` where its rows are too few for any outcome to tell its rate from the training
    rate (label_shift.exact_rate_interval's `rows_needed`): its figures are shown, never gated."""
    rate = estimate_prevalence(curve, logits, calibration, confidence)
    return {
        "rows": int(logits.size),
        "too_small": rate.too_few_rows,
        "positive_rate": {
            "estimate": rate.rate,
            "interval": [rate.low, rate.high],
            "method": rate.method,
            "classify_and_count": float(np.mean(logits >= np.float32(threshold))),
            "training": curve.rate,
            "training_interval": clopper_pearson_interval(curve.n_pos, curve.n_pos + curve.n_neg, confidence),
            "rows_needed": rate.rows_needed,
        },
        "label_shift": metrics_under_label_shift(curve, threshold, rate, beta),
    }


def _too_small_warnings(overall: dict[str, Any], chunks: list[dict[str, Any]], confidence: float) -> list[str]:
    """Sections too small to say anything, said: their figures are shown but nothing is gated on them."""
    needed = overall["positive_rate"]["rows_needed"]
    why = f"to tell a positive rate from the training rate at {confidence:g} (at least {needed} needed)"
    warnings = []
    if overall["too_small"]:
        warnings.append(f"NEW has {overall['rows']} row(s), too few {why}: nothing is gated on it")
    small = [chunk for chunk in chunks if chunk["too_small"]]
    if small:
        warnings.append(
            f"{len(small)} of {len(chunks)} chunks have too few rows {why}: they are shown, not gated (give a larger "
            "--chunk-size or a coarser --chunk-col)"
        )
    return warnings


def _realized(model: DmoModel, logits: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    split = binary_split_report(
        logits, labels, threshold=model.threshold, problem=model.problem, calibration=model.calibration
    )
    keys = ("precision", "recall", "f_beta", "precision_interval", "recall_interval", "tp", "fp", "fn")
    return {key: split[key] for key in keys if key in split}


def _score_comparable(model: DmoModel) -> bool:
    """Whether the model's score on NEW can be compared with its stored held-out scores: only a single model's.
    An ensemble's stored scores are its members' out-of-fold scores, one member a row, and its own score averages
    the members' probabilities: a scale the held-out scores never had (boosted trees: PSI 6.6 on sample_data with
    no drift at all). That figure is not drift, so it is neither listed as drift nor gated."""
    return model.architecture.members == 1


def _drift_entry(drift: FeatureDrift, tests: int) -> dict[str, Any]:
    """A listed feature's figures, and whether its change is evidence of drift at all (`significant`: more than
    the section's rows could show by chance), without which its PSI's severity means nothing."""
    return {**dataclasses.asdict(drift), "severity": drift.severity, "significant": is_evidence(drift, tests)}


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


def _assumptions(low: float, high: float, interval: list[float]) -> dict[str, Any]:
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
    return {"agree": agree, "note": note}


def _gate(overall: dict[str, Any], chunks: list[dict[str, Any]], model: DmoModel, asked: bool) -> dict[str, Any]:
    """The verdict on every section (all rows, then each chunk): the target ruled out by the label-shift
    interval, the positive rate or a feature drifted past its limit. Recorded whether or not --gate was asked;
    only --gate turns a failure into exit 3."""
    reasons = above_its_scores(model, curve=model.heldout)
    reasons += [f"all rows: {reason}" for reason in section_reasons(overall, model.problem)]
    for section in chunks:
        reasons += [f"chunk {section['chunk']}: {reason}" for reason in section_reasons(section, model.problem)]
    return {"asked": asked, "passed": not reasons, "reasons": reasons}


def above_its_scores(model: DmoModel, *, curve: Any) -> list[str]:
    """The model's threshold above every score it gives its own training rows (the curve's `highest_own`, kept where
    the curve holds out-of-fold scores): it flags none of them, so every estimate read from the curve at that cut
    describes rows the model does not flag. A reason to stop, whatever the estimates say."""
    highest = getattr(curve, "highest_own", None)
    if highest is None or np.float32(highest) >= np.float32(model.threshold):
        return []
    return [
        f"the threshold {model.threshold:.6g} is above every score the model gives its training rows (the highest: "
        f"{highest:.6g}), so it flags none of them and the estimates read from its held-out curve there do not "
        "apply; re-target on labeled DATA, or retrain with --cv-transfer rank"
    ]


def section_reasons(section: dict[str, Any], problem: Problem | None) -> list[str]:
    """Why the gate fails on one section: none where the section is too small to say anything."""
    if section["too_small"]:
        return []
    reasons = list(section.get("drift_reasons", []))
    if problem is not None and problem.kind in RATE_DEPENDENT:
        reasons[:0] = rate_drift(section["positive_rate"])
    if problem is not None and problem.kind in ("fpor", "frop"):
        metric = problem.constraint_name
        low, high = section["label_shift"][f"{metric}_interval"]
        if high < problem.target:
            reasons.insert(
                0,
                f"estimated {metric} {section['label_shift'][metric]:.4f} (interval [{low:.4f}, {high:.4f}]) is below "
                f"the target {problem.target:g} at the estimated positive rate "
                f"{section['positive_rate']['estimate']:.4f} (trained at {section['positive_rate']['training']:.4f})",
            )
    return reasons


def rate_drift(rate: dict[str, Any]) -> list[str]:
    """The reason, if any, that the positive rate moved far and surely from the one the threshold was chosen at.

    Under a label shift FPOR's precision and OFBS's best threshold move with the rate, in either direction: a
    rate that doubled leaves recall on the table at a threshold chosen for precision at the old rate, one that
    halved costs precision. Far: the estimate is RATE_DRIFT_FACTOR times the training rate or more, or that much
    less. Surely: the estimate's interval and the training rate's (the held-out rows are a sample too:
    `training_interval`, their Clopper-Pearson interval) do not meet, so a large sample's negligible move, a small
    sample's noisy one and a held-out rate off by chance all pass (bench/monitor_coverage.py)."""
    estimate, training, interval = rate["estimate"], rate["training"], rate["interval"]
    if interval is None or None in interval or training <= 0:
        return []
    factor = estimate / training
    far = factor >= RATE_DRIFT_FACTOR or factor <= 1 / RATE_DRIFT_FACTOR
    known = rate.get("training_interval") or [training, training]
    surely = interval[1] < known[0] or interval[0] > known[1]
    if not (far and surely):
        return []
    return [
        f"the positive rate moved from {training:.4f} (training) to {estimate:.4f} (interval [{interval[0]:.4f}, "
        f"{interval[1]:.4f}]), a factor of {factor:.2f}: past the limit of {RATE_DRIFT_FACTOR:g} either way, and "
        "the threshold was chosen at the training rate"
    ]


def _gate_message(gate: dict[str, Any]) -> str:
    first = gate["reasons"][0]
    more = f" (and {len(gate['reasons']) - 1} more reason(s) in the report)" if len(gate["reasons"]) > 1 else ""
    return (
        f"gate failed: {first}{more}; move the threshold for the new rate (dmo threshold MODEL --adapt NEW), "
        "re-fit it on recent labeled rows, or retrain"
    )
