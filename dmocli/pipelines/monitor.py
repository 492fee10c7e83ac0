"""`dmo monitor MODEL NEW`: what a model's operating point is worth on new, unlabeled rows.

The rows a model meets after training have another positive rate, or have drifted. From the held-out curve and
the training profile the model file keeps, and the new rows' scores alone, the report gives:

- the new rows' positive rate with an interval (PACC on the stored curve, chosen by bench/label_shift.py), beside
  the training rate and classify-and-count;
- precision, recall and F-beta at the model's threshold under label shift (class-conditional scores unchanged:
  the stored curve at the estimated rate) and under covariate shift (calibrated probabilities unchanged), each
  with an interval, and whether the data contradict one of the two assumptions (their rate estimates disagree);
- drift of the score and of each feature against the training profile (PSI and a chi-square test), most drifted
  first, and the unseen levels;
- with labels present, the realized values beside the estimates.

`gate=True` ends the run with exit 3 when the label-shift estimate rules the target out (its interval lies below
the target) or a feature drifts past the documented limit (prep/feature_drift.py: PSI >= 0.25 and significant).
`chunk_col` / `chunk_size` repeat all of it per chunk, in order (a time column, or consecutive rows).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.stats import norm

from dmocli.data import outputs, sources
from dmocli.errors import DmoError, UnreachableTarget
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.operating_point.bounds import REPORT_LEVEL
from dmocli.operating_point.calibration import probability
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.label_shift import (
    estimate_prevalence,
    metrics_under_covariate_shift,
    metrics_under_label_shift,
)
from dmocli.pipelines.apply import stored_curve
from dmocli.pipelines.saving import refuse_with_report
from dmocli.pipelines.scoring import open_data
from dmocli.pipelines.thresholding import problem_fields
from dmocli.prep.feature_drift import FeatureDrift, ProfileBuilder, compare, drift_gate
from dmocli.report import binary_split_report, envelope, label_fields, write_report

MOST_DRIFTED = 10  # features listed per section (all of them are gated)
MAX_CHUNKS = 1000  # a chunk column with more values is an id or a timestamp, not a period


@dataclass
class _Section:
    """The rows of one chunk (or of all NEW): their logits, labels (-1: none) and feature profile."""

    name: str
    logits: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    builder: ProfileBuilder | None = None

    def add(self, batch: pa.RecordBatch | pa.Table, logits: np.ndarray, labels: np.ndarray) -> None:
        self.logits.append(logits)
        self.labels.append(labels)
        if self.builder is not None:
            self.builder.add(batch)
            self.builder.add_scores(logits)


def monitor(
    model_path: str | Path,
    data: sources.Source,
    *,
    gate: bool = False,
    chunk_col: str | None = None,
    chunk_size: int | None = None,
    confidence: float = REPORT_LEVEL,
    report_path: str | Path | None = None,
) -> dict[str, Any]:
    """The `monitor` report of `data` for the model at `model_path` (docs/monitoring.md)."""
    started = time.perf_counter()
    data = sources.accept(data)
    outputs.check_outputs({"--report": report_path}, {"MODEL": model_path, "NEW": data})
    if chunk_size is not None and chunk_size < 1:
        raise DmoError(f"--chunk-size {chunk_size} must be at least 1 row")
    model = load_model(model_path)
    if not model.binary:
        raise DmoError("monitor applies to binary models; this model is multi-class")
    curve = stored_curve(model, model_path)
    whole, chunks = _read(model, data, chunk_col, chunk_size)
    report = envelope(
        "monitor",
        model=str(model_path),
        data=sources.describe(data),
        **label_fields(model.labels),
        **problem_fields(model.problem),
        threshold=model.threshold,
        training_rate=curve.rate,
        confidence=confidence,
        warnings=[],
        **_section_report(model, curve, whole, confidence),
    )
    if chunks:
        report["chunk_by"] = {"column": chunk_col, "rows": chunk_size}
        report["chunks"] = [{"chunk": c.name, **_section_report(model, curve, c, confidence)} for c in chunks]
    report["gate"] = _gate(report, model, gate)
    report["wall_seconds"] = time.perf_counter() - started
    if gate and not report["gate"]["passed"]:
        refuse_with_report(UnreachableTarget(_gate_message(report["gate"])), report, report_path, started)
    if report_path is not None:
        write_report(report_path, report)
    return report


def _read(
    model: DmoModel, data: sources.Source, chunk_col: str | None, chunk_size: int | None
) -> tuple[_Section, list[_Section]]:
    """One pass over NEW: logits, labels where the label column is there, the profile, per chunk too."""
    schema, batches = open_data(data, model)
    problems = model.preprocessor.column_problems(schema)
    if chunk_col is not None and chunk_col not in schema.names:
        problems.append(f"--chunk-col {chunk_col!r} is not a column of {sources.describe(data)}")
    if problems:
        raise DmoError("; ".join(problems))
    labeled = model.labels.column in schema.names
    columns = [*model.preprocessor.input_columns, *([model.labels.column] if labeled else [])]
    columns += [chunk_col] if chunk_col is not None and chunk_col not in columns else []
    whole = _Section("all", builder=_builder(model))
    keyed: dict[Any, _Section] = {}
    row = 0
    for batch in batches(columns):
        derived = model.preprocessor.derived(batch)  # dates as parts, numbers parsed: the profile's columns
        features, _ = model.preprocessor.transform(derived)
        logits = model.logits_of_features(features)
        labels = model.labels.encode(batch.column(model.labels.column)) if labeled else np.full(batch.num_rows, -1)
        whole.add(derived, logits, labels)
        if chunk_col is not None or chunk_size is not None:
            keys = _chunk_keys(batch, chunk_col, chunk_size, row)
            for key in _in_order(keys):
                rows = np.flatnonzero(keys == key)
                if key not in keyed and len(keyed) == MAX_CHUNKS:
                    raise DmoError(
                        f"--chunk-col {chunk_col!r} has more than {MAX_CHUNKS} values (an id or a timestamp?); give "
                        "a column of periods (a day, a week), or --chunk-size N"
                    )
                section = keyed.setdefault(key, _Section(str(key), builder=_builder(model)))
                section.add(derived.take(pa.array(rows)), logits[rows], labels[rows])
        row += batch.num_rows
    if row == 0:
        raise DmoError(f"{sources.describe(data)} has no rows to monitor")
    return whole, [keyed[key] for key in sorted(keyed, key=_sortable)]


def _builder(model: DmoModel) -> ProfileBuilder | None:
    return None if model.profile is None else ProfileBuilder.matching(model.profile, model.preprocessor.categorical)


def _chunk_keys(batch: pa.RecordBatch, chunk_col: str | None, chunk_size: int | None, first_row: int) -> np.ndarray:
    """Each row's chunk: its value of --chunk-col, else its position // --chunk-size (with both: the value, and
    within it, the position)."""
    if chunk_col is None:
        return (first_row + np.arange(batch.num_rows)) // chunk_size
    values = np.asarray(pc.cast(batch.column(chunk_col), pa.string()).to_pylist(), dtype=object)
    if chunk_size is None:
        return values
    positions = (first_row + np.arange(batch.num_rows)) // chunk_size
    return np.array([f"{value}/{position}" for value, position in zip(values, positions)], dtype=object)


def _in_order(keys: np.ndarray) -> list[Any]:
    return list(dict.fromkeys(keys.tolist()))


def _sortable(key: Any) -> tuple[int, Any]:
    """Chunks in order: numbers by value, text (a date, a month) as text; missing values last."""
    if key is None:
        return (2, "")
    return (0, key) if isinstance(key, (int, np.integer)) else (1, str(key))


def _section_report(model: DmoModel, curve: HeldOutCurve, section: _Section, confidence: float) -> dict[str, Any]:
    logits = np.concatenate(section.logits).astype(np.float32)
    labels = np.concatenate(section.labels)
    beta = model.problem.beta if model.problem is not None else 1.0
    calibration = model.calibration
    rate = estimate_prevalence(curve, logits, calibration, confidence)
    predicted = float(np.mean(logits >= np.float32(model.threshold)))
    covariate = metrics_under_covariate_shift(logits, model.threshold, calibration, beta, confidence=confidence)
    out: dict[str, Any] = {
        "rows": int(logits.size),
        "positive_rate": {
            "estimate": rate.rate,
            "interval": [rate.low, rate.high],
            "method": rate.method,
            "classify_and_count": predicted,
            "training": curve.rate,
        },
        "label_shift": metrics_under_label_shift(curve, model.threshold, rate, beta),
        "covariate_shift": covariate,
        "assumptions": _assumptions(rate.low, rate.high, _mean_probability(logits, calibration, confidence)),
    }
    labeled = labels >= 0
    if labeled.any():
        out["realized"] = {
            "rows": int(labeled.sum()),
            "positive_rate": float(np.mean(labels[labeled] == 1)),
            **_realized(model, logits[labeled], labels[labeled]),
        }
    if section.builder is not None:
        drifts = compare(model.profile, section.builder.finish())
        out["drift"] = [_drift_entry(drift) for drift in drifts[:MOST_DRIFTED]]
        out["drift_reasons"] = drift_gate([drift for drift in drifts if _gated(drift, model)])
    return out


def _realized(model: DmoModel, logits: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    split = binary_split_report(
        logits, labels, threshold=model.threshold, problem=model.problem, calibration=model.calibration
    )
    keys = ("precision", "recall", "f_beta", "precision_interval", "recall_interval", "tp", "fp", "fn")
    return {key: split[key] for key in keys if key in split}


def _gated(drift: FeatureDrift, model: DmoModel) -> bool:
    """Every feature is gated; the score only for a single model. An ensemble's stored scores are its members'
    out-of-fold scores, one member a row, and its own score averages the members' probabilities: a scale the
    held-out scores never had (boosted trees: PSI 7 on sample_data with no drift at all), so it is shown, not gated."""
    return drift.kind != "score" or model.architecture.members == 1


def _drift_entry(drift: FeatureDrift) -> dict[str, Any]:
    return {**dataclasses.asdict(drift), "severity": drift.severity}


def _mean_probability(logits: np.ndarray, calibration: Any, confidence: float) -> list[float]:
    """The positive rate if calibrated probabilities are unchanged (covariate shift): their mean, with a normal
    interval of the Poisson-binomial count."""
    p = probability(logits, calibration)
    spread = float(norm.ppf(0.5 + confidence / 2) * np.sqrt(np.sum(p * (1 - p))) / p.size)
    return [float(p.mean()) - spread, float(p.mean()) + spread]


def _assumptions(low: float, high: float, interval: list[float]) -> dict[str, Any]:
    """Under label shift the stored curve's rate estimate is right; under covariate shift the mean calibrated
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


def _gate(report: dict[str, Any], model: DmoModel, asked: bool) -> dict[str, Any]:
    """The verdict on every section: the target ruled out by the label-shift interval, or a feature drifted past
    the limit. Recorded whether or not --gate was asked; only --gate turns a failure into exit 3."""
    reasons = []
    for section in [report, *report.get("chunks", [])]:
        where = "all rows" if section is report else f"chunk {section['chunk']}"
        reasons += [f"{where}: {reason}" for reason in _section_reasons(section, model)]
    return {"asked": asked, "passed": not reasons, "reasons": reasons}


def _section_reasons(section: dict[str, Any], model: DmoModel) -> list[str]:
    reasons = list(section.get("drift_reasons", []))
    problem = model.problem
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


def _gate_message(gate: dict[str, Any]) -> str:
    first = gate["reasons"][0]
    more = f" (and {len(gate['reasons']) - 1} more reason(s) in the report)" if len(gate["reasons"]) > 1 else ""
    return (
        f"gate failed: {first}{more}; move the threshold for the new rate (dmo threshold MODEL --adapt NEW), "
        "re-fit it on recent labeled rows, or retrain"
    )
