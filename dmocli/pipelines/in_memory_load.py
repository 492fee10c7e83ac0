"""What `dmo train`'s in-memory path reads before it fits: DATA (and --val) read, surveyed, preprocessed and split,
its training rows profiled on the way. Kept apart from the fit (in_memory.py) so each module has one job; the
profiling helpers here serve the paths that fit the preprocessing from a stream too (torchrun, streaming, Dask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np
import pyarrow as pa

from dmocli.data import reading, sources
from dmocli.errors import DmoError
from dmocli.operating_point.gain import GainMatrix
from dmocli.operating_point.problems import Problem
from dmocli.options import CV_AUTO, TrainOptions
from dmocli.pipelines.check import gain_values, solved_problem, survey, unlabeled_problem
from dmocli.pipelines.cv_auto import SPLIT_FRAC, CvRule, decide
from dmocli.pipelines.time_blocks import check_val_follows
from dmocli.prep.columns import ColumnPlan, case_variant_warning, plan_columns
from dmocli.prep.dataset import Prepared, prepare, stratified_split
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.prep.features import Preprocessor, case_variant_groups
from dmocli.prep.labels import LabelSpec, infer_label_spec, label_counts, stray_classes
from dmocli.prep.time_column import Times, read_times
from dmocli.prep.unlabeled import read_unlabeled_truth, view_columns
from dmocli.solvers.base import InMemorySolver

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup


GAIN_VALUES = "gain_values"  # Prepared.extra: --problem value's gain columns, (rows, columns) float64


def _add_gains(prepared: Prepared, table: pa.Table, opts: TrainOptions, *, where: str) -> None:
    """--problem value: the gain columns of `table`'s rows into `prepared.extra`, where each row's follow it through
    every split (--val-frac, --cv with --val pooled, --time-col blocks); nothing for another problem."""
    if opts.problem == "value":
        prepared.extra[GAIN_VALUES] = gain_values(table, GainMatrix.parse(opts.gain), prepared.y, where=where)


NOT_PARQUET = (
    "training under torchrun reads each process's rows from parquet row groups; convert DATA to parquet "
    "(a file or a directory of files)"
)


@dataclass
class Loaded:
    """Everything train reads before fitting: the label spec, the problem, the fitted preprocessing and the
    prepared splits (train: this process's rows under torchrun)."""

    labels: LabelSpec
    problem: Problem | None
    pre: Preprocessor
    train: Prepared
    val: Prepared | None
    n_unlabeled: int  # rows without a label (this process's share under torchrun)
    val_unlabeled: int  # rows of --val without a label: left out of its metrics, and warned about
    warnings: list[str]  # what the survey of DATA found worth saying (wide text columns, look-alike classes)
    profile: ProfileBuilder  # the training rows' features counted, every process's under torchrun (drift profile)
    cv_rule: CvRule | None = None  # what --cv auto decided, where its rule applies (a binary problem, one process)
    times: Times | None = None  # --time-col: the time of each training row (pipelines/time_blocks.py)
    val_times: Times | None = None  # and of each labeled row of --val


@dataclass
class _Read:
    """DATA as read, before its rows are prepared: the table (this process's rows under torchrun), its label
    column, the label spec, the problem, the fitted preprocessing, the survey's warnings and the profile so far."""

    table: pa.Table
    label_column: pa.ChunkedArray
    labels: LabelSpec
    problem: Problem | None
    pre: Preprocessor
    warnings: list[str]
    profile: ProfileBuilder


def _read(
    data: sources.Source,
    opts: TrainOptions,
    solver: InMemorySolver,
    group: ProcessGroup | None,
    *,
    table: pa.Table | None = None,
) -> _Read:
    """Read DATA and fit its preprocessing: in one process, the table whole (or `table`, DATA as read already),
    every problem of it refused in one message (pipelines/check.py); under torchrun, the preprocessing from one
    streaming pass over all of DATA, then only this process's range of rows."""
    if group is None:  # every problem of the table in one message (pipelines/check.py)
        table = reading.read_table(data) if table is None else table
        found = survey(table, opts, solver)
        found.refuse(sources.describe(data))
        table = found.table  # dates as parts and numbers parsed, as the preprocessing and the profile read them
        label_column = table.column(opts.label_col)
        labels, problem, pre, warnings = found.labels, found.problem, found.pre, found.warnings
        profile = ProfileBuilder.for_preprocessor(pre)
    elif sources.parquet_files(data) is None:
        raise DmoError(NOT_PARQUET)
    else:
        plan = plan_columns(reading.schema(data), opts.label_col, opts.drop, opts.embedding_col)
        label_column = reading.read_table(data, columns=[opts.label_col]).column(opts.label_col)
        counts = label_counts(label_column, opts.label_col)  # as the label spec counts them: no missing labels
        problem = solved_problem(opts, len(counts), solver)
        labels = infer_label_spec(
            label_column, opts.label_col, positive=opts.positive, binary=problem is not None, counts=counts
        )
        # Each process counts every process's training rows in the pass it reads anyway, so each holds the profile
        # the one-process path gives (--val-frac, which would take rows out of it, is refused under torchrun).
        profile = plan_profile_builder(plan, opts.fold_case)
        batches = profiled(reading.iter_batches(data), profile, labels, keep_unlabeled=solver.uses_unlabeled)
        pre = Preprocessor.fit(batches, plan, impute=opts.impute, fold_case=opts.fold_case)
        warnings = stray_classes(counts) + case_variant_warnings(pre)
    if group is not None:
        labeled = labels.encode(label_column) >= 0
        if labeled.sum() < 2 * group.world_size:
            raise DmoError(
                f"DATA has {int(labeled.sum())} labeled rows, too few for {group.world_size} processes "
                "(each needs 2); start fewer (--nproc-per-node)"
            )
        table = reading.read_rows(data, *group.row_range(labeled))
    return _Read(table, label_column, labels, problem, pre, warnings, profile)


def load(
    data: sources.Source,
    opts: TrainOptions,
    solver: InMemorySolver,
    group: ProcessGroup | None,
    *,
    table: pa.Table | None = None,
) -> Loaded:
    """Read and prepare DATA (and --val). Under torchrun (`group`) every process fits the global preprocessing
    from one streaming pass over all of DATA, then reads only its range of rows (ProcessGroup.row_range). No
    collective calls, so ProcessGroup.agree can run it. `table`: DATA already read in one process (`--model auto`
    prepares it once per candidate), while messages still name DATA as given."""
    read = _read(data, opts, solver, group, table=table)
    table, label_column, labels, problem, pre = read.table, read.label_column, read.labels, read.problem, read.pre
    warnings, profile = read.warnings, read.profile
    del read  # `table` is dropped below, once its features are prepared
    full = prepare(table, pre, labels)
    _add_gains(full, table, opts, where="DATA")
    if "offsets" in full.extra and not solver.uses_offsets:
        raise DmoError(
            f"DATA is a `dmo subsample` file (log_accept_* columns) and solver {solver.name} cannot use "
            "its offsets; train it with --solver lus or wce"
        )
    n_unlabeled = int((full.y < 0).sum())
    if group is None:  # under torchrun the caller checks the count of every process's rows
        check_unlabeled(n_unlabeled, opts, solver)
    used = np.arange(full.n) if solver.uses_unlabeled else np.flatnonzero(full.y >= 0)  # the rows training keeps
    times = _training_times(table, opts, problem, used)
    split = None  # --val-frac's (train, val) positions in those rows, drawn here: the profile needs the table
    auto = _auto_rule_applies(opts, solver, problem, group)
    rule = None  # what --cv auto decided on DATA's positives (on --val's below, with --val)
    if auto and opts.val is None:
        rule = decide(positives=int((full.y[used] == 1).sum()), problem=problem, confidence=opts.confidence)
    val_frac = SPLIT_FRAC if rule is not None and rule.decision == "split" else opts.val_frac
    if opts.val is None and val_frac > 0:
        split = stratified_split(full.y[used], val_frac, opts.seed, labels.classes)
    if group is None:  # under torchrun, the pass that fitted the preprocessing profiled every process's rows
        profile_rows(table, used if split is None else np.sort(used[split[0]]), profile)
    if solver.uses_unlabeled:
        if n_unlabeled == 0:
            raise DmoError(f"solver {solver.name} needs unlabeled rows (missing labels) and the data has none")
        full.extra.update(view_columns(table, pre))
        if opts.unlabeled_truth is not None:
            full.extra["unlabeled_truth"] = read_unlabeled_truth(
                opts.unlabeled_truth, labels, label_column.type, full.y
            )
    # The features are in `full` now: drop the arrow table (as large as the data) before any copy of them and
    # before training. A table passed in by a Python caller stays alive in the caller, so frees nothing.
    del table, label_column
    pa.default_memory_pool().release_unused()
    if not solver.uses_unlabeled:
        full = full.labeled()  # with --drop-unlabeled (checked by the caller); itself when every row is labeled

    val_unlabeled, val_times = 0, None
    if opts.val is not None:
        val_table = reading.read_table(opts.val, text_columns=pre.text_columns)  # a CSV's levels stay text
        val_all = _prepared_val(val_table, pre, labels, opts)
        val_unlabeled = int((val_all.y < 0).sum())
        _add_gains(val_all, pre.derived(val_table), opts, where=f"--val {opts.val}")
        if times is not None:  # --val is the later period the threshold is fitted on
            where, rows = f"--val {opts.val}", np.flatnonzero(val_all.y >= 0)
            val_times = read_times(val_table, times.column, rows, where=where, order=times.order)
            check_val_follows(times, val_times, opts.val)
        if auto:  # --cv auto counts --val's positives: the held-out rows are --val's
            positives = int((val_all.y == 1).sum())
            rule = decide(positives=positives, problem=problem, confidence=opts.confidence, held_out="val")
        pooled = isinstance(opts.cv, int) and opts.cv > 0 or (rule is not None and rule.decision == "folds")
        if pooled:  # --cv pools --val's labeled rows into the training rows (train_in_memory), after DATA's
            profile_rows(pre.derived(val_table), np.flatnonzero(val_all.y >= 0), profile)
        val_data: Prepared | None = val_all.labeled()
        del val_table, val_all
        train_data = full
    elif split is not None:
        train_data, val_data = full.take(split[0]), full.take(split[1])
    else:
        train_data, val_data = full, None
    del full  # with --val-frac, train and val are copies: the whole set must not stay alive beside them
    kept = (labels, problem, pre, train_data, val_data, n_unlabeled, val_unlabeled, warnings, profile, rule)
    return Loaded(*kept, times=times, val_times=val_times)


def _training_times(table: pa.Table, opts: TrainOptions, problem: Problem | None, used: np.ndarray) -> Times | None:
    """--time-col's time of each row training keeps (None without it); a multi-class label is refused here, once
    the labels tell (the threshold fitted out of time is a binary one)."""
    if opts.time_col is None:
        return None
    if problem is None:
        raise DmoError(
            f"--time-col {opts.time_col} fits a binary threshold and the label has more than two classes; give "
            "--positive CLASS (one class against the rest), or train without --time-col"
        )
    return read_times(table, opts.time_col, used, where="DATA")


PROFILE_ROWS = 65536  # rows of a table profiled at a time: a slice's copy, not the table's


def profile_rows(table: pa.Table, rows: np.ndarray, profile: ProfileBuilder) -> None:
    """Count the table's rows at the increasing positions `rows` into `profile`, a slice at a time, in table order:
    the order a streaming pass over the same rows counts them in (torchrun's), so both give the same bin edges."""
    chosen = np.zeros(table.num_rows, dtype=bool)
    chosen[rows] = True
    for start in range(0, table.num_rows, PROFILE_ROWS):
        profile.add(table.slice(start, PROFILE_ROWS).filter(pa.array(chosen[start : start + PROFILE_ROWS])))


def plan_profile_builder(plan: ColumnPlan, fold_case: bool) -> ProfileBuilder:
    """The builder `ProfileBuilder.for_preprocessor` gives for the preprocessing fitted on the same rows, for a pass
    that profiles them while it fits that preprocessing (torchrun, Dask): the plan's columns in its order, and
    no level counted unseen, since every level of those rows is one the preprocessing learns."""
    return ProfileBuilder(plan.numeric, plan.categorical, fold_case=fold_case)


def profiled(
    batches: Iterable[pa.RecordBatch], profile: ProfileBuilder, labels: LabelSpec, keep_unlabeled: bool
) -> Iterator[pa.RecordBatch]:
    """`batches` as they are, each one's training rows counted into `profile` on the way: its labeled rows, or all
    of them for a solver that learns from unlabeled rows too. No second pass over DATA for the profile."""
    for batch in batches:
        labeled = labels.encode(batch.column(labels.column)) >= 0
        profile.add(batch if keep_unlabeled or labeled.all() else batch.filter(pa.array(labeled)))
        yield batch


def case_variant_warnings(pre: Preprocessor) -> list[str]:
    """The warning `dmo check` and one-process training give per text column whose levels differ only in case
    (pipelines/check.py survey), for the paths that fit the preprocessing without that survey (torchrun, the
    streaming solvers, Dask): a user training there must hear of it, and of --fold-case, just the same. None
    under --fold-case, whose levels are folded already."""
    found = (case_variant_warning(name, case_variant_groups(levels)) for name, levels in pre.categorical.items())
    return [warning for warning in found if warning]


def check_unlabeled(n_unlabeled: int, opts: TrainOptions, solver: InMemorySolver) -> None:
    if n_unlabeled and not solver.uses_unlabeled and not opts.drop_unlabeled:
        raise DmoError(unlabeled_problem(n_unlabeled, solver.name))


def _auto_rule_applies(
    opts: TrainOptions, solver: InMemorySolver, problem: Problem | None, group: ProcessGroup | None
) -> bool:
    """Whether --cv auto's rule on the positives decides (pipelines/cv_auto.py): asked, for a binary problem, in
    one process, for a solver trained on labeled rows without ERO's own fold. Elsewhere auto is the default."""
    if opts.cv != CV_AUTO or problem is None or group is not None or solver.uses_unlabeled:
        return False
    return not (opts.folding or opts.params.get("folding"))


def _prepared_val(table: pa.Table, pre: Preprocessor, labels: LabelSpec, opts: TrainOptions) -> Prepared:
    """--val's rows encoded as DATA's; what is wrong with the file is said in one message that names it (there is
    no model yet, so "the model was trained on" would mislead)."""
    problems = []
    missing = pre.missing_columns(table.schema)
    if missing:
        problems.append(f"lacks DATA's column(s) {', '.join(missing)} (give it the columns DATA has)")
    problems += pre.kind_problems(table.schema)
    if opts.label_col not in table.schema.names:
        problems.append(f"no label column '{opts.label_col}'")
    if not problems:
        try:
            return prepare(table, pre, labels)
        except DmoError as exc:
            problems.append(str(exc))
    raise DmoError(f"--val {opts.val}: {'; '.join(problems)}")
