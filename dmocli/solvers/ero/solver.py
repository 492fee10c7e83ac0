"""ERO: exact reformulation + l1 exact penalty for FPOR, FROP and OFBS (docs/algorithms.md#ero).

Every training row gets a variable s_i in [0,1] standing for its prediction;
the one-sided identities on h(s, z) tie s to the model (z = sigmoid(f) - 1/2)
exactly, and the metric is computed on s. The constrained problem is solved
by an l1 exact penalty with one penalty parameter per row (mu_i) plus one
for the metric constraint (mu_0), updated by the authors' outer rule, with a
BCE agreement regularizer whose weight grows with the penalties.

Three presets (`--param protocol=...`), every value overridable:
- `authors`: the published protocol (plain-BCE warm start up to 3000 steps,
  s uniform random, 50 outer x up to 1000 Adam steps, patience 50).
- `fast` (default): the same penalty, regularizer and update rule, reached
  quicker: a stronger warm start, the `wce` solver (linear: the exact
  optimum of the class-balanced BCE by L-BFGS, so ERO starts from WCE+TA's
  very point; MLP: early-stopped on the validation loss when a monitored
  split is given, else on the training loss like the authors' warm start);
  the output bias moved to
  the exact TA threshold of the warm-started scores and s started at those
  predictions (a feasible, WCE+TA-quality point when the target is
  reachable); 5 outer iterations of at most 100 steps (mini-batch: 10
  epochs) that stop once F falls by less than 0.1% over 15 steps (3
  epochs); each outer iterate judged with its bias at the exact
  train-optimal value (`bias_projection`); the outer loop stops once the
  iterate is train-feasible and the monitored objective has not improved
  for 3 outer iterations; and (linear) the kept iterate is the best on train
  among those the monitored split cannot tell from its best
  (`WithinNoiseIterate`); the MLP, which keeps fitting train, keeps the
  strict validation arg-max as its guard against over-fitting.
- `thorough`: the train problem solved hard, at the cost of over-fitting
  (the goal of a train objective at least WCE+TA's): MLP warm start of the authors' kind
  (plain BCE, full batch, early-stopped on the training loss) at 10x their
  learning rate for 1/10 of their steps, then fast's penalty phase, keeping
  the best iterate on train (`selection=train`: validation unused); the
  outer loop also stops once the kept iterate is train-feasible at
  objective 1, which nothing can beat.

Batch mode (`--param mode`): auto trains full batch (the paper's; always
with protocol=authors) while rows x activations per row (inputs plus every
layer's outputs) stay under 5e7, i.e. while one batch fits in memory: every
benchmark set, MLP included. Mini-batch mode is for data too large for
that: it keeps s, its Adam state
and mu on the device as whole tensors and updates only the batch's rows,
with the metric computed on all of s (cheap: no network pass) and an exact
full pass over the data at each outer iteration for the mu updates.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.operating_point.search import search
from dmocli.solvers.base import FitContext, FitResult, InMemorySolver, SplitData, seed_everything
from dmocli.solvers.boosting import check_model_params
from dmocli.solvers.ero.settings import EroParams, Settings, settings_for

if TYPE_CHECKING:  # torch is imported where a fit makes tensors: `dmo solvers` and `dmo check` start without it
    import torch

    from dmocli.engines.torch_distributed import OneProcess, ProcessGroup
    from dmocli.solvers.ero.penalty import Penalties, RowAdam
    from dmocli.solvers.selection import BestIterate, Evaluation


# The torch network's optimizer and batch settings: trees take boosting rounds and their own --params instead.
TORCH_ONLY = ("warm_steps", "warm_lr", "warm_epochs", "inner_steps", "inner_epochs", "lr", "mode", "batch_size")


class ERO(InMemorySolver):
    name = "ero"
    summary = "exact reformulation + l1 exact penalty (Peng et al.): direct FPOR/FROP/OFBS training"
    distributed = True
    models = ("linear", "mlp", "gbdt")

    Params = EroParams

    def settings(self, params: EroParams, model: str) -> Settings:
        """The preset for `params.protocol` and the model kind, with explicitly given values on top (trees take
        the linear model's penalty schedule: their warm start is a fitted model too)."""
        return settings_for(params, "linear" if model == "gbdt" else model)

    def check_params(self, params: EroParams, model: str) -> None:
        check_model_params(params, model, TORCH_ONLY if model == "gbdt" else ())
        self.settings(params, model)

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        """The warm start, the initial s, then the outer penalty iterations; the iterate kept is the selection
        rule's (see the module docstring)."""
        from dmocli.engines.torch_distributed import OneProcess
        from dmocli.models.networks import build_network
        from dmocli.solvers.ero.penalty import Penalties, RowAdam
        from dmocli.solvers.ero.penalty_boosting import fit_ero_trees
        from dmocli.solvers.ero.warm_start import warm_start
        from dmocli.solvers.selection import BestIterate, WithinNoiseIterate, evaluate_decision

        started = time.perf_counter()
        p = ctx.params
        problem = ctx.problem
        cfg = self.settings(p, ctx.architecture.kind)
        if ctx.architecture.kind == "gbdt":  # boosting rounds in place of the network's Adam steps (docs/ero.md)
            return fit_ero_trees(train, val, ctx, cfg=cfg, rounds_per_outer=p.tree_rounds, s_steps=p.s_steps)
        generator = seed_everything(ctx.seed)
        rows = ctx.group if ctx.group is not None else OneProcess()
        train, monitor, monitor_name = _monitor_split(train, val, folding=p.folding, fold=p.fold, seed=ctx.seed)
        positive = train.y == 1
        n, n_pos = rows.sum_int(train.n), rows.sum_int(int(positive.sum()))  # over every process's rows
        if n_pos == 0 or n_pos == n:
            raise DmoError("ERO needs both classes in the training data")
        network = build_network(ctx.architecture).to(ctx.device)
        full, batch = _batch_plan(network, train, p=p, rows=rows, n=n)
        warm = warm_start(network, train, monitor, ctx=ctx, cfg=cfg, batch=batch, generator=generator, rows=rows)
        network = warm.network
        rows.broadcast_parameters(network)  # BatchNorm statistics: rank 0's, so every process judges one network
        s = _initial_s(network, train, problem=problem, init=cfg.init, generator=generator, rows=rows)
        warm_seconds = time.perf_counter() - started
        run = _Run(
            network, train, monitor, monitor_name, cfg, problem, ctx.group, rows, generator, batch, positive, n, n_pos
        )
        penalties = Penalties(positive, n, n_pos, cfg)
        s_adam = RowAdam(train.n, ctx.device)
        best = WithinNoiseIterate(network, problem) if cfg.selection == "within-noise" else BestIterate(network)
        warm_train = evaluate_decision(network, train.X, train.y, problem=problem, group=ctx.group)
        _offer(best, _judged(cfg, run.monitored(), warm_train), 0, warm_train)
        history, steps_total = _penalty_phase(run, s, s_adam=s_adam, penalties=penalties, best=best, name=self.name)
        best.restore()
        network.eval()
        final = evaluate_decision(network, train.X, train.y, problem=problem, group=ctx.group)
        last = history[-1] if history else {}
        trace = {
            "protocol": p.protocol,
            "settings": vars(cfg),
            "mode": "full" if full else "minibatch",
            "batch_size": batch,
            # under torchrun batch_size is each process's: a step takes that many from each
            "processes": rows.world_size,
            "monitored_split": monitor_name,
            "selected_on": "train" if cfg.selection == "train" else monitor_name,
            "warm_start_steps": warm.steps,
            "warm_start_train_objective": warm_train.objective,
            "warm_start_monitor": warm.monitor,
            "outer_iterations": len(history),
            "inner_steps_total": steps_total,
            "selected_outer": best.best_step,
            "selected": best.best.to_dict() if best.best else None,
            "final_constraint_violations": {
                "n_rows_violating": last.get("n_violating"),
                "max_row_violation": last.get("max_violation"),
                "metric_gap_on_s": last.get("metric_gap_on_s"),
            },
            "penalty_parameters": penalties.summary(rows.gather_rows(penalties.mu)),
            "train_before_ta": final.to_dict(),
            "warm_start_seconds": warm_seconds,
            "seconds": time.perf_counter() - started,
            "history": history,
        }
        return FitResult(network=network, threshold=0.0, trace=trace)


@dataclass
class _Run:
    """What every outer iteration of the penalty phase works on: the network, the rows it trains on and the
    ones its iterates are judged on, the settings, and how the rows are drawn and summed over processes."""

    network: torch.nn.Module
    train: SplitData
    monitor: SplitData
    monitor_name: str
    cfg: Settings
    problem: Any
    group: ProcessGroup | None
    rows: ProcessGroup | OneProcess
    generator: torch.Generator
    batch: int
    positive: torch.Tensor  # train.y == 1
    n: int  # training rows over every process
    n_pos: int

    def monitored(self) -> Evaluation:
        """The current network on the monitored split."""
        return _evaluate(self.network, self.monitor, train=self.train, problem=self.problem, group=self.group)


def _batch_plan(
    network: torch.nn.Module, train: SplitData, *, p: EroParams, rows: ProcessGroup | OneProcess, n: int
) -> tuple[bool, int]:
    """(full batch?, rows a step takes on each process): full batch while rows x activations per row stay under
    `full-batch-max-activations` (one batch fits in memory), or always with protocol=authors."""
    import torch

    per_process = rows.largest_share(n)
    activations = per_process * (
        train.X.shape[1] + sum(m.out_features for m in network.modules() if isinstance(m, torch.nn.Linear))
    )
    full = p.mode == "full" or (
        p.mode == "auto" and (p.protocol == "authors" or activations <= p.full_batch_max_activations)
    )
    batch = (
        per_process
        if full
        else min(per_process, p.batch_size if p.batch_size > 0 else min(max(per_process // 8, 256), 8192))
    )
    return full, batch


def _penalty_phase(
    run: _Run, s: torch.Tensor, *, s_adam: RowAdam, penalties: Penalties, best: BestIterate, name: str
) -> tuple[list[dict[str, Any]], int]:
    """The outer iterations (history, inner steps in all): each an inner solve, an exact full pass for the
    penalty update, and the iterate offered for selection; stopped once train-feasible and stale for
    `outer-patience` iterations, or unbeatable."""
    cfg = run.cfg
    history: list[dict[str, Any]] = []
    steps_total, stale = 0, 0
    with progress.task(name, total=cfg.outer, unit="outer iterations") as bar:
        for outer in range(1, cfg.outer + 1):
            record, improved, feasible = _outer_iteration(
                run, s, outer=outer, s_adam=s_adam, penalties=penalties, best=best
            )
            record = {"outer": outer, **record}
            steps_total += record["steps"]
            history.append(record)
            stale = 0 if improved else stale + 1
            bar.advance(
                1,
                train_objective=record["train_objective"],
                violating_rows=record["n_violating"],
                max_violation=record["max_violation"],
            )
            if cfg.outer_patience and (feasible and stale >= cfg.outer_patience or _unbeatable(cfg, best)):
                break
    return history, steps_total


def _outer_iteration(
    run: _Run, s: torch.Tensor, *, outer: int, s_adam: RowAdam, penalties: Penalties, best: BestIterate
) -> tuple[dict[str, Any], bool, bool]:
    """One outer iteration: (its history record, whether the selection rule kept its iterate, whether it is
    train-feasible with every row's identity and the metric constraint on s met)."""
    import torch

    from dmocli.models.networks import logits_of
    from dmocli.solvers.ero.penalty import inner_solve, outer_record
    from dmocli.solvers.relaxation import metric_terms, soft_counts, violations
    from dmocli.solvers.selection import evaluate_decision

    cfg, rows, network, train, problem = run.cfg, run.rows, run.network, run.train, run.problem
    positive = run.positive
    outer_started = time.perf_counter()
    steps = inner_solve(
        network,
        s,
        s_adam=s_adam,
        train=train,
        problem=problem,
        weights=penalties.row_weights(),
        mu0=penalties.mu0,
        cfg=cfg,
        batch=run.batch,
        generator=run.generator,
        rows=rows,
        n=run.n,
        n_pos=run.n_pos,
    )
    rows.broadcast_parameters(network)
    # Exact full pass: violations, metric constraint on s, then the outer update rule.
    with torch.no_grad():
        train_logits = logits_of(network, train.X).float()
        z = torch.sigmoid(train_logits) - 0.5
        c = violations(s, z, positive)
        violating = c > cfg.violation_tol
        tp, fp = rows.sum(torch.stack(soft_counts(s, positive)))
        objective, gap = metric_terms(problem, tp, fp, run.n_pos)
        gap_value = float(gap) if gap is not None else 0.0
        n_violating = rows.sum_int(int(violating.sum()))
        max_violation = float(rows.max(c.max()))
    penalties.update(violating, gap_value)
    with _bias_projected(network, train_logits, y=train.y, problem=problem, enabled=cfg.bias_projection, rows=rows):
        train_eval = evaluate_decision(network, train.X, train.y, problem=problem, group=run.group)
        monitored = run.monitored()
        improved = _offer(best, _judged(cfg, monitored, train_eval), outer, train_eval)
    record = {
        "steps": steps,
        **outer_record(
            seconds=time.perf_counter() - outer_started,
            n_violating=n_violating,
            max_violation=max_violation,
            gap=gap_value,
            objective=float(objective),
            train_eval=train_eval,
            monitored=monitored,
            monitor_name=run.monitor_name,
        ),
    }
    train_feasible = train_eval.feasible is not False and n_violating == 0 and gap_value <= 0
    return record, improved, train_feasible


def _evaluate(
    network: torch.nn.Module, split: SplitData, *, train: SplitData, problem, group: ProcessGroup | None
) -> Evaluation:
    """evaluate_decision on the monitored split: summed over the processes when it is the (sharded) training
    split; --val is whole on every process, and rank 0's counts are taken."""
    from dmocli.solvers.selection import evaluate_decision

    return evaluate_decision(network, split.X, split.y, problem=problem, group=group, sharded=split is train)


def _judged(cfg: Settings, monitored: Evaluation, train_eval: Evaluation) -> Evaluation:
    """The evaluation an iterate is selected by: train's with selection=train, else the monitored split's."""
    return train_eval if cfg.selection == "train" else monitored


def _unbeatable(cfg: Settings, best: BestIterate) -> bool:
    """selection=train: the kept iterate is train-feasible at objective 1, which no later iterate can exceed."""
    return (
        cfg.selection == "train"
        and best.best is not None
        and best.best.feasible is not False
        and best.best.objective >= 1.0
    )


def _offer(best: BestIterate, monitored: Evaluation, step: int, train_eval: Evaluation) -> bool:
    """Offer an iterate to either selection rule (only WithinNoiseIterate uses the train objective)."""
    from dmocli.solvers.selection import WithinNoiseIterate

    if isinstance(best, WithinNoiseIterate):
        return best.offer(monitored, step, train_feasible=train_eval.feasible, train_objective=train_eval.objective)
    return best.offer(monitored, step, train_feasible=train_eval.feasible)


def _initial_s(
    network: torch.nn.Module,
    train: SplitData,
    *,
    problem,
    init: str,
    generator: torch.Generator,
    rows: ProcessGroup | OneProcess,
) -> torch.Tensor:
    """s at the start of the penalty phase (see the module docstring for `ta`)."""
    import torch

    from dmocli.models.networks import logits_of

    with torch.no_grad():
        if init == "random":  # one draw for every process's rows, this process's slice: as one process would draw
            shares = rows.gather_rows(torch.tensor([train.n])).tolist()
            start = sum(shares[: rows.rank])
            return torch.rand(sum(shares), generator=generator)[start : start + train.n].to(train.X.device)
        logits = logits_of(network, train.X).float()
        if init == "ta":
            point = _train_search(logits, train.y, problem, rows)
            if np.isfinite(point.threshold):
                _output_layer(network).bias -= point.threshold
                logits = logits - point.threshold
        return (logits >= 0).float()


@contextmanager
def _bias_projected(
    network: torch.nn.Module,
    logits: torch.Tensor,
    *,
    y: torch.Tensor,
    problem,
    enabled: bool,
    rows: ProcessGroup | OneProcess,
) -> Iterator[None]:
    """Temporarily move the output bias to the exact best train threshold of the current scores.

    The penalty iterations continue from the unmoved model; only the iterate
    offered for selection is projected, so a model whose ranking is good but
    whose decision sits just on the wrong side of the target is judged (and
    kept) at its best train-feasible bias. This is a block-coordinate step
    on the train problem itself, not a TA on held-out data.
    """
    import torch

    if not enabled:
        yield
        return
    point = _train_search(logits, y, problem, rows)
    last = _output_layer(network)
    shift = point.threshold if np.isfinite(point.threshold) else 0.0
    with torch.no_grad():
        last.bias -= shift
    try:
        yield
    finally:
        with torch.no_grad():
            last.bias += shift


def _train_search(logits: torch.Tensor, y: torch.Tensor, problem, rows: ProcessGroup | OneProcess):
    """The exact threshold search on the training logits of every process (gathered: each runs the same search)."""
    return search(rows.gather_rows(logits).cpu().numpy(), rows.gather_rows(y).cpu().numpy(), problem)


def _output_layer(network: torch.nn.Module) -> torch.nn.Linear:
    import torch

    return [m for m in network.modules() if isinstance(m, torch.nn.Linear)][-1]


def _monitor_split(
    train: SplitData, val: SplitData | None, *, folding: int, fold: int, seed: int
) -> tuple[SplitData, SplitData, str]:
    """(rows to train on, rows to select the iterate on, their name)."""
    if val is not None and val.n > 0:
        return train, val, "val"
    if folding >= 2:
        if not 0 <= fold < folding:
            raise DmoError(f"--param fold={fold} must be in 0..{folding - 1} with folding={folding}")
        positives = int((train.y == 1).sum())
        smaller = min(positives, int((train.y == 0).sum()))
        if folding > smaller:  # as scikit-learn's StratifiedKFold: every fold gets a row of each class
            fix = f"use --folding {smaller} or fewer, or --val FILE" if smaller >= 2 else "use --val FILE"
            raise DmoError(
                f"--folding {folding} is more folds than the {smaller} training rows of the smaller "
                f"class (each fold needs a row of each class); {fix}"
            )
        held = _fold_mask(train.y.cpu(), folding, fold, seed).to(train.X.device)
        return (
            SplitData(train.X[~held], train.y[~held]),
            SplitData(train.X[held], train.y[held]),
            f"fold{fold}of{folding}",
        )
    return train, train, "train"


def _fold_mask(y: torch.Tensor, k: int, fold: int, seed: int) -> torch.Tensor:
    """Rows of fold `fold` in a stratified K-fold partition (each class shuffled, dealt round-robin)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    fold_of = torch.empty_like(y)
    for label in (0, 1):
        rows = torch.nonzero(y == label).squeeze(-1)
        order = rows[torch.randperm(rows.numel(), generator=generator)]
        fold_of[order] = torch.arange(order.numel()) % k
    return fold_of == fold
