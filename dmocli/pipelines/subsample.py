"""`dmo subsample`: LUS, uniform and case-control subsampling in two streamed passes.

Pass 1 counts the classes and draws the uniform pilot sample (capped at
--pilot-max-rows, so memory does not grow with the data); the pilot model is
fitted on it. Pass 2 computes a(x, k) for every class of every row, draws
acceptance with the label's a(x, y), and writes the accepted rows with one
float32 column `log_accept_<class>` per class: training adds those to the
class logits (docs/algorithms.md#lus). Pilot rows are not drawn again in pass
2; with LUS they are written as they are, with log_accept 0 for every class
(unless keep_pilot is off): a uniform draw needs no correction, so the fit uses
every row the pilot already paid for and stays consistent for a well-specified model.

Randomness is drawn per batch (local engine) or per partition (Dask engine)
from (seed, part number), so a run is reproducible for a seed and the pilot
rows of pass 1 are recognized again in pass 2 without storing their ids.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import torch

from dmocli.command_options import SubsampleOptions
from dmocli.data import outputs, reading, sinks
from dmocli.data.prefetch import prefetched
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.models.networks import Architecture, build_network, logits_of
from dmocli.options import option_errors, refuse
from dmocli.prep.columns import OFFSET_PREFIX, ColumnPlan, plan_columns
from dmocli.prep.dataset import offset_column, prepare
from dmocli.prep.features import Preprocessor
from dmocli.prep.labels import LabelSpec, check_label_type, label_counts, label_spec_from_counts
from dmocli.report import envelope, write_report
from dmocli.solvers.subsampling.acceptance import acceptance, case_control_rates, check_pilot_classes, row_generator
from dmocli.solvers.subsampling.lus import LogisticParams, fit_offset_logistic, softmax_proba

METADATA_KEY = b"dmocli.subsample"
COUNT_KEYS = ("rows", "unlabeled", "pilot_rows", "pilot_written", "eligible", "kept", "expected", "pilot_correct")


@dataclass
class Pilot:
    """The pilot p~(k|x): preprocessing plus network weights as arrays, picklable for Dask workers."""

    preprocessor: Preprocessor
    architecture: Architecture
    state: dict[str, np.ndarray]

    def proba(self, batch: pa.RecordBatch | pa.Table) -> np.ndarray:
        network = getattr(self, "_network", None)
        if network is None:
            network = build_network(self.architecture)
            network.load_state_dict({k: torch.from_numpy(v) for k, v in self.state.items()})
            self._network = network.eval()
        X, _ = self.preprocessor.transform(batch)
        return softmax_proba(logits_of(network, torch.from_numpy(X)))

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_network"}


@dataclass
class Sampler:
    """What one batch or partition needs to draw acceptance; small and picklable (shipped to Dask workers)."""

    method: str
    labels: LabelSpec
    seed: int
    gamma: float = 1.0
    pilot: Pilot | None = None
    pilot_rate: float = 0.0  # rows drawn for the pilot in pass 1; not drawn again here
    rates: np.ndarray | None = None  # per-class acceptance of the baselines
    keep_pilot: bool = False  # write the labeled pilot rows too, with acceptance 1 for every class

    def process(self, batch: pa.RecordBatch | pa.Table, part: int) -> tuple[pa.Table, dict[str, Any]]:
        """Written rows of one batch (all input columns + log_accept_<class>) and the batch's counts.

        Written = accepted, plus the labeled pilot rows with keep_pilot (log a = 0 for every class).
        """
        n = batch.num_rows
        in_pilot, rng = pilot_mask(self.seed, part, n, self.pilot_rate)
        draws = rng.random(n)
        y = self.labels.encode(batch.column(self.labels.column))
        eligible = (y >= 0) & ~in_pilot
        pilot_written = in_pilot & (y >= 0) & self.keep_pilot
        K = len(self.labels.classes)
        counts = {
            "rows": n,
            "unlabeled": int((y < 0).sum()),
            "pilot_rows": int(in_pilot.sum()),
            "pilot_written": int(pilot_written.sum()),
            "eligible": int(eligible.sum()),
            "pilot_correct": 0,
        }
        if self.method == "lus":
            proba = self.pilot.proba(batch)
            a = acceptance(proba, self.gamma)
            counts["pilot_correct"] = int((proba.argmax(axis=1) == y)[eligible].sum())
        else:
            a = np.broadcast_to(self.rates, (n, K))
        a_y = np.where(eligible, a[np.arange(n), np.maximum(y, 0)], 0.0)
        keep = draws < a_y
        counts["kept"] = int(keep.sum())
        counts["expected"] = float(a_y.sum())
        counts["kept_per_class"] = np.bincount(y[keep], minlength=K).tolist()
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        written = keep | pilot_written
        table = table.filter(pa.array(written))
        log_a = np.where(pilot_written[written, None], 0.0, np.log(a[written])).astype(np.float32)
        for k, cls in enumerate(self.labels.classes):
            table = table.append_column(pa.field(offset_column(cls), pa.float32()), pa.array(log_a[:, k]))
        return table, counts


def pilot_mask(seed: int, part: int, n: int, rate: float) -> tuple[np.ndarray, np.random.Generator]:
    """Which rows of a batch/partition belong to the pilot; the generator continues with the acceptance draws."""
    rng = row_generator(seed, part)
    return rng.random(n) < rate, rng


def merge_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {key: 0 for key in COUNT_KEYS}
    per_class: np.ndarray | None = None
    for part in parts:
        for key in COUNT_KEYS:
            total[key] += part[key]
        kept = np.asarray(part["kept_per_class"])
        per_class = kept if per_class is None else per_class + kept
    total["kept_per_class"] = [] if per_class is None else per_class.tolist()
    return total


def label_spec(counts: dict[Any, int], column: str) -> LabelSpec:
    """Multi-class LabelSpec from whole-data counts, classes ordered as `dmo train` orders them."""
    if len(counts) < 2:
        raise DmoError(f"label column '{column}' has {len(counts)} class(es); subsampling needs at least two")
    return label_spec_from_counts(
        list(counts), list(counts.values()), label_type=pa.null(), column=column, positive=None, binary=False
    )


def fit_pilot(table: pa.Table, plan: ColumnPlan, labels: LabelSpec, opts: SubsampleOptions) -> Pilot:
    """Preprocessing and a K-class logistic (or MLP) pilot fitted on the uniform pilot rows."""
    if table.num_rows < 2:
        raise DmoError(f"the pilot sample has {table.num_rows} rows; raise --pilot-frac or use more data")
    pre = Preprocessor.fit(table.to_batches(), plan, impute=opts.impute)
    data = prepare(table, pre, labels)
    labeled = data.labeled()
    fix = (
        "drop --match-size"
        if opts.match_size
        else "raise --pilot-frac (or --pilot-max-rows) until every class is in it, or use --method case-control"
    )
    check_pilot_classes(labeled.y, labels.classes, fix)
    arch = Architecture(opts.pilot_model, pre.n_features, len(labels.classes))
    network, _ = fit_offset_logistic(
        torch.from_numpy(labeled.X),
        torch.from_numpy(labeled.y),
        None,
        arch=arch,
        seed=opts.seed,
        params=LogisticParams(),
    )
    state = {k: v.detach().cpu().numpy().copy() for k, v in network.state_dict().items()}
    return Pilot(pre, arch, state)


class LocalEngine:
    """Record batches of one process, in file order: memory O(batch)."""

    name = "local"

    def __init__(self, data: str | Path, batch_rows: int):
        self.data = data
        self.batch_rows = batch_rows

    def map(self, fn: Callable[[pa.RecordBatch, int], Any], columns: list[str] | None) -> list[Any]:
        batches = reading.iter_batches(self.data, self.batch_rows, columns=columns, low_memory=True)
        return [fn(batch, part) for part, batch in enumerate(batches)]

    def write(
        self, sampler: Sampler, output: Path, schema: pa.Schema, check: Callable[[list[dict[str, Any]]], None]
    ) -> list[dict[str, Any]]:
        parts = []
        with sinks.ParquetSink(output, schema) as sink:
            for part, batch in enumerate(prefetched(reading.iter_batches(self.data, self.batch_rows, low_memory=True))):
                table, counts = sampler.process(batch, part)
                if table.num_rows:
                    sink.write(table.cast(schema))
                parts.append(counts)
            check(parts)  # inside the sink: the refused output is never renamed into place
        return parts


def refuse_empty(parts: list[dict[str, Any]]) -> None:
    """A subsample with no rows is no use to `train` (which refuses it): say so now, write nothing."""
    if not sum(counts["kept"] for counts in parts):  # the pilot's rows alone: a uniform sample, not what was asked
        raise DmoError(
            "the subsample keeps no rows (the pilot is sure of every row, or --gamma is large for the "
            "data); lower --gamma"
        )


def _check(opts: SubsampleOptions) -> None:
    """Every declared constraint (dmocli/command_options.py) in one message, then what needs two options."""
    refuse(option_errors(opts))
    if opts.gamma is None:
        raise DmoError("--gamma G is required (>= 1: keep about 1/G of the rows at most)")
    if opts.match_size and opts.method == "lus":
        raise DmoError("--match-size sizes uniform/case-control like LUS; it does not apply to --method lus")


def subsample(
    data: str | Path, output: str | Path, opts: SubsampleOptions, report_path: str | Path | None = None
) -> dict[str, Any]:
    """Write the subsample of `data` to `output` (a file; a directory of parts with --engine dask); return the
    report."""
    started = time.perf_counter()
    _check(opts)
    choice = EngineChoice(opts.engine, opts.scheduler, opts.workers)
    choice.check(data)
    output = Path(output)
    outputs.refuse_csv_output(output, "the subsample")
    if choice.is_dask:  # a directory of parts; a re-run replaces its own
        outputs.check_parts_output(output, {"DATA": data})
    else:
        outputs.refuse_foreign_suffix(output, "the subsample", csv=False)
        outputs.check_outputs({"-o": output}, {"DATA": data})
    outputs.check_outputs({"--report": report_path}, {"DATA": data, "-o": output})
    schema = reading.schema(data)
    taken = [name for name in schema.names if name.startswith(OFFSET_PREFIX)]
    if taken:
        raise DmoError(f"{data} already has subsample columns ({', '.join(taken[:3])}); subsample the original data")
    plan = plan_columns(schema, opts.label_col, opts.drop, opts.embedding_col)
    check_label_type(schema.field(opts.label_col).type, opts.label_col)
    needs_pilot = opts.method == "lus" or opts.match_size
    n_rows = reading.count_rows(data)
    if n_rows is None:  # CSV: count every column, so a type that only later rows reveal (a decimal in an integer
        # column) is known before the pilot and the output schema are fixed, and stays one type in both passes
        n_rows = sum(batch.num_rows for batch in reading.iter_batches(data, opts.batch_rows))
        schema = reading.schema(data)
    pilot_rate = min(opts.pilot_frac, opts.pilot_max_rows / max(n_rows, 1)) if needs_pilot else 0.0
    with choice.dask(data) if choice.is_dask else contextlib.nullcontext(LocalEngine(data, opts.batch_rows)) as engine:
        return _run(
            data,
            output,
            opts=opts,
            report_path=report_path,
            engine=engine,
            schema=schema,
            plan=plan,
            pilot_rate=pilot_rate,
            started=started,
        )


def _run(
    data,
    output: Path,
    *,
    opts: SubsampleOptions,
    report_path,
    engine,
    schema: pa.Schema,
    plan: ColumnPlan,
    pilot_rate: float,
    started: float,
) -> dict[str, Any]:
    columns = [opts.label_col] + (plan.numeric + plan.categorical + ([plan.embedding] if plan.embedding else []))
    seed = opts.seed

    def first_pass(batch: pa.RecordBatch, part: int) -> tuple[dict[Any, int], pa.Table | None]:
        rows = None
        if pilot_rate > 0:
            table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
            rows = table.filter(pa.array(pilot_mask(seed, part, batch.num_rows, pilot_rate)[0]))
        return label_counts(batch.column(opts.label_col), opts.label_col), rows

    t0 = time.perf_counter()
    labels, pilot = _labels_and_pilot(engine.map(first_pass, columns), plan, opts, pilot_rate > 0)
    pilot_seconds = time.perf_counter() - t0

    sampler, info = _sampler(labels, pilot, opts=opts, engine=engine, columns=columns, pilot_rate=pilot_rate)

    out_schema = _output_schema(schema, labels, opts)
    t1 = time.perf_counter()
    totals = merge_counts(engine.write(sampler, output, schema=out_schema, check=refuse_empty))
    pass_seconds = time.perf_counter() - t1
    n = totals["rows"]
    report = envelope(
        "subsample",
        data=str(data),
        output=str(output),
        method=opts.method,
        gamma=opts.gamma,
        match_size=opts.match_size,
        seed=opts.seed,
        engine=engine.name,
        label_col=opts.label_col,
        classes=labels.classes,
        class_counts=labels.counts,
        offset_columns=[offset_column(c) for c in labels.classes],
        rows_read=n,
        rows_unlabeled=totals["unlabeled"],
        pilot_rows=totals["pilot_rows"],
        rows_kept=totals["kept"],
        kept_per_class=totals["kept_per_class"],
        pilot_rows_written=totals["pilot_written"],
        rows_written=totals["kept"] + totals["pilot_written"],
        expected_fraction=totals["expected"] / max(n, 1),
        realized_fraction=totals["kept"] / max(n, 1),
        fraction_used=(totals["kept"] + totals["pilot_rows"]) / max(n, 1),
        pilot_model=opts.pilot_model if pilot is not None else None,
        pilot_accuracy=(totals["pilot_correct"] / max(totals["eligible"], 1)) if opts.method == "lus" else None,
        pilot_seconds=pilot_seconds,
        pass_seconds=pass_seconds,
        rows_per_second=n / max(pass_seconds, 1e-9),
        **info,
        wall_seconds=time.perf_counter() - started,
    )
    if report_path is not None:
        write_report(report_path, report)
    return report


def _sampler(
    labels: LabelSpec,
    pilot: Pilot | None,
    *,
    opts: SubsampleOptions,
    engine: Any,
    columns: list[str],
    pilot_rate: float,
) -> tuple[Sampler, dict[str, Any]]:
    """The sampler of --method, and what the report says of its rates: LUS's own, or uniform / case-control at
    1/gamma of the labeled rows (or, with --match-size, at LUS's expected budget, its pilot included: a pass of
    its own)."""
    lus = Sampler("lus", labels, opts.seed, opts.gamma, pilot, pilot_rate, keep_pilot=opts.keep_pilot)
    info: dict[str, Any] = {}
    if opts.method == "lus":
        sampler = lus
    else:
        n_labeled = sum(labels.counts)
        target = n_labeled / opts.gamma
        if opts.match_size:  # LUS's budget: its expected kept rows plus the pilot it paid for
            lus_counts = merge_counts(engine.map(lambda b, part: lus.process(b, part)[1], columns))
            target = lus_counts["expected"] + lus_counts["pilot_rows"]
            info["matched_lus"] = {"expected_kept": lus_counts["expected"], "pilot_rows": lus_counts["pilot_rows"]}
        counts = np.asarray(labels.counts, dtype=np.float64)
        rates = (
            np.full(counts.size, min(1.0, target / n_labeled))
            if opts.method == "uniform"
            else case_control_rates(counts, target)
        )
        sampler = Sampler(opts.method, labels, opts.seed, opts.gamma, rates=rates)
        info["rates"] = dict(zip(map(str, labels.classes), rates.tolist()))
    return sampler, info


def _labels_and_pilot(
    scanned: list[tuple[dict[Any, int], pa.Table | None]], plan: ColumnPlan, opts: SubsampleOptions, with_pilot: bool
) -> tuple[LabelSpec, Pilot | None]:
    """Class counts and the fitted pilot from pass 1's per-part results; the pilot rows are freed on return,
    so pass 2 runs in O(batch) memory next to the small pilot model."""
    class_counts: dict[Any, int] = {}
    for counts, _ in scanned:
        for cls, c in counts.items():
            class_counts[cls] = class_counts.get(cls, 0) + c
    labels = label_spec(class_counts, opts.label_col)
    if not with_pilot:
        return labels, None
    parts = [rows for _, rows in scanned if rows is not None and rows.num_rows]
    if not parts:
        raise DmoError(
            f"the pilot sample is empty (--pilot-frac {opts.pilot_frac:g} of {sum(labels.counts)} labeled "
            "rows); raise --pilot-frac"
        )
    pilot_table = pa.concat_tables(parts)  # one schema: both engines read through dmocli.data.parquet_layout
    scanned.clear()
    return labels, fit_pilot(pilot_table, plan, labels, opts)


def _output_schema(schema: pa.Schema, labels: LabelSpec, opts: SubsampleOptions) -> pa.Schema:
    """Input columns plus one float32 log acceptance column per class; provenance in the schema metadata."""
    fields = list(schema) + [pa.field(offset_column(c), pa.float32()) for c in labels.classes]
    meta = {
        "method": opts.method,
        "gamma": opts.gamma,
        "seed": opts.seed,
        "label_col": labels.column,
        "pilot_rows_included": opts.method == "lus" and opts.keep_pilot,
        "classes": labels.classes,
        "offset_prefix": OFFSET_PREFIX,
    }
    return pa.schema(fields, metadata={**(schema.metadata or {}), METADATA_KEY: json.dumps(meta).encode()})
