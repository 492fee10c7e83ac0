"""The `train` pipeline for streaming solvers (fofo, ofo, lr): data larger than memory, read in record batches.

Pass 1 (cheap: no model work) counts the labels, which fixes the positive
class and the exact number n of labeled rows, so FOFO's stage schedule uses
the true n for parquet and CSV alike, and fits the Preprocessor: categorical
levels and standardization statistics, the latter from evenly spaced parquet
row groups of about `--param stats-rows` rows (see _prepass), so that pass
reads little more than the label column. Then `--epochs` passes
feed (X, y) batches to the solver's fit_stream. Memory is O(features +
batch) throughout; the only O(rows) steps are the ones the user asks for:
`--val` (one logit and label per validation row, for exact AP/AUC) and
`--adjust` (exact threshold search needs every logit of its split).

The first learning pass also counts the training rows into the model file's
drift profile (prep/drift_counting.py), in the thread that reads the batches.

The model file and report match the in-memory pipeline's (in_memory.py),
plus an "online" section: progressive F, final threshold, rows/s, and the
curve of online F versus rows seen.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from dmocli import progress
from dmocli.data import reading, sources
from dmocli.data.prefetch import prefetched
from dmocli.data.stdin_csv import NAME, StdinCsv, open_stdin_csv
from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.models.decision import Decision
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.problems import Problem
from dmocli.options import TrainOptions
from dmocli.pipelines.check import survey_derivation
from dmocli.pipelines.conclude import FittedRun, conclude
from dmocli.pipelines.in_memory_load import case_variant_warnings, profiled
from dmocli.pipelines.online_report import plot_online_curve
from dmocli.prep.columns import refuse_problems, survey_columns
from dmocli.prep.derive import Derivation
from dmocli.prep.drift import drift_warnings
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.prep.features import LevelCounts, Preprocessor
from dmocli.prep.labels import LabelSpec, label_counts, label_spec_from_counts
from dmocli.prep.row_fingerprint import row_hashes, sketch
from dmocli.report import unlabeled_warning
from dmocli.solvers.base import FitContext, SolverParams, Stream, StreamingSolver

BATCH_ROWS = 65536


@contextlib.contextmanager
def serial_arrow_decoding(data: sources.Source) -> Iterator[None]:
    """For parquet, arrow decodes on one CPU thread while the streaming passes run (pool size restored after).

    The pipeline already keeps two threads busy (reader, learner); arrow's own column-parallel decoding
    only competes with the learner for the same cores and keeps more decode buffers in flight.
    Measured on 2M x 50 rows: the learning pass about 25 % faster, and peak memory lower and flatter
    over the stream length (1M vs 8M rows). CSV is left alone: its parsing is the heavy part and lost
    both time and memory on one thread (1M rows: 3.7 vs 3.3 s, 358 vs 217 MB).
    """
    if sources.is_stdin(data) or sources.parquet_files(data) is None:
        yield
        return
    previous = pa.cpu_count()
    pa.set_cpu_count(1)
    try:
        yield
    finally:
        pa.set_cpu_count(previous)


class LabelCounter:
    """Per-class label counts accumulated while another consumer reads the batches."""

    def __init__(self, column: str):
        self.column = column
        self.counts: dict[Any, int] = {}
        self.missing = 0
        self.rows = 0
        self.type: pa.DataType | None = None

    def tap(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            labels = batch.column(self.column)
            if pa.types.is_dictionary(labels.type):
                labels = labels.cast(labels.type.value_type)
            self.type = labels.type
            self.rows += batch.num_rows
            counts = label_counts(labels, self.column)
            self.missing += batch.num_rows - sum(counts.values())  # null, NaN and blank labels alike
            for key, count in counts.items():
                self.counts[key] = self.counts.get(key, 0) + count
            yield batch

    def spec(self, positive: str | None) -> LabelSpec:
        values = list(self.counts)
        return label_spec_from_counts(
            values,
            [self.counts[v] for v in values],
            label_type=self.type or pa.null(),
            column=self.column,
            positive=positive,
            binary=True,
        )


def _prepass(
    data: sources.Source,
    plan: Any,
    *,
    columns: list[str],
    counter: LabelCounter,
    impute: str,
    stats_rows: int,
    fold_case: bool,
    derive: Derivation,
) -> tuple[Preprocessor, list[str], dict[str, Any]]:
    """The Preprocessor (with the problems of the values it was fitted on) and the label counts, before learning.

    Labels are always counted over every row (the positive class and n
    depend on all of them). With stats_rows > 0, parquet data without
    string columns takes its standardization statistics from evenly spaced
    row groups of about stats_rows rows instead of reading every feature
    twice: the statistics only scale the features, the stored ones are the
    ones used at predict time, and a few hundred thousand rows fix a mean
    and a standard deviation to well under 1 % of the deviation. String
    columns need every level and CSV cannot be sampled: both get the full
    exact pass. `fold_case`: --fold-case, for the levels; `derive`: --dates and --parse-numbers, fitted already
    (Preprocessor.survey).
    """
    text = derive.text_sources
    features = [c for c in columns if c != counter.column]
    sample = None
    if stats_rows > 0 and not plan.categorical:
        sample = reading.sample_row_groups(data, features, stats_rows)
    with progress.task("first pass (classes, statistics)", total=lambda: reading.count_rows(data), unit="rows") as bar:
        if sample is None:
            batches = progress.advancing(
                reading.iter_batches(data, BATCH_ROWS, columns=columns, text_columns=text), bar
            )
            pre, problems = Preprocessor.survey(
                counter.tap(batches), plan, impute=impute, fold_case=fold_case, derive=derive
            )
            return pre, problems, {"statistics": "exact", "statistics_rows": counter.rows}
        for _ in counter.tap(progress.advancing(reading.iter_batches(data, BATCH_ROWS, columns=[counter.column]), bar)):
            pass
    batches, sampled = sample
    pre, problems = Preprocessor.survey(batches, plan, impute=impute, fold_case=fold_case, derive=derive)
    statistics = "exact" if sampled >= counter.rows else "row-group sample"
    return pre, problems, {"statistics": statistics, "statistics_rows": sampled}


def _derivation(
    data: sources.Source, schema: pa.Schema, opts: TrainOptions, stdin: bool
) -> tuple[Derivation, list[str]]:
    """--dates and --parse-numbers fitted in a pass over their candidate columns (read as text from a CSV: a column
    of ISO dates in the first rows may hold other formats further down); refused on standard input, which is read
    once."""
    if opts.dates == "refuse" and not opts.parse_numbers:
        return Derivation(), []
    if stdin:
        raise DmoError(
            f"--dates parts and --parse-numbers read their columns in a pass of their own; {NAME} can be read once: "
            "save the data to a file"
        )
    return survey_derivation(
        schema, lambda cols: reading.iter_batches(data, BATCH_ROWS, columns=cols, text_columns=cols), opts
    )


def open_stdin(opts: TrainOptions, epochs: int, adjust: bool, stats_rows: int) -> StdinCsv:
    """DATA `-`: refuse what needs a second look at the data, then sniff the CSV on standard input."""
    if epochs > 1:
        raise DmoError(f"--epochs {epochs} needs {epochs} passes; {NAME} can be read once: save the data to a file")
    if adjust and opts.val is None:
        raise DmoError(
            f"--adjust without --val searches the threshold on DATA, a second pass that {NAME} cannot "
            "give: add --val FILE or drop --adjust"
        )
    if stats_rows <= 0:
        raise DmoError(
            f"--param stats-rows=0 reads every row for the statistics before learning; {NAME} can be read "
            "once: keep a head of rows (the default 262144) or save the data to a file"
        )
    return open_stdin_csv(lambda name: name != opts.label_col)


def _head_of(batches: Iterator[pa.RecordBatch], rows: int) -> tuple[list[pa.RecordBatch], Iterator[pa.RecordBatch]]:
    """The first `rows` rows (kept in memory for the statistics), and the batches of the rest."""
    head: list[pa.RecordBatch] = []
    seen = 0
    while seen < rows:
        batch = next(batches, None)
        if batch is None:
            break
        if seen + batch.num_rows > rows:  # cut the batch: the rest of it leads the stream
            keep = rows - seen
            head.append(batch.slice(0, keep))
            return head, itertools.chain([batch.slice(keep)], batches)
        head.append(batch)
        seen += batch.num_rows
    if not head:
        raise DmoError(f"{NAME} has a header but no rows")
    return head, batches


def _drained(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches of a list, each dropped from it once handed out: the head of a pipe is not kept alive
    for the whole pass."""
    batches.reverse()
    while batches:
        yield batches.pop()


@dataclass
class _FirstPass:
    """What the pass before learning fixed: the fitted preprocessing, the label spec, the columns read, how the
    statistics were taken, and (standard input) the head kept in memory with the batches after it."""

    pre: Preprocessor
    labels: LabelSpec
    counter: LabelCounter
    columns: list[str]
    prepass: dict[str, Any]
    prepass_seconds: float
    stdin: StdinCsv | None
    head: list[pa.RecordBatch] = field(default_factory=list)
    rest: Iterator[pa.RecordBatch] | None = None

    @property
    def n(self) -> int | None:
        """Labeled rows per pass; None for a pipe, whose length is unknown (FOFO's doubling schedule)."""
        return None if self.stdin else self.counter.rows - self.counter.missing


def train_streaming(
    data: sources.Source,
    opts: TrainOptions,
    *,
    solver: StreamingSolver,
    params: SolverParams,
    output: Path | None,
    report_path: str | Path | None,
) -> tuple[DmoModel, dict[str, Any]]:
    """`dmo train --solver fofo|ofo|lr`: see the module docstring. dmocli/pipelines/train.py has checked the
    options, the solver's parameters and the output paths already."""
    started = time.perf_counter()
    epochs, problem = _stream_options(opts, solver)
    adjust = solver.adjust_by_default if opts.adjust is None else opts.adjust
    first = _first_pass(data, opts, solver=solver, params=params, epochs=epochs, adjust=adjust)
    pre, labels = first.pre, first.labels
    feed = _BatchFeed(data, opts, solver=solver, first=first)
    arch = Architecture("linear", pre.n_features, 1)
    ctx = FitContext(problem=problem, architecture=arch, device=None, seed=opts.seed, params=params)
    fit_started = time.perf_counter()
    with (
        progress.task(solver.name, total=first.n and first.n * epochs, unit="rows") as bar,
        serial_arrow_decoding(data),
    ):
        shown = None if bar is progress.OFF else lambda rows, f: bar.update(rows, online_F=f)  # nothing per batch
        result = solver.fit_stream(Stream(feed, first.n, pre.n_features, epochs, shown), ctx)
    fit_seconds = time.perf_counter() - fit_started
    rows = result.trace["rows"]
    online = {
        **result.online,
        "final_threshold": result.threshold,
        "rows_per_second": rows / fit_seconds if fit_seconds > 0 else None,
    }
    provisional = DmoModel(  # the fitted weights, to score the rows the threshold is searched on
        network=result.weights,
        architecture=arch,
        preprocessor=pre,
        labels=labels,
        solver=solver.name,
        decision=Decision(threshold=result.threshold, problem=problem),
    )
    held = _held_out_logits(provisional, data, opts, adjust=adjust)
    if opts.plot is not None:
        plot_online_curve(
            opts.plot, online, title=f"{solver.name} on {Path(sources.describe(data)).name}: {problem.describe()}"
        )
    run = FittedRun(
        solver=solver.name,
        params=params,
        problem=problem,
        labels=labels,
        preprocessor=pre,
        architecture=arch,
        network=result.weights,
        device="cpu",
        logits=held.logits,
        truth=held.truth,
        own_threshold=result.threshold,
        adjust=adjust,
        fit_seconds=fit_seconds,
        solver_trace=result.trace,
        levels=feed.levels,
        profile=feed.profile,
        warnings=held.warnings,
        report_fields={"streaming": True, "epochs": epochs, "adjusted": adjust, **held.val_fields},
        after_fields={"prepass": first.prepass, "prepass_seconds": first.prepass_seconds},
        info_fields={"rows": online["n"], "epochs": epochs},
        online=online,
        training_rows=feed.fingerprint,
    )
    return conclude(run, opts, data, output=output, report_path=report_path, started=started)


def _stream_options(opts: TrainOptions, solver: StreamingSolver) -> tuple[int, Problem]:
    """The passes and the problem, after refusing what a stream cannot do (a held-out fraction needs the rows in
    memory; the solvers are numpy, so CPU only): checked before any data is read."""
    if opts.val_frac:
        raise DmoError(f"--val-frac needs the data in memory; solver {solver.name} streams: give --val FILE instead")
    epochs = 1 if opts.epochs is None else opts.epochs
    if epochs < 1:
        raise DmoError(f"--epochs {epochs} must be at least 1")
    problem = Problem.from_options(opts.problem or "ofbs", opts.target, opts.beta, opts.confidence)
    if opts.device not in ("auto", "cpu"):
        raise DmoError(f"solver {solver.name} streams on the CPU (numpy); use --device auto or cpu")
    return epochs, problem


def _first_pass(
    data: sources.Source,
    opts: TrainOptions,
    *,
    solver: StreamingSolver,
    params: SolverParams,
    epochs: int,
    adjust: bool,
) -> _FirstPass:
    """Plan the columns, fit the preprocessing and count the labels before learning, and refuse every problem
    found on the way in one message: the learning passes then see only data they can use."""
    stdin = open_stdin(opts, epochs, adjust, params.stats_rows) if sources.is_stdin(data) else None
    schema = stdin.schema if stdin else reading.schema(data)
    derive, problems = _derivation(data, schema, opts, stdin is not None)
    plan, found = survey_columns(derive.schema(schema), opts.label_col, opts.drop, opts.embedding_col)
    problems += found
    if opts.label_col not in schema.names:  # no labels to count: the columns' problems are all there is to say
        refuse_problems(problems)
    features = plan.numeric + plan.categorical if plan.embedding is None else [plan.embedding]
    columns = derive.inputs(features) + [opts.label_col]
    counter = LabelCounter(opts.label_col)
    prepass_started = time.perf_counter()
    head: list[pa.RecordBatch] = []
    rest = None
    if stdin is not None:
        head, rest = _head_of(stdin.batches(columns), params.stats_rows)
        pre, found = Preprocessor.survey(counter.tap(iter(head)), plan, impute=opts.impute, fold_case=opts.fold_case)
        prepass = {"statistics": "head of standard input", "statistics_rows": counter.rows}
    else:
        with serial_arrow_decoding(data):
            pre, found, prepass = _prepass(
                data,
                plan,
                columns=columns,
                counter=counter,
                impute=opts.impute,
                stats_rows=params.stats_rows,
                fold_case=opts.fold_case,
                derive=derive,
            )
    problems += found
    # The pre-pass decoded every label batch; arrow's allocator keeps such freed pages for reuse, and the
    # learning pass's own peak would stack on them (the more batches, the more: 1M vs 8M rows differed by
    # 20 MB). Handing them back now keeps peak memory independent of the row count.
    pa.default_memory_pool().release_unused()
    prepass_seconds = time.perf_counter() - prepass_started
    labels = _label_spec(counter, opts, solver=solver, stdin=stdin is not None, problems=problems)
    refuse_problems(problems)
    return _FirstPass(pre, labels, counter, columns, prepass, prepass_seconds, stdin, head, rest)


def _label_spec(
    counter: LabelCounter, opts: TrainOptions, *, solver: StreamingSolver, stdin: bool, problems: list[str]
) -> LabelSpec:
    """The label spec of the counted classes; what is wrong with the labels is added to `problems` (refused with
    the columns' problems), so the returned spec is only used once they are known to be none."""
    labels = None
    try:
        labels = counter.spec(opts.positive)
    except DmoError as exc:
        problems.append(
            f"{exc} (the classes are fixed from the first {counter.rows} rows of {NAME}: shuffle the "
            "rows, or raise --param stats-rows)"
            if stdin
            else str(exc)
        )
    if counter.missing and not opts.drop_unlabeled:
        problems.append(
            f"{counter.missing} rows have no label; solver {solver.name} cannot use unlabeled rows "
            "(pass --drop-unlabeled to ignore them)"
        )
    return labels  # type: ignore[return-value]  # None only with a problem, refused by the caller


class _BatchFeed:
    """The solver's `Stream.batches`: a fresh pass of (X, y) per call. The first pass also counts what the model
    file keeps of the training rows (unseen levels, the drift profile, the rows' sketch), so no pass is spent on
    them alone."""

    def __init__(self, data: sources.Source, opts: TrainOptions, *, solver: StreamingSolver, first: _FirstPass):
        self.data, self.opts, self.solver, self.first = data, opts, solver, first
        self.levels = LevelCounts()  # unseen/missing categorical levels, counted on the first pass
        self.fingerprint = np.zeros(0, dtype=np.uint64)  # the training rows' sketch, merged batch by batch
        self.profile = ProfileBuilder.for_preprocessor(first.pre)  # the training rows' features, counted too
        self.passes_started = 0

    def __call__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # Only the read runs ahead in the prefetch thread: transforming there too made that thread the
        # bottleneck (read + transform > the learner's work); split this way the two threads balance.
        first, pre, opts = self.first, self.first.pre, self.opts
        self.passes_started += 1
        first_pass = self.passes_started == 1
        source = (
            itertools.chain(_drained(first.head), first.rest)
            if first.stdin
            else reading.iter_batches(self.data, BATCH_ROWS, columns=first.columns, text_columns=pre.text_columns)
        )
        source = map(pre.derived, source) if pre.derive else source  # the profile counts the derived columns
        if first_pass:  # counted in the reading thread, beside the learner (arrow's and numpy's counting free the GIL)
            source = profiled(source, self.profile, first.labels, keep_unlabeled=False)
        for batch in prefetched(source):
            X, batch_levels = pre.transform(batch)
            if first_pass:
                self.levels.add(batch_levels)
            X, y = self._labeled(X, first.labels.encode(batch.column(opts.label_col)))
            if first_pass:  # a bottom-k sketch of the sketches is the sketch of all the rows
                self.fingerprint = sketch(np.concatenate([self.fingerprint, row_hashes(X, y)]))
            yield X, y

    def _labeled(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The batch's labeled rows; an unlabeled one is refused unless --drop-unlabeled (a pipe's rows after its
        head were not counted, so any of them may lack a label)."""
        if not (self.first.counter.missing or self.first.stdin):
            return X, y
        keep = y >= 0
        if not self.opts.drop_unlabeled and not keep.all():
            raise DmoError(
                f"a row of {NAME} has no label; solver {self.solver.name} cannot use unlabeled rows "
                "(pass --drop-unlabeled to ignore them)"
            )
        return X[keep], y[keep]


@dataclass
class _HeldOut:
    """The logits and labels the threshold is searched on, with the validation split's report fields and the
    warnings of the whole run."""

    logits: dict[str, np.ndarray]
    truth: dict[str, np.ndarray]
    val_fields: dict[str, Any]
    warnings: list[str]


def _held_out_logits(provisional: DmoModel, data: sources.Source, opts: TrainOptions, *, adjust: bool) -> _HeldOut:
    """One logit and label a row of --val, or of DATA when --adjust searches the threshold on the training rows:
    the only O(rows) step, taken only when asked for."""
    pre = provisional.preprocessor
    held = _HeldOut({}, {}, {}, pre.derive_warnings() + case_variant_warnings(pre))
    if opts.val is not None or adjust:
        from dmocli.scoring.accumulators import labeled_scores  # torch: only when logits are asked for
    if opts.val is not None:  # one logit + label a row
        held.logits["val"], held.truth["val"], val_levels, val_unlabeled, _ = labeled_scores(provisional, opts.val)
        held.val_fields = {**val_levels.report("val_"), "val_unlabeled_rows": val_unlabeled}
        held.warnings += drift_warnings(val_levels, held.truth["val"].size + val_unlabeled, pre.impute)
        held.warnings += unlabeled_warning(val_unlabeled, opts.val)
    if adjust and opts.val is None:  # the threshold is searched on the training rows: their logits, one pass
        held.logits["train"], held.truth["train"], *_ = labeled_scores(provisional, data)  # unlabeled: refused above
    return held
