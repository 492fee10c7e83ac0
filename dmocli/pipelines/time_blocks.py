"""`dmo train --time-col COL`: the threshold fitted on out-of-time scores, for rows that are a sequence in time.

Shuffled cross-fitting holds out rows of the same period the folds train on: on rows that drift, the threshold and
its certificate are about a past that will not come back. Forward chaining holds out the future instead. DATA's
labeled rows are sorted by COL (a stable sort: rows of one time keep their file order) and cut into K consecutive
blocks of about n/K rows each, every cut moved to the nearest change of time so that no time is split between two
blocks. Block b (b = 2..K) is scored by a model trained on blocks 1..b-1 alone, so no score comes from a model that
saw a row at or after its block; the threshold search and the `--confidence` certificate run on the pooled scores
of blocks 2..K, and the held-out curve the model file keeps (split "cv") is theirs, so `dmo threshold` re-targets
on them. The model saved is one trained on every row, the newest included (a block model's ensemble would leave
out the latest period from all but one member), at the out-of-time threshold as it is (`--cv-transfer apply`;
`rank` carries it by the share of rows it flags). With `--val FILE` there are no blocks: the model is trained on
DATA and the threshold fitted on VAL, whose period must follow DATA's. docs/training.md#time-col has the choices.

COL is read as `--dates` reads a date column (typed dates and timestamps, text in the forms of prep/dates.py, the
order of day and month decided for the whole column) or, a number column, as numbers in its own units (epoch
seconds, a period index). It is never a feature. A row whose time is missing or does not read is refused, counted
and named: its place in the sequence is unknown.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pyarrow as pa

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.options import CV_AUTO, TrainOptions
from dmocli.pipelines.cross_fit import CrossFitted
from dmocli.prep import dates
from dmocli.prep.columns import is_date, is_string
from dmocli.prep.dataset import Prepared
from dmocli.prep.labels import LabelSpec
from dmocli.prep.time_column import Times, read_times
from dmocli.solvers.base import FitContext, InMemorySolver, SplitData

if TYPE_CHECKING:
    import torch

    from dmocli.solvers.base import Solver

DEFAULT_BLOCKS = 5  # --time-col without --cv K: as many blocks as shuffled --cv has folds


def cut_blocks(times: Times, y: np.ndarray, k: int) -> np.ndarray:
    """Each row's block, 0..k-1, in time order: the rows sorted by time (stable) and cut into k runs of about
    n/k rows, each cut moved to the nearest change of time (the earlier one on a tie), so that no time is in two
    blocks. Refused where there are too few distinct times, where the first block cannot train a model (one class
    only), or where the later blocks hold no positive row to fit the threshold on."""
    n = times.values.size
    order = np.argsort(times.values, kind="stable")
    ordered = times.values[order]
    changes = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1  # where a new time starts
    cuts = []
    for i in range(1, k):
        nominal = i * n / k
        if changes.size:
            cuts.append(int(changes[np.argmin(np.abs(changes - nominal))]))
    if len(set(cuts)) < k - 1:
        raise DmoError(
            f"--time-col {times.column}: DATA's labeled rows hold {changes.size + 1} distinct time(s), too few to "
            f"cut into {k} blocks of about {n // k:,} rows; give a smaller --cv K (K >= 2) or --val FILE of a later "
            "period"
        )
    blocks = np.empty(n, dtype=np.int64)
    blocks[order] = np.searchsorted(np.array(cuts), np.arange(n), side="right")
    first = y[blocks == 0]
    span = _span_text(times.take(np.flatnonzero(blocks == 0)))
    if not ((first == 1).any() and (first == 0).any()):
        missing = "positive" if not (first == 1).any() else "negative"
        raise DmoError(
            f"--time-col {times.column}: the first of {k} blocks ({span}) holds no {missing} row, so no model can be "
            "trained on it to score the next; give a smaller --cv K (longer blocks)"
        )
    if not (y[blocks > 0] == 1).any():
        raise DmoError(
            f"--time-col {times.column}: no positive row after the first block ({span}), so there is nothing to fit "
            "the threshold on; give a larger --cv K or more recent labeled rows"
        )
    return blocks


def forward_chain(
    solver: InMemorySolver,
    data: Prepared,
    blocks: np.ndarray,
    *,
    ctx: FitContext,
    to_tensors: Callable[[Prepared], SplitData],
    device: torch.device,
) -> CrossFitted:
    """Blocks 2..K each scored by a model trained on the blocks before it (rows in file order), fitted as the final
    model is (no validation split). The result holds the scored rows alone, in file order, each with its block
    (0-based: 1..K-1) as its fold, so the report's `cv` section lists each later block's own operating point."""
    import torch

    from dmocli.models.networks import logits_of

    started = time.perf_counter()
    k = int(blocks.max()) + 1
    held = blocks > 0
    place = np.cumsum(held) - 1  # a scored row's position among the scored rows
    logits = np.empty(int(held.sum()), dtype=np.float32)
    traces: list[dict[str, Any]] = []
    with progress.task("forward chaining", total=k - 1, unit="blocks") as bar:
        for block in range(1, k):
            result = solver.fit(to_tensors(data.take(np.flatnonzero(blocks < block))), None, ctx)
            rows = np.flatnonzero(blocks == block)
            scores = logits_of(result.network.eval(), torch.as_tensor(data.X[rows], device=device))
            logits[place[rows]] = scores.float().cpu().numpy()
            traces.append(result.trace)
            del result
            bar.advance(1)
    seconds = time.perf_counter() - started
    return CrossFitted(logits, data.y[held], blocks[held], seconds, traces, [], ctx.architecture.kind)


def _span_text(times: Times) -> str:
    first, last = times.span()
    return f"{times.text(first)} to {times.text(last)}"


def _period(times: Times, y: np.ndarray) -> dict[str, Any]:
    first, last = times.span()
    return {"first": times.text(first), "last": times.text(last), "rows": int(y.size), "positives": int((y == 1).sum())}


def blocks_report(times: Times, y: np.ndarray, blocks: np.ndarray) -> dict[str, Any]:
    """The report's `time_blocks` for forward chaining: each block's period, rows and positives, and the held-out
    period (blocks 2..K pooled), whose scores the threshold was fitted on."""
    listed = []
    for block in range(int(blocks.max()) + 1):
        rows = np.flatnonzero(blocks == block)
        listed.append({"block": block + 1, **_period(times.take(rows), y[rows]), "held_out": block > 0})
    held = np.flatnonzero(blocks > 0)
    return {
        "time_col": times.column,
        "kind": times.kind,
        "held_out_by": "later blocks",
        "blocks": listed,
        "held_out": _period(times.take(held), y[held]),
        "final_model": "all rows",
    }


def val_report(times: Times, y: np.ndarray, val_times: Times, val_y: np.ndarray) -> dict[str, Any]:
    """The report's `time_blocks` with --val: DATA as the one training block, --val as the held-out period."""
    return {
        "time_col": times.column,
        "kind": times.kind,
        "held_out_by": "val",
        "blocks": [{"block": 1, **_period(times, y), "held_out": False}],
        "held_out": _period(val_times, val_y),
        "final_model": "all rows",
    }


def check_val_follows(times: Times, val_times: Times, val: Any) -> None:
    """--val must be a later period than DATA: a VAL whose first time is at or before DATA's last is refused,
    both periods named (its threshold would be fitted on rows no later than those the model learned from)."""
    if val_times.values.size == 0 or times.values.size == 0:
        return
    if val_times.values.min() > times.values.max():
        return
    raise DmoError(
        f"--time-col {times.column}: --val {val} covers {_span_text(val_times)}, which does not follow DATA's "
        f"{_span_text(times)} (its first time must be after DATA's last); give a --val of a later period, or train "
        f"on the rows before {val_times.text(val_times.values.min())}"
    )


def block_count(opts: TrainOptions) -> int:
    """K: --cv K, or DEFAULT_BLOCKS; 0 with --val (the threshold is fitted on VAL, no blocks)."""
    if opts.val is not None:
        return 0
    return opts.cv if isinstance(opts.cv, int) else DEFAULT_BLOCKS


def time_col_problems(opts: TrainOptions, solver: Solver, *, distributed: bool) -> list[str]:
    """What --time-col cannot be combined with, refused with the fix before any data is read (exit 2): the paths
    that fit no model per block (streaming solvers, --engine dask, torchrun, --model auto, a solver that learns
    from unlabeled rows or holds out its own fold), multi-class, and the options that hold out shuffled rows or
    none."""
    if opts.time_col is None:
        return []
    col = f"--time-col {opts.time_col}"
    problems = []
    if opts.time_col == opts.label_col:
        problems.append(f"{col} names the label column; name the column that holds each row's time")
    if solver.streaming:
        problems.append(f"{col} refits a model per block; solver {solver.name} streams once: give --solver wce")
    if opts.engine == "dask" or distributed:
        problems.append(f"{col} fits the blocks in one process; drop --engine dask and run it without torchrun")
    if opts.model == "auto":
        problems.append(f"{col} trains one model kind; give --model linear, mlp or gbdt")
    if solver.uses_unlabeled or opts.folding or opts.params.get("folding"):
        problems.append(f"{col} fits the threshold on labeled later blocks; give --solver wce (or ero without folding)")
    if opts.problem == "multiclass":
        problems.append(f"{col} fits a binary threshold; give --problem fpor, frop or ofbs")
    problems += _split_problems(opts, col)
    return problems


def _split_problems(opts: TrainOptions, col: str) -> list[str]:
    """--cv, --val-frac, --val and --no-adjust as forward chaining reads them: K blocks or --val, never both."""
    problems = []
    if opts.val_frac:
        problems.append(f"{col} holds out later rows; --val-frac draws a shuffled split: drop it (or give --val FILE)")
    if opts.cv == CV_AUTO:
        problems.append(
            f"{col} cuts K blocks in time: give --cv K, or leave --cv out for {DEFAULT_BLOCKS} (--cv auto chooses "
            "between shuffled folds and a shuffled split)"
        )
    elif opts.cv == 0 and opts.val is None:
        problems.append(f"{col} with --cv 0 fits no out-of-time threshold; give --cv K (K >= 2) or --val FILE")
    elif isinstance(opts.cv, int) and opts.cv > 0 and opts.val is not None:
        problems.append(f"{col} fits the threshold on --val, never pooled into blocks: drop --cv {opts.cv}")
    if opts.adjust is False:
        problems.append(f"{col} fits the threshold on out-of-time scores; --no-adjust keeps the solver's own: drop one")
    return problems


def date_columns(table: pa.Table, exclude: set[str]) -> list[str]:
    """The columns that read as times (typed dates and timestamps, text of which most reads as dates), in order:
    what `dmo check` names when shuffled cross-fitting would be used on rows that may be a sequence in time."""
    found = []
    for spec in table.schema:
        if spec.name in exclude:
            continue
        kind = spec.type.value_type if pa.types.is_dictionary(spec.type) else spec.type
        if is_date(kind) and not pa.types.is_time(kind):
            found.append(spec.name)
        elif is_string(kind):
            column = table.column(spec.name).combine_chunks()
            text = dates.read_text(column.cast(kind) if pa.types.is_dictionary(column.type) else column)
            present = int(text.present.sum())
            if present and (text.form[text.present] != "").sum() >= 0.9 * present:
                found.append(spec.name)
    return found


def shuffled_time_warning(table: pa.Table, opts: TrainOptions) -> list[str]:
    """`dmo check`'s warning when a column reads as time and the threshold would be fitted on shuffled rows (folds,
    --val-frac, --val pooled into folds): one warning, naming the first such column."""
    if opts.time_col is not None or (opts.val is not None and not (isinstance(opts.cv, int) and opts.cv > 0)):
        return []
    if opts.cv == 0 and not opts.val_frac:
        return []
    found = date_columns(table, {opts.label_col, *opts.drop})
    if not found:
        return []
    name = found[0]
    return [f"{name} looks like time; --time-col {name} fits the threshold on later rows"]


def summary_lines(report: dict[str, Any]) -> list[str]:
    """`dmo train`'s lines on forward chaining: each block's period, rows and positives, and the held-out period."""
    section = report.get("time_blocks")
    if section is None:
        return []
    lines = [f"time ({section['time_col']}): the threshold is fitted on out-of-time scores ({section['held_out_by']})"]
    for block in section["blocks"]:
        role = "scored by a model of the blocks before" if block["held_out"] else "training only"
        lines.append(
            f"  block {block['block']}: {block['first']} to {block['last']}, {block['rows']:,} rows, "
            f"{block['positives']:,} positives ({role})"
        )
    held = section["held_out"]
    lines.append(
        f"  held out: {held['first']} to {held['last']}, {held['rows']:,} rows, {held['positives']:,} positives; "
        "the model saved is trained on every row of DATA"
    )
    return lines


def time_problems(table: pa.Table, opts: TrainOptions, labels: LabelSpec | None) -> list[str]:
    """`dmo check`'s findings on --time-col, as train would refuse them: the column read on the labeled rows (every
    row where the labels cannot be read), and, without --val, the blocks it cuts."""
    if opts.time_col is None or opts.time_col == opts.label_col:
        return []
    y = None if labels is None else labels.encode(table.column(opts.label_col))
    rows = np.arange(table.num_rows) if y is None else np.flatnonzero(y >= 0)
    try:
        times = read_times(table, opts.time_col, rows, where="DATA")
        if y is not None and labels.binary and block_count(opts) >= 2:
            cut_blocks(times, y[rows], block_count(opts))
    except DmoError as exc:
        return [str(exc)]
    return []
