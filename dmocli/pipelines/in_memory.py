"""The `train` pipeline of the in-memory solvers: read and preprocess (in_memory_load.py), decide the folds, fit a
solver, adjust the threshold, report, save.

Solvers only see tensors; everything around them is shared here so every
solver's model gets the same exact threshold adjustment, report and model file.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dmocli.data import sources
from dmocli.models.architecture import Architecture
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.gain import GainMatrix
from dmocli.options import CV_AUTO, TrainOptions
from dmocli.pipelines.conclude import FittedRun, conclude
from dmocli.pipelines.cross_fit import CrossFitted, cross_fit
from dmocli.pipelines.cv_auto import DEFAULT_FOLDS, CvRule
from dmocli.pipelines.in_memory_load import GAIN_VALUES, Loaded, check_unlabeled, load
from dmocli.pipelines.multiclass import class_problem
from dmocli.pipelines.shared_folds import val_share
from dmocli.pipelines.time_blocks import block_count, blocks_report, cut_blocks, forward_chain, val_report
from dmocli.prep.dataset import Prepared, concatenated
from dmocli.prep.drift import drift_warnings
from dmocli.prep.features import LevelCounts
from dmocli.prep.row_fingerprint import row_hashes, sketch
from dmocli.report import unlabeled_warning
from dmocli.solvers.base import FitContext, FitResult, InMemorySolver, SolverParams, SplitData

if TYPE_CHECKING:  # torch loads with the in-memory path only; the numpy streaming solvers start without it
    import torch

    from dmocli.engines.torch_distributed import ProcessGroup


def _split_tensors(data: Prepared, device: torch.device) -> SplitData:
    import torch

    extra = {k: torch.as_tensor(v, device=device) for k, v in data.extra.items()}
    return SplitData(torch.as_tensor(data.X, device=device), torch.as_tensor(data.y, device=device), extra)


@dataclass
class _Splits:
    """The rows the fits see once the folds are decided: with --cv and --val, --val's labeled rows pooled into
    train; and what the report keeps of the splits as read (DATA's levels, --val's levels and rows)."""

    train: Prepared
    val: Prepared | None
    folds: int  # 0: no cross-fitting
    rule: CvRule | None  # what --cv auto decided, with the folds it took
    calibrate: bool  # whether the probability map is fitted (a subsample's labels are not the population's)
    pooled_val_rows: int  # --val rows pooled into the folds (the report says whether, as pooled_val)
    levels: LevelCounts  # unseen and missing categorical levels of DATA (with --val-frac, of both parts)
    val_levels: LevelCounts | None
    val_rows: int  # --val's rows, labeled or not
    blocks: np.ndarray | None = None  # --time-col: each training row's block in time (forward chaining), or None
    time_blocks: dict[str, Any] | None = None  # the report's `time_blocks`: each block's period, the held-out one


@dataclass
class _Fitted:
    """The trained model (the final fit, or the folds' ensemble) with what was fitted on the way."""

    network: torch.nn.Module
    result: FitResult
    architecture: Architecture
    params: SolverParams  # the final fit's: where the folds stopped early, it stops there too
    crossed: CrossFitted | None
    member_map: tuple[float, float] | None  # an ensemble's probability map, applied to its members
    fit_seconds: float
    train_split: SplitData
    val_split: SplitData | None


def train_in_memory(
    data: sources.Source,
    opts: TrainOptions,
    *,
    solver: InMemorySolver,
    params: SolverParams,
    output: Path | None,
    report_path: str | Path | None,
    started: float,
    group: ProcessGroup | None,
) -> tuple[DmoModel, dict[str, Any]]:
    """The in-memory solvers' path; with a torchrun `group`, this process holds only its share of DATA's rows."""
    from dmocli.models.networks import resolve_device

    device = group.device if group is not None else resolve_device(opts.device)
    return train_loaded(
        _load(data, opts, solver, group),  # held by train_loaded alone, which lets go of it once split
        data,
        opts,
        solver=solver,
        params=params,
        output=output,
        report_path=report_path,
        started=started,
        group=group,
        device=device,
    )


def _load(data: sources.Source, opts: TrainOptions, solver: InMemorySolver, group: ProcessGroup | None) -> Loaded:
    """DATA read and prepared; under torchrun, this process's share, and a read that fails on one process only
    (its rows, its node's files) stops all of them with its message."""
    if group is None:
        return load(data, opts, solver, None)
    loaded = group.agree(lambda: load(data, opts, solver, group))
    check_unlabeled(group.sum_int(loaded.n_unlabeled), opts, solver)
    return loaded


def train_loaded(
    loaded: Loaded,
    data: sources.Source,
    opts: TrainOptions,
    *,
    solver: InMemorySolver,
    params: SolverParams,
    output: Path | None,
    report_path: str | Path | None,
    started: float,
    group: ProcessGroup | None,
    device: torch.device,
) -> tuple[DmoModel, dict[str, Any]]:
    """Fit, settle and save on DATA as `load` prepared it: apart from the read so that `--model auto` can prepare
    DATA once per candidate (the preprocessing depends on the model kind) from one read of it
    (pipelines/model_choice.py)."""
    labels, problem, pre, profile = loaded.labels, loaded.problem, loaded.pre, loaded.profile
    val_unlabeled, data_warnings = loaded.val_unlabeled, loaded.warnings
    class_op = class_problem(opts, labels.classes, labels.binary)  # a multi-class operating point, checked first
    splits = _splits(loaded, opts, solver=solver, group=group)
    del loaded  # the splits as read: with --cv and --val, pooled copies replace them
    if splits.blocks is not None and opts.cv_transfer == "ensemble":  # one model of every row (time_blocks.py)
        opts = dataclasses.replace(opts, cv_transfer="apply")
    arch = Architecture(opts.model, pre.n_features, labels.n_outputs, width=opts.width, depth=opts.depth)
    ctx = FitContext(
        problem=None if problem is None else problem.trained_as,  # value: the model trains as for ofbs
        architecture=arch,
        device=device,
        seed=opts.seed,
        params=params,
        group=group,
        class_names=labels.classes,
        feature_types=pre.feature_types,
    )
    fitted = _fit(solver, splits, ctx=ctx, ensemble=bool(splits.folds) and opts.cv_transfer == "ensemble")
    logits, truth, levels = _logits(fitted, splits, group)
    gain_values = _gain_values(fitted, splits) if GAIN_VALUES in splits.train.extra else None
    val_levels, crossed = splits.val_levels, fitted.crossed
    run = FittedRun(
        solver=solver.name,
        params=fitted.params,
        problem=problem,
        labels=labels,
        preprocessor=pre,
        architecture=fitted.architecture,
        network=fitted.network.cpu(),
        device=str(device),
        logits=logits,
        truth=truth,
        own_threshold=fitted.result.threshold,
        adjust=opts.adjust is not False,
        fit_seconds=fitted.fit_seconds,
        solver_trace=fitted.result.trace,
        levels=levels,
        profile=profile,
        warnings=data_warnings + _split_warnings(data, opts, splits, impute=pre.impute, val_unlabeled=val_unlabeled),
        solver_warnings=fitted.result.warnings,
        report_fields={
            **({**val_levels.report("val_"), "val_unlabeled_rows": val_unlabeled} if val_levels is not None else {}),
            **({} if group is None else {"distributed": {"world_size": group.world_size, "backend": group.backend}}),
            **({"cv_rule": splits.rule.report()} if splits.rule is not None else {}),
            **({"time_blocks": splits.time_blocks} if splits.time_blocks is not None else {}),
        },
        info_fields={
            "rows": int(truth["train"].size),
            **({"time_blocks": _time_info(splits.time_blocks)} if splits.time_blocks is not None else {}),
        },
        crossed=crossed,
        calibrate=splits.calibrate,
        # an ensemble's members carry the probability map: the model's own is the identity
        calibration=Calibration.identity("cv") if fitted.member_map is not None else None,
        training_rows=_fingerprint(splits.train, group) if labels.binary else None,
        class_problem=class_op,
        gain=None if gain_values is None else GainMatrix.parse(opts.gain),
        gain_values=gain_values,
    )
    writes = group is None or group.primary
    return conclude(
        run, opts, data, output=output if writes else None, report_path=report_path if writes else None, started=started
    )


def _splits(loaded: Loaded, opts: TrainOptions, *, solver: InMemorySolver, group: ProcessGroup | None) -> _Splits:
    """Decide the folds (a collective count under torchrun), and with --cv and --val pool --val's rows into the
    folds: every labeled row then counts in them."""
    train_data, val_data, rule = loaded.train, loaded.val, loaded.cv_rule
    if loaded.times is not None:
        return _time_splits(loaded, opts)
    folds = _folds(opts, solver, data=train_data, group=group, rule=rule)
    rule = dataclasses.replace(rule, folds=folds) if rule is not None else None
    val_levels = val_data.levels if val_data is not None else None
    val_rows = val_data.n + loaded.val_unlabeled if val_data is not None else 0
    # A subsample's labels are not the population's: calibrate only on unsampled validation rows, if any.
    calibrate = "offsets" not in train_data.extra or (val_data is not None and not folds)
    pooled_val_rows = 0
    levels = train_data.levels
    if folds and val_data is not None:  # --cv asked with --val: every labeled row counts in the folds
        pooled_val_rows = val_data.n
        train_data, val_data = concatenated(train_data, val_share(val_data, group)), None
    return _Splits(train_data, val_data, folds, rule, calibrate, pooled_val_rows, levels, val_levels, val_rows)


def _time_info(section: dict[str, Any]) -> dict[str, Any]:
    """What the model file's info keeps of --time-col: the column and the held-out period its threshold and held-out
    curve come from (out of time), for `dmo info` and a re-target to say so."""
    return {"time_col": section["time_col"], "held_out_by": section["held_out_by"], "held_out": section["held_out"]}


def _time_splits(loaded: Loaded, opts: TrainOptions) -> _Splits:
    """--time-col: DATA cut into K blocks in time (forward chaining), or, with --val, DATA whole and --val, never
    pooled, as the later period (pipelines/time_blocks.py)."""
    train_data, val_data, times = loaded.train, loaded.val, loaded.times
    assert times is not None
    folds = block_count(opts)
    val_rows = val_data.n + loaded.val_unlabeled if val_data is not None else 0
    calibrate = "offsets" not in train_data.extra or (val_data is not None and not folds)
    blocks, section = None, None
    if folds:
        blocks = cut_blocks(times, train_data.y, folds)
        section = blocks_report(times, train_data.y, blocks)
    elif val_data is not None and loaded.val_times is not None:
        section = val_report(times, train_data.y, loaded.val_times, val_data.y)
    val_levels = val_data.levels if val_data is not None else None
    return _Splits(
        train_data, val_data, folds, None, calibrate, 0, train_data.levels, val_levels, val_rows, blocks, section
    )


def _fit(solver: InMemorySolver, splits: _Splits, *, ctx: FitContext, ensemble: bool) -> _Fitted:
    """Cross-fit the folds (if any), then the final fit on every training row, or, for `--cv-transfer ensemble`,
    the folds' models as the model."""
    device, arch, params = ctx.device, ctx.architecture, ctx.params
    crossed, member_map = None, None
    if splits.blocks is not None:
        crossed = forward_chain(
            solver,
            splits.train,
            splits.blocks,
            ctx=ctx,
            to_tensors=lambda part: _split_tensors(part, device),
            device=device,
        )
    elif splits.folds:
        crossed = cross_fit(
            solver,
            splits.train.labeled(),
            k=splits.folds,
            ctx=ctx,
            to_tensors=lambda part: _split_tensors(part, device),
            device=device,
            pooled_val=splits.pooled_val_rows,
            keep_models=ensemble,
        )
    if crossed is not None and not ensemble:
        params = solver.refit_params(params, crossed.traces)  # where the folds stopped early, the final fit stops
        ctx = dataclasses.replace(ctx, params=params)
    train_split = _split_tensors(splits.train, device)
    val_split = _split_tensors(splits.val, device) if splits.val is not None else None
    fit_started = time.perf_counter()
    if crossed is not None and ensemble:  # the fold models are the model: no final fit
        member_map = crossed.member_map() if splits.calibrate else None  # a subsample's logits are offset-corrected
        crossed = crossed if member_map is None else crossed.mapped(member_map)
        result, arch = crossed.ensemble(member_map), dataclasses.replace(arch, members=splits.folds)
    else:
        result = solver.fit(train_split, val_split, ctx)
    fit_seconds = time.perf_counter() - fit_started
    network = result.network.eval()
    return _Fitted(network, result, arch, params, crossed, member_map, fit_seconds, train_split, val_split)


def _logits(
    fitted: _Fitted, splits: _Splits, group: ProcessGroup | None
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], LevelCounts]:
    """The model's logits and the labels of every split the threshold may be searched on (train, val, the folds'
    out-of-fold cv), and DATA's levels; under torchrun, train's rows and levels gathered from every process."""
    import torch

    from dmocli.models.networks import logits_of

    network, train_data, levels = fitted.network, splits.train, splits.levels
    logits = {"train": logits_of(network, fitted.train_split.labeled().X).float().cpu().numpy()}
    truth = {"train": train_data.y[train_data.y >= 0]}
    if splits.val is not None:
        logits["val"] = logits_of(network, fitted.val_split.X).float().cpu().numpy()
        truth["val"] = splits.val.y
    if fitted.crossed is not None:
        logits["cv"], truth["cv"] = fitted.crossed.logits, fitted.crossed.y
    if group is not None:  # the threshold search and the report see every process's training rows
        logits["train"] = group.gather_rows(torch.from_numpy(logits["train"])).numpy()
        truth["train"] = group.gather_rows(torch.from_numpy(truth["train"])).numpy()
        levels = _merged_levels(levels, group)
    return logits, truth, levels


def _gain_values(fitted: _Fitted, splits: _Splits) -> dict[str, np.ndarray]:
    """--problem value's gain columns of the rows of every split the threshold may be searched on, in `_logits`'
    order: train's labeled rows, --val's, and the out-of-fold rows (every labeled training row with --cv, the later
    blocks' with --time-col). One process: --problem value is refused under torchrun."""
    train = splits.train.extra[GAIN_VALUES][splits.train.y >= 0]
    values = {"train": train}
    if splits.val is not None:
        values["val"] = splits.val.extra[GAIN_VALUES]
    if fitted.crossed is not None:
        values["cv"] = train if splits.blocks is None else splits.train.extra[GAIN_VALUES][splits.blocks > 0]
    return values


def _split_warnings(
    data: sources.Source, opts: TrainOptions, splits: _Splits, *, impute: str, val_unlabeled: int
) -> list[str]:
    """What the splits and folds give a user to hear of: --val's drift and unlabeled rows, fewer folds than the
    default, a --cv-transfer with nothing cross-fitted, --val naming DATA's own file."""
    val_levels = splits.val_levels
    return (
        (drift_warnings(val_levels, splits.val_rows, impute) if val_levels is not None else [])
        + unlabeled_warning(val_unlabeled, opts.val)
        + _fewer_folds(opts, splits.folds)
        + _transfer_without_folds(opts, splits.folds)
        + _val_is_data(data, opts.val)
    )


def _fingerprint(rows: Prepared, group: ProcessGroup | None) -> np.ndarray:
    """The sketch of the labeled rows the model was fitted on, so `dmo threshold MODEL DATA` can tell them. Under
    torchrun, the bottom-k of every process's bottom-k: the bottom-k of all the rows (a collective call)."""
    labeled = rows.labeled()
    own = sketch(row_hashes(labeled.X, labeled.y))
    if group is None:
        return own
    every = group.gather_json([str(value) for value in own])  # uint64 as text: JSON numbers may round them
    return sketch(np.array([int(value) for part in every for value in part], dtype=np.uint64))


def _merged_levels(levels: LevelCounts, group: ProcessGroup) -> LevelCounts:
    """Unseen and missing categorical levels counted over every process's rows."""
    merged = LevelCounts()
    for unseen, missing in group.gather_json([levels.unseen, levels.missing]):
        merged.add(LevelCounts(unseen, missing))
    return merged


def _val_is_data(data: sources.Source, val: Path | None) -> list[str]:
    """The warning when --val names DATA's own file: the threshold is then fitted on training rows, as --cv 0
    would, and the validation figures are training figures."""
    if val is None or isinstance(data, pa.Table) or sources.is_stdin(data):
        return []
    if not (Path(data).exists() and Path(val).exists() and os.path.samefile(data, val)):
        return []
    return [
        f"--val {val} is DATA's own file: the threshold is fitted on the rows the model was trained on, so the "
        "operating point is optimistic (give --val held-out rows, or leave it out: --cv 5 cross-fits the threshold)"
    ]


def _fewer_folds(opts: TrainOptions, folds: int) -> list[str]:
    """The warning when the default --cv took fewer folds than DEFAULT_FOLDS (a class with fewer labeled rows
    than that): each fold's model then trains on a smaller share, and the user did not ask for it."""
    if opts.cv not in (None, CV_AUTO) or not 0 < folds < DEFAULT_FOLDS:
        return []
    return [
        f"the rarest class has only {folds} labeled rows, so the threshold is cross-fitted on {folds} folds, not "
        f"{DEFAULT_FOLDS}; its operating point rests on those {folds} rows (add rows of that class, or give --val)"
    ]


def _transfer_without_folds(opts: TrainOptions, folds: int) -> list[str]:
    """The warning when --cv-transfer was changed but nothing is cross-fitted (--val, --val-frac, --cv 0,
    --no-adjust, a solver that folds on its own): the option then does nothing, and a user who asked for a
    refit should know the saved model is not one."""
    default = TrainOptions.__dataclass_fields__["cv_transfer"].default
    if folds or opts.cv_transfer == default:
        return []
    return [
        f"--cv-transfer {opts.cv_transfer} applies to a cross-fitted threshold, and this run fits none: it does nothing"
    ]


def _folds(
    opts: TrainOptions, solver: InMemorySolver, *, data: Prepared, group: ProcessGroup | None, rule: CvRule | None
) -> int:
    """How many folds cross-fit the threshold (or a multi-class model's probability map): --cv K as given, else
    DEFAULT_FOLDS where it would otherwise be fitted on the training rows (no --val/--val-frac, adjusting, a
    solver that trains on labeled rows) or where --cv auto's `rule` found the held-out positives few, as many as
    the smallest class allows (over every process's rows under torchrun). 0: no cross-fitting."""
    if isinstance(opts.cv, int):
        return opts.cv
    if rule is not None:  # --cv auto decided on the counts: folds, or the held-out split / --val alone
        if rule.decision != "folds":
            return 0
    elif opts.val is not None or opts.val_frac or opts.adjust is False:
        return 0  # the default, and auto where its rule does not apply (multi-class, torchrun)
    if solver.uses_unlabeled or opts.folding or opts.params.get("folding"):
        return 0  # ERO's --folding holds out its own fold of DATA instead
    counts = np.bincount(data.y[data.y >= 0], minlength=2)
    if group is not None:
        counts = np.array([group.sum_int(int(count)) for count in counts])
    smallest = int(counts.min())
    return min(DEFAULT_FOLDS, smallest) if smallest >= 2 else 0
