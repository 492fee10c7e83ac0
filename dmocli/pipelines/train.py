"""The `train` pipeline: read, preprocess, fit a solver, adjust the threshold, report, save.

Solvers only see tensors; everything around them is shared here so every
solver's model gets the same exact threshold adjustment ("TA"), report and
model file.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dmocli.data import outputs, reading, sources
from dmocli.engines import torchrun
from dmocli.errors import DmoError, UnreachableTarget
from dmocli.models.architecture import Architecture
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.problems import PROBLEMS, Problem
from dmocli.operating_point.search import search
from dmocli.options import check_confidence, check_seed
from dmocli.prep.dataset import Prepared, prepare, stratified_split
from dmocli.prep.features import LevelCounts, Preprocessor, plan_columns
from dmocli.prep.labels import (
    LabelSpec,
    infer_label_spec,
    label_counts,
    look_alike_classes,
)
from dmocli.prep.unlabeled import read_unlabeled_truth, view_columns
from dmocli.report import (
    binary_split_report,
    dumps,
    envelope,
    model_summary,
    multiclass_split_report,
    unlabeled_warning,
)
from dmocli.solvers import available, get_solver, solver_class
from dmocli.solvers.base import FitContext, SplitData

if TYPE_CHECKING:  # torch loads with the in-memory path only; the numpy streaming solvers start without it
    import torch

    from dmocli.engines.torch_distributed import ProcessGroup


@dataclass
class TrainOptions:
    """Every option of `dmo train`; the CLI fills it, Python callers may too."""

    problem: str | None = None  # fpor | frop | ofbs | multiclass; None: ofbs for binary labels, else multiclass
    target: float | None = None
    beta: float = 1.0
    solver: str = "wce"
    model: str = "linear"
    width: int = 100
    depth: int = 2
    label_col: str = "label"
    positive: str | None = None
    drop: tuple[str, ...] = ()
    embedding_col: str | None = None
    impute: str = "none"
    val: str | Path | None = None
    val_frac: float = 0.0
    device: str = "auto"
    seed: int = 0
    params: dict[str, str] = field(default_factory=dict)
    confidence: float | None = None
    adjust: bool | None = None  # None: the solver's default (TA for in-memory solvers, the learned threshold for streaming ones)
    allow_infeasible: bool = False
    drop_unlabeled: bool = False
    unlabeled_truth: str | Path | None = None  # true labels of the unlabeled rows, for the report (adsh/fixmatch)
    gamma: float | None = None  # LUS subsampling level (--gamma), same as --param gamma=G
    folding: int | None = None  # ERO: K-fold hold-out of DATA for iterate selection (--folding), same as --param folding=K
    epochs: int | None = None  # passes over the data (streaming solvers)
    plot: str | Path | None = None  # PNG of online F vs rows seen (streaming solvers)


def default_model_path(data: str | Path) -> Path:
    """DATA's name without its data suffix (.parquet, .csv, .csv.gz, ...) + .dmo.safetensors, beside DATA.

    Only the data suffix goes: sales.2024.parquet and sales.2025.parquet must
    not both become sales.dmo.safetensors, the second replacing the first.
    """
    data = Path(data).resolve()  # `dmo train .` is named after the directory, not ""
    name = data.name
    suffix = next((s for s in (".parquet", ".pq", *sources.CSV_SUFFIXES) if name.lower().endswith(s)), "")
    if data.is_file() and suffix:
        name = name[: -len(suffix)]
    return data.parent / f"{name}.dmo.safetensors"


def _resolve_problem(opts: TrainOptions, n_classes: int) -> Problem | None:
    kind = opts.problem
    if kind is None:
        kind = "ofbs" if (n_classes <= 2 or opts.positive is not None) else "multiclass"
    if kind == "multiclass":
        if opts.target is not None:
            raise DmoError("--target applies to fpor/frop, not to --problem multiclass")
        if opts.positive is not None:
            raise DmoError("--positive picks the positive class of a binary problem; --problem multiclass keeps every class")
        return None
    return Problem.from_options(kind, opts.target, opts.beta, opts.confidence)


def _split_tensors(data: Prepared, device: torch.device) -> SplitData:
    import torch

    extra = {k: torch.as_tensor(v, device=device) for k, v in data.extra.items()}
    return SplitData(torch.as_tensor(data.X, device=device), torch.as_tensor(data.y, device=device), extra)


def _check_solver_param(solver: Any, name: str, applies_to: str) -> None:
    """A `train` option that is a shortcut for `--param NAME=...` of one solver: refuse it for the others."""
    if name not in solver.Params.__dataclass_fields__:
        raise DmoError(f"{applies_to}, not to {solver.name}")


def train(data: sources.Source, opts: TrainOptions, output: str | Path | None = None,
          report_path: str | Path | None = None) -> tuple[DmoModel, dict[str, Any]]:
    """Train on `data` and write the model (and report); returns both. Raises DmoError on bad input.

    `data` is a path, or a pyarrow Table (the Python API); with a table and no
    `output`, nothing is written and the model is only returned.
    """
    started = time.perf_counter()
    if sources.is_stdin(opts.val) or sources.is_stdin(opts.unlabeled_truth):
        raise DmoError("only DATA can be read from standard input ('-'); give --val and --unlabeled-truth as files")
    if sources.is_stdin(data):
        if not get_solver(opts.solver).streaming:
            raise DmoError(f"DATA '-' (standard input) is read in one pass, which only the streaming solvers "
                           f"(fofo, ofo, lr) can learn from; save the data to a file for solver {opts.solver}")
        if output is None:
            raise DmoError("DATA '-' (standard input) has no file name to name the model after; give -o MODEL")
    if output is not None:
        output = Path(output)
    elif not isinstance(data, pa.Table):
        output = default_model_path(data)
    if not torchrun.secondary():  # only process 0 of a torchrun group writes
        outputs.check_outputs({"-o": output, "--report": report_path, "--plot": opts.plot},
                         {"DATA": data, "--val": opts.val, "--unlabeled-truth": opts.unlabeled_truth})
    outputs.refuse_misnamed_model(output)
    if opts.val is not None and opts.val_frac:
        raise DmoError("give either --val FILE or --val-frac, not both")
    if opts.problem not in (None, "multiclass", *PROBLEMS):
        raise DmoError(f"--problem {opts.problem!r} is not known (use fpor, frop, ofbs or multiclass)")
    if not 0.0 <= opts.val_frac < 1.0:
        raise DmoError(f"--val-frac {opts.val_frac} must be in [0, 1)")
    check_seed(opts.seed)
    check_confidence(opts.confidence)  # now, not after training
    solver = get_solver(opts.solver)
    raw_params = dict(opts.params)
    if opts.gamma is not None:
        _check_solver_param(solver, "gamma", "--gamma applies to --solver lus")
        raw_params["gamma"] = repr(float(opts.gamma))
    if opts.folding is not None:
        _check_solver_param(solver, "folding", "--folding applies to --solver ero")
        if opts.folding < 2:
            raise DmoError(f"--folding {opts.folding} must be at least 2 (K folds, one held out for iterate selection)")
        if opts.val is not None or opts.val_frac:
            raise DmoError("--folding holds out part of DATA for iterate selection; give it without --val/--val-frac")
        raw_params["folding"] = str(opts.folding)
    if opts.unlabeled_truth is not None and not solver.uses_unlabeled:
        raise DmoError(f"--unlabeled-truth applies to solvers that use unlabeled rows (adsh, fixmatch), not {solver.name}")
    if torchrun.launched():
        _check_distributed(data, opts, solver)
    if solver.streaming:
        from dmocli.pipelines.streaming import train_streaming

        return train_streaming(data, opts, solver, output, report_path)
    if opts.epochs is not None or opts.plot is not None:
        raise DmoError(f"--epochs and --plot apply to the streaming solvers (fofo, ofo, lr), not to {solver.name}")
    params = solver.parse_params(raw_params)
    solver.check_params(params, opts.model)
    if not torchrun.launched():
        return _train_in_memory(data, opts, solver, params, output, report_path, started, None)
    from dmocli.engines.torch_distributed import start

    group = start(opts.device)
    try:
        return _train_in_memory(data, opts, solver, params, output, report_path, started, group)
    finally:
        group.close()


NOT_PARQUET = ("training under torchrun reads each process's rows from parquet row groups; convert DATA to parquet "
               "(a file or a directory of files)")


def _check_distributed(data: sources.Source, opts: TrainOptions, solver: Any) -> None:
    """What training under torchrun cannot do yet, refused alike by every process before the group forms (no file is
    looked at here: a node that cannot see DATA must fail inside ProcessGroup.agree, where its message is shown)."""
    if not solver.distributed:
        spread = ", ".join(name for name in available() if solver_class(name).distributed)
        raise DmoError(f"solver {solver.name} trains in one process; under torchrun only these train on several: "
                       f"{spread} (run dmo train without torchrun)")
    if isinstance(data, pa.Table):
        raise DmoError(NOT_PARQUET)
    if opts.val_frac:
        raise DmoError("--val-frac holds out rows spread over every process; under torchrun give --val FILE")


@dataclass
class _Loaded:
    """Everything train reads before fitting: the label spec, the problem, the fitted preprocessing and the
    prepared splits (train: this process's rows under torchrun)."""

    labels: LabelSpec
    problem: Problem | None
    pre: Preprocessor
    train: Prepared
    val: Prepared | None
    n_unlabeled: int  # rows without a label (this process's share under torchrun)
    val_unlabeled: int  # rows of --val without a label: left out of its metrics, and warned about


def _train_in_memory(data: sources.Source, opts: TrainOptions, solver: Any, params: Any, output: Path | None,
                     report_path: str | Path | None, started: float,
                     group: ProcessGroup | None) -> tuple[DmoModel, dict[str, Any]]:
    """The in-memory solvers' path; with a torchrun `group`, this process holds only its share of DATA's rows."""
    import torch

    from dmocli.models.networks import logits_of, resolve_device

    device = group.device if group is not None else resolve_device(opts.device)
    if group is None:
        loaded = _load(data, opts, solver, None)
    else:  # a read can fail on one process only (its rows, its node's files): all then stop with its message
        loaded = group.agree(lambda: _load(data, opts, solver, group))
        _check_unlabeled(group.sum_int(loaded.n_unlabeled), opts, solver)
    labels, problem, pre, train_data, val_data = loaded.labels, loaded.problem, loaded.pre, loaded.train, loaded.val
    val_unlabeled = loaded.val_unlabeled
    levels = train_data.levels  # unseen and missing categorical levels of DATA (with --val-frac, of both parts)
    del loaded

    arch = Architecture(opts.model, pre.n_features, labels.n_outputs, width=opts.width, depth=opts.depth)
    ctx = FitContext(problem=problem, architecture=arch, device=device, seed=opts.seed, params=params, group=group,
                     class_names=labels.classes)
    train_split = _split_tensors(train_data, device)
    val_split = _split_tensors(val_data, device) if val_data is not None else None
    fit_started = time.perf_counter()
    result = solver.fit(train_split, val_split, ctx)
    fit_seconds = time.perf_counter() - fit_started
    network = result.network.eval()

    logits = {"train": logits_of(network, train_split.labeled().X).float().cpu().numpy()}
    truth = {"train": train_data.y[train_data.y >= 0]}
    if val_data is not None:
        logits["val"] = logits_of(network, val_split.X).float().cpu().numpy()
        truth["val"] = val_data.y
    if group is not None:  # the threshold search and the report see every process's training rows
        logits["train"] = group.gather_rows(torch.from_numpy(logits["train"])).numpy()
        truth["train"] = group.gather_rows(torch.from_numpy(truth["train"])).numpy()
        levels = _merged_levels(levels, group)

    report: dict[str, Any] = envelope(
        "train", solver=solver.name, **(problem.to_dict() if problem else {"problem": "multiclass", "target": None, "beta": None}),
        confidence=opts.confidence, seed=opts.seed, device=str(device), data=sources.describe(data),
        val=str(opts.val) if opts.val else (f"{opts.val_frac:g} of data (stratified)" if opts.val_frac else None),
        model=arch.to_dict(), params=vars(params), n_features=pre.n_features,
        **levels.report(),
        **({**val_data.levels.report("val_"), "val_unlabeled_rows": val_unlabeled} if opts.val is not None else {}),
        warnings=look_alike_classes(labels.classes) + unlabeled_warning(val_unlabeled, opts.val),
    )
    if group is not None:
        report["distributed"] = {"world_size": group.world_size, "backend": group.backend}
    threshold: float | None = None
    if problem is not None:
        threshold_split = "val" if val_data is not None else "train"
        own = result.threshold
        if own is not None:
            report["before_adjustment"] = {
                name: binary_split_report(logits[name], truth[name], own, problem) for name in logits
            }
        if opts.adjust is not False or own is None:
            point = search(logits[threshold_split], truth[threshold_split], problem, opts.confidence)
            report["operating_point"] = {"split": threshold_split, **point.to_dict()}
            if point.feasible is False and not opts.allow_infeasible:
                what = problem.constraint_name
                raise UnreachableTarget(
                    f"target {what} >= {problem.target:g} is not reachable on the {threshold_split} split "
                    f"(best achievable {what}{' bound' if opts.confidence else ''}: {point.best_achievable:.4f}); "
                    "lower --target, or pass --allow-infeasible to keep the closest threshold",
                    best_achievable=point.best_achievable,
                )
            threshold = point.threshold
        else:
            threshold = own
        report["threshold"] = threshold
        report["splits"] = {name: binary_split_report(logits[name], truth[name], threshold, problem) for name in logits}
    else:
        report["splits"] = {name: multiclass_split_report(logits[name], truth[name], labels.classes) for name in logits}
    report["solver_trace"] = result.trace
    report["fit_seconds"] = fit_seconds

    model = DmoModel(network=network.cpu(), architecture=arch, preprocessor=pre, labels=labels, solver=solver.name,
                     problem=problem, threshold=threshold,
                     info={"seed": opts.seed, "confidence": opts.confidence, "params": vars(params),
                           "summary": model_summary(report.get("splits", {}))})
    if group is not None and not group.primary:
        return finish(model, report, None, None, started)
    return finish(model, report, output, report_path, started)


def _merged_levels(levels: LevelCounts, group: ProcessGroup) -> LevelCounts:
    """Unseen and missing categorical levels counted over every process's rows."""
    merged = LevelCounts()
    for unseen, missing in group.gather_json([levels.unseen, levels.missing]):
        merged.add(LevelCounts(unseen, missing))
    return merged


def _load(data: sources.Source, opts: TrainOptions, solver: Any, group: ProcessGroup | None) -> _Loaded:
    """Read and prepare DATA (and --val). Under torchrun (`group`) every process fits the global preprocessing
    from one streaming pass over all of DATA, then reads only its range of rows (ProcessGroup.row_range). No
    collective calls, so ProcessGroup.agree can run it."""
    if group is None:
        table = reading.read_table(data)
        schema = table.schema
    elif sources.parquet_files(data) is None:
        raise DmoError(NOT_PARQUET)
    else:
        schema = reading.schema(data)
    plan = plan_columns(schema, opts.label_col, opts.drop, opts.embedding_col)
    label_column = (table if group is None else reading.read_table(data, columns=[opts.label_col])).column(opts.label_col)
    counts = label_counts(label_column)  # as the label spec counts them: missing and blank labels left out
    problem = _resolve_problem(opts, len(counts))
    if problem is None and not solver.multiclass:
        raise DmoError(f"solver {solver.name} is binary; give --problem fpor|frop|ofbs (and --positive for >2 classes)")
    if problem is not None and problem.kind not in solver.problems:
        raise DmoError(f"solver {solver.name} does not solve --problem {problem.kind} (it solves: {', '.join(solver.problems)})")
    labels = infer_label_spec(label_column, opts.label_col, opts.positive, binary=problem is not None, counts=counts)
    pre = Preprocessor.fit(table.to_batches() if group is None else reading.iter_batches(data), plan, opts.impute)
    if group is not None:
        labeled = labels.encode(label_column) >= 0
        if labeled.sum() < 2 * group.world_size:
            raise DmoError(f"DATA has {int(labeled.sum())} labeled rows, too few for {group.world_size} processes "
                           "(each needs 2); start fewer (--nproc-per-node)")
        table = reading.read_rows(data, *group.row_range(labeled))
    full = prepare(table, pre, labels)
    if "offsets" in full.extra and not solver.uses_offsets:
        raise DmoError(f"DATA is a `dmo subsample` file (log_accept_* columns) and solver {solver.name} cannot use "
                       "its offsets; train it with --solver lus or wce")
    n_unlabeled = int((full.y < 0).sum())
    if group is None:  # under torchrun the caller checks the count of every process's rows
        _check_unlabeled(n_unlabeled, opts, solver)
    if solver.uses_unlabeled:
        if n_unlabeled == 0:
            raise DmoError(f"solver {solver.name} needs unlabeled rows (missing labels) and the data has none")
        full.extra.update(view_columns(table, pre))
        if opts.unlabeled_truth is not None:
            full.extra["unlabeled_truth"] = read_unlabeled_truth(opts.unlabeled_truth, labels, label_column.type, full.y)
    # The features are in `full` now: drop the arrow table (as large as the data) before any copy of them and
    # before training. A table passed in by a Python caller stays alive in the caller, so frees nothing.
    del table, label_column
    pa.default_memory_pool().release_unused()
    if not solver.uses_unlabeled:
        full = full.labeled()  # with --drop-unlabeled (checked by the caller); itself when every row is labeled

    val_unlabeled = 0
    if opts.val is not None:
        val_table = reading.read_table(opts.val, text_columns=list(pre.categorical))  # a CSV's levels stay text
        pre.check_columns(val_table.schema)
        if opts.label_col not in val_table.schema.names:
            raise DmoError(f"no label column '{opts.label_col}' in --val {opts.val}")
        val_all = prepare(val_table, pre, labels)
        val_unlabeled = int((val_all.y < 0).sum())
        val_data: Prepared | None = val_all.labeled()
        del val_table, val_all
        train_data = full
    elif opts.val_frac > 0:
        train_rows, val_rows = stratified_split(full.y, opts.val_frac, opts.seed, labels.classes)
        train_data, val_data = full.take(train_rows), full.take(val_rows)
    else:
        train_data, val_data = full, None
    del full  # with --val-frac, train and val are copies: the whole set must not stay alive beside them
    return _Loaded(labels, problem, pre, train_data, val_data, n_unlabeled, val_unlabeled)


def _check_unlabeled(n_unlabeled: int, opts: TrainOptions, solver: Any) -> None:
    if n_unlabeled and not solver.uses_unlabeled and not opts.drop_unlabeled:
        raise DmoError(
            f"{n_unlabeled} rows have no label; solver {solver.name} cannot use unlabeled rows "
            "(pass --drop-unlabeled to ignore them, or use --solver adsh/fixmatch)"
        )


def finish(model: DmoModel, report: dict[str, Any], output: Path | None, report_path: str | Path | None,
           started: float) -> tuple[DmoModel, dict[str, Any]]:
    """Last step of every train path: stamp the wall time, write the model (unless output is None), then the report."""
    report["wall_seconds"] = time.perf_counter() - started
    report["model_path"] = None if output is None else str(output)
    text = dumps(report)  # first: a report that cannot be written must not leave a model behind
    if output is not None:
        model.save(output)
    if report_path is not None:
        outputs.write_text(report_path, text)
    return model, report
