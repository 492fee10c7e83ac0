"""`dmo train --model gbdt --solver wce --engine dask`: the trees trained on a Dask cluster by XGBoost's own Dask
interface, each worker reading and preparing its parquet files.

The client fits the preprocessing in one streaming pass over DATA (O(batch)
memory, as under torchrun) and counts the labels; every worker then reads its
files, encodes them with that preprocessing and keeps, per file and class, a
seeded `stop-frac` share of the rows aside. XGBoost's Dask training builds the
histograms and the trees across the workers (`xgboost.dask.train` on a
`DaskQuantileDMatrix`), early-stopped on the rows kept aside (or on `--val`).
The exact threshold is then searched on those held-out rows, as for every model.

The model file's drift profile (prep/drift_counting.py) is built on the client in the pass that fits the
preprocessing, so it reads nothing more: it counts every labeled row of DATA, the `stop-frac` share the workers
hold out included (a seeded random share of each file and class, so the same distribution as the trees' rows;
profiles built per partition could not be merged, their bin edges differing). Its score is the held-out rows'.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dmocli.data import reading, sources
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.models.modelfile import DmoModel
from dmocli.models.stored_network import import_xgboost
from dmocli.models.trees import BoostedTrees
from dmocli.operating_point.problems import Problem
from dmocli.options import TrainOptions
from dmocli.pipelines.check import effective_impute, resolve_problem, survey_derivation
from dmocli.pipelines.conclude import FittedRun, conclude
from dmocli.pipelines.dask_fingerprint import sketch_of_partitions
from dmocli.pipelines.in_memory_load import case_variant_warnings, plan_profile_builder, profiled
from dmocli.prep.columns import refuse_problems, survey_columns
from dmocli.prep.dataset import prepare
from dmocli.prep.drift_counting import ProfileBuilder
from dmocli.prep.features import LevelCounts, Preprocessor, level_text
from dmocli.prep.labels import LabelSpec, infer_label_spec, label_counts
from dmocli.solvers.base import FitContext, InMemorySolver, SolverParams
from dmocli.solvers.boosting import TreeParams, library_params, monitor_weighted


@dataclass
class PartitionRows:
    """What a worker makes of one file: the encoded features, the label code, the class weight and whether the
    row is held out for early stopping and the threshold (a seeded per-file, per-class draw)."""

    pre: Preprocessor
    labels: LabelSpec
    weights: list[float]  # per class code
    stop_frac: float
    seed: int

    @property
    def columns(self) -> list[str]:
        return [f"f{i}" for i in range(self.pre.n_features)]

    def meta(self) -> pd.DataFrame:
        frame = pd.DataFrame({name: pd.Series([], dtype=np.float32) for name in self.columns})
        return frame.assign(
            label=pd.Series([], dtype=np.int32), weight=pd.Series([], dtype=np.float32), held=pd.Series([], dtype=bool)
        )

    def __call__(self, table: pa.Table, part: int) -> pd.DataFrame:
        prepared = prepare(table, self.pre, self.labels).labeled()
        held = np.zeros(len(prepared.y), dtype=bool)
        rng = np.random.default_rng([self.seed, part])
        for code in np.unique(prepared.y):
            rows = np.flatnonzero(prepared.y == code)
            held[rng.permutation(rows)[: int(round(self.stop_frac * len(rows)))]] = True
        frame = pd.DataFrame(prepared.X, columns=self.columns)
        return frame.assign(
            label=prepared.y.astype(np.int32), weight=np.asarray(self.weights, np.float32)[prepared.y], held=held
        )


@dataclass
class MissingLevels:
    """Per categorical column, a file's rows without a level (the report's `missing_levels`; none is unseen:
    the levels were learned from these very files)."""

    pre: Preprocessor

    def __call__(self, table: pa.Table, part: int) -> LevelCounts:
        columns = self.pre.categorical
        return LevelCounts({c: 0 for c in columns}, {c: level_text(table.column(c)).null_count for c in columns})


@dataclass
class _ClientFit:
    """What the client fits in its pass over DATA before the cluster trains: the label spec and problem, the
    preprocessing (its derivation included, for the workers' raw files), the class weights and the drift profile."""

    labels: LabelSpec
    problem: Problem | None
    pre: Preprocessor
    weights: list[float]  # per class code
    n_classes: int
    profile: ProfileBuilder


@dataclass
class _ClusterFit:
    """The trees trained on the workers, with the logits and labels the threshold is searched on and what the
    report says of the cluster."""

    booster: Any  # xgboost.Booster, cut to the kept rounds
    rounds: int
    rounds_run: int
    fit_seconds: float
    train_logits: np.ndarray
    train_y: np.ndarray
    monitor_X: np.ndarray
    monitor_y: np.ndarray
    workers: int
    levels: LevelCounts
    fitted_rows: Any  # the sketch of the rows a binary model's trees were fitted on (dask_fingerprint); else None


def train_trees_on_dask(
    data: sources.Source,
    opts: TrainOptions,
    *,
    solver: InMemorySolver,
    params: SolverParams,
    output: Path | None,
    report_path: str | Path | None,
    started: float,
) -> tuple[DmoModel, dict[str, Any]]:
    """`dmo train --model gbdt --engine dask`: see the module docstring."""
    import_xgboost()  # the optional dependency, named in one line when missing

    choice = EngineChoice("dask", opts.scheduler, opts.workers)
    choice.check(data)
    p: TreeParams = params
    client_fit = _fit_on_client(data, opts, p)
    labels, problem, pre = client_fit.labels, client_fit.problem, client_fit.pre
    arch = Architecture("gbdt", pre.n_features, labels.n_outputs)
    ctx = FitContext(
        problem=problem,
        architecture=arch,
        device=_device(opts),
        seed=opts.seed,
        params=p,
        feature_types=pre.feature_types,
    )
    settings = library_params(p, ctx, client_fit.n_classes)
    trees = _train_on_cluster(data, opts, choice=choice, client_fit=client_fit, p=p, settings=settings)
    logits = {
        "train": _as_logits(trees.train_logits, labels.n_outputs),
        "val": _as_logits(trees.booster.inplace_predict(trees.monitor_X, predict_type="margin"), labels.n_outputs),
    }
    run = FittedRun(
        solver=solver.name,
        params=params,
        problem=problem,
        labels=labels,
        preprocessor=pre,
        architecture=arch,
        network=BoostedTrees.from_booster(trees.booster, labels.n_outputs),
        device=settings["device"],
        logits=logits,
        truth={"train": trees.train_y, "val": trees.monitor_y},
        own_threshold=0.0 if problem is not None else None,  # the trees' own cut, as in memory: probability 0.5
        adjust=opts.adjust is not False,
        fit_seconds=trees.fit_seconds,
        solver_trace={
            "rounds": trees.rounds,
            "rounds_run": trees.rounds_run,
            "monitored_split": "val" if opts.val is not None else "held-out rows",
            "engine": "dask",
        },
        levels=trees.levels,
        profile=client_fit.profile,
        training_rows=trees.fitted_rows,
        warnings=pre.derive_warnings() + case_variant_warnings(pre),
        report_fields={"engine": {"name": "dask", "workers": trees.workers, "scheduler": opts.scheduler}},
        info_fields={"engine": "dask"},
    )
    return conclude(run, opts, data, output=output, report_path=report_path, started=started)


def _fit_on_client(data: sources.Source, opts: TrainOptions, p: TreeParams) -> _ClientFit:
    """Plan the columns, count the labels and fit the preprocessing in one streaming pass on the client (O(batch)
    memory), profiling every labeled row on the way: the workers then only encode their files with it."""
    schema = reading.schema(data)
    derive, problems = survey_derivation(schema, lambda columns: reading.iter_batches(data, columns=columns), opts)
    plan, found = survey_columns(derive.schema(schema), opts.label_col, opts.drop, opts.embedding_col)
    refuse_problems(problems + found)
    label_column = reading.read_table(data, columns=[opts.label_col]).column(opts.label_col)
    counts = label_counts(label_column, opts.label_col)
    if sum(counts.values()) < len(label_column) and not opts.drop_unlabeled:
        missing = len(label_column) - sum(counts.values())
        raise DmoError(f"{missing} rows have no label; pass --drop-unlabeled to ignore them")
    problem = resolve_problem(opts, len(counts))
    labels = infer_label_spec(
        label_column, opts.label_col, positive=opts.positive, binary=problem is not None, counts=counts
    )
    codes = labels.encode(label_column)
    del label_column
    n_classes = max(2, labels.n_outputs)
    sizes = np.bincount(codes[codes >= 0], minlength=n_classes).astype(np.float64)
    weights = (sizes.sum() / (n_classes * np.maximum(sizes, 1))).tolist() if p.balanced else [1.0] * n_classes
    profile = plan_profile_builder(plan, opts.fold_case)  # every labeled row, counted in the pass below
    batches = profiled(map(derive.apply, reading.iter_batches(data)), profile, labels, keep_unlabeled=False)
    pre = Preprocessor.fit(
        batches, plan, impute=effective_impute(opts), categorical_codes=True, fold_case=opts.fold_case
    )
    pre.derive = derive or None  # the workers' `prepare` applies it to their raw files
    return _ClientFit(labels, problem, pre, weights, n_classes, profile)


def _train_on_cluster(
    data: sources.Source,
    opts: TrainOptions,
    *,
    choice: EngineChoice,
    client_fit: _ClientFit,
    p: TreeParams,
    settings: dict[str, Any],
) -> _ClusterFit:
    """Each worker prepares its files; XGBoost's Dask training builds the trees across them, early-stopped on the
    rows held out (or on --val); the training rows' logits are computed on the cluster too."""
    import xgboost.dask as dxgb

    pre, labels = client_fit.pre, client_fit.labels
    rows = PartitionRows(pre, labels, client_fit.weights, 0.0 if opts.val is not None else p.stop_frac, opts.seed)
    with choice.dask(data) as engine:
        client = engine.client
        frame = engine.frame(rows, rows.meta())
        fit, held = frame[~frame["held"]], frame[frame["held"]]
        types = {"feature_types": pre.feature_types, "enable_categorical": True} if pre.categorical else {}
        dtrain = dxgb.DaskQuantileDMatrix(
            client, fit[rows.columns], fit["label"], weight=fit["weight"], missing=np.nan, max_bin=p.max_bin, **types
        )
        if opts.val is not None:
            val = prepare(reading.read_table(opts.val, text_columns=pre.text_columns), pre, labels).labeled()
            monitor_X, monitor_y = val.X, val.y
        else:  # read once: the rows judge early stopping here and the threshold after training
            local_held = held.compute()
            monitor_X = local_held[rows.columns].to_numpy(np.float32)
            monitor_y = local_held["label"].to_numpy(np.int64)
        one_part = lambda values: engine.dd.from_pandas(values, npartitions=1)  # noqa: E731
        monitored = monitor_weighted(p, client_fit.n_classes)
        monitor_weights = np.asarray(client_fit.weights, np.float32)[monitor_y] if monitored else None
        dmonitor = dxgb.DaskDMatrix(
            client,
            one_part(pd.DataFrame(monitor_X, columns=rows.columns)),
            one_part(pd.Series(monitor_y)),
            weight=None if monitor_weights is None else one_part(pd.Series(monitor_weights)),
            missing=np.nan,
            **types,
        )
        fit_started = time.perf_counter()
        stopping = p.early_stopping or None
        trained = dxgb.train(
            client,
            settings,
            dtrain,
            num_boost_round=p.rounds,
            evals=[(dmonitor, "monitor")],
            early_stopping_rounds=stopping,
            verbose_eval=False,
        )
        booster = trained["booster"]
        rounds = booster.best_iteration + 1 if stopping else booster.num_boosted_rounds()
        booster = booster[:rounds]
        fit_seconds = time.perf_counter() - fit_started
        train_logits = dxgb.predict(client, booster, fit[rows.columns], output_margin=True).compute()
        train_y = fit["label"].compute().to_numpy(np.int64)
        # the fingerprint `dmo threshold` checks DATA against: binary models only (multi-class ones keep no curve)
        fitted_rows = (
            sketch_of_partitions(fit, feature_columns=rows.columns, label_column="label") if labels.binary else None
        )
        workers = len(client.scheduler_info()["workers"])
        levels = LevelCounts()
        for counted in engine.map(MissingLevels(pre), list(pre.categorical)) if pre.categorical else []:
            levels.add(counted)
    return _ClusterFit(
        booster,
        rounds,
        trained["booster"].num_boosted_rounds(),
        fit_seconds,
        train_logits,
        train_y,
        monitor_X,
        monitor_y,
        workers,
        levels,
        fitted_rows,
    )


def _as_logits(margins: Any, n_outputs: int) -> np.ndarray:
    """XGBoost's margins as the pipelines' logits: (n,) for a binary model, (n, K) for K classes."""
    values = np.asarray(margins, dtype=np.float32).reshape(len(margins), n_outputs)
    return values[:, 0] if n_outputs == 1 else values


def _device(opts: TrainOptions) -> Any:
    """The device XGBoost's workers train on: cuda only when asked for (the workers' GPUs, not this machine's)."""
    import torch

    return torch.device("cuda" if opts.device == "cuda" else "cpu")
