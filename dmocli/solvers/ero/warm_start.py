"""ERO's warm start: the point the penalty phase starts from (docs/algorithms.md#ero). Either the wce solver's fit
(protocols fast and thorough: the exact class-balanced optimum for linear, early-stopped Adam for an MLP) or the
authors' plain BCE by Adam; kept apart from the penalty phase (solver.py), which only needs the fitted network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from dmocli import progress
from dmocli.engines.torch_distributed import OneProcess
from dmocli.errors import DmoError
from dmocli.solvers.base import FitContext, SplitData
from dmocli.solvers.ero.settings import Settings
from dmocli.solvers.loop import EarlyStopping, adam, endless_minibatches
from dmocli.solvers.wce import WeightedCrossEntropy

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup


@dataclass
class WarmStart:
    """The warm-started network (wce's fit replaces the built one), its steps (epochs or L-BFGS iterations for
    wce) and the split its early stopping watched."""

    network: torch.nn.Module
    steps: int
    monitor: str | None


def warm_start(
    network: torch.nn.Module,
    train: SplitData,
    monitor: SplitData,
    *,
    ctx: FitContext,
    cfg: Settings,
    batch: int,
    generator: torch.Generator,
    rows: ProcessGroup | OneProcess,
) -> WarmStart:
    """The warm start: the wce solver's fit (fast, thorough), or the authors' plain BCE by Adam on `network`."""
    if cfg.warm_start != "wce":
        return WarmStart(
            network, bce_warm_start(network, train, cfg=cfg, batch=batch, generator=generator, rows=rows), "train"
        )
    wce = WeightedCrossEntropy()
    if cfg.warm_monitor == "val" and monitor is train:
        raise DmoError(
            "--param warm-monitor=val early-stops the warm start on a validation split; give --val, "
            "--val-frac or --folding, or drop it"
        )
    on_val = cfg.warm_monitor == "val" or (cfg.warm_monitor == "auto" and monitor is not train)
    # Without a monitored split the warm start watches the training loss, as the authors' does: wce's own
    # held-out stop-frac would fit the warm start on fewer rows than ERO then trains on.
    wce_params = (
        wce.Params(patience=max(1, cfg.warm_patience // 4), max_epochs=cfg.warm_epochs, stop_frac=0.0)  # epochs
        if ctx.architecture.kind != "linear"
        else wce.Params()
    )  # linear: the exact optimum
    fitted = wce.fit(train, monitor if on_val else None, replace(ctx, params=wce_params))
    steps = fitted.trace.get("epochs", fitted.trace.get("iterations", 0))  # adam | lbfgs
    # adam's early-stopping split; lbfgs (the exact optimum): none
    return WarmStart(fitted.network, steps, fitted.trace.get("monitored_split"))


def bce_warm_start(
    network: torch.nn.Module,
    train: SplitData,
    *,
    cfg: Settings,
    batch: int,
    generator: torch.Generator,
    rows: ProcessGroup | OneProcess | None = None,
) -> int:
    """BCE (class-balanced if asked) by Adam with early stopping on the training loss; returns steps taken.
    Under torchrun (`rows`) the processes' gradients and losses are averaged at every step, as DDP does."""
    if cfg.warm_steps <= 0:
        return 0
    rows = rows if rows is not None else OneProcess()
    y = train.y.float()
    n, n_pos = rows.sum_int(train.n), float(rows.sum(y.sum()))
    weight = torch.where(train.y == 1, n / (2 * n_pos), n / (2 * (n - n_pos))) if cfg.warm_balanced else None
    optimizer = adam(network.parameters(), lr=cfg.warm_lr)
    # Mini-batch mode judges the mean loss of each epoch: single batch losses are too noisy to keep weights by.
    per_check = math.ceil(rows.largest_share(n) / batch)
    stopper = EarlyStopping(
        network, patience=max(1, cfg.warm_patience // per_check) if per_check > 1 else cfg.warm_patience
    )
    rows_iter = endless_minibatches(train.n, batch, generator, train.X.device)
    network.train()
    steps, since_check = 0, 0
    running = torch.zeros((), device=train.X.device)  # summed on the device: no host sync per step
    with progress.task("ero warm start", total=cfg.warm_steps, unit="steps") as bar:
        for steps in range(1, cfg.warm_steps + 1):
            picked = next(rows_iter)
            optimizer.zero_grad(set_to_none=True)
            loss = (
                F.binary_cross_entropy_with_logits(
                    network(train.X[picked]).squeeze(-1), y[picked], weight=None if weight is None else weight[picked]
                )
                / rows.world_size
            )
            loss.backward()
            rows.sum_gradients(network.parameters())
            optimizer.step()
            running += loss.detach()
            since_check += 1
            # A budget shorter than one epoch (mini-batch mode on large data) never reaches an epoch's check: judge
            # its last step then, or restore() would bring back the untrained weights. Otherwise only whole epochs
            # are judged, as before (a partial epoch's mean is not comparable with theirs).
            if since_check == per_check or (steps == cfg.warm_steps and math.isinf(stopper.best)):
                rows.broadcast_parameters(network)  # the stopper keeps rank 0's BatchNorm statistics everywhere
                judged = float(rows.sum(running)) / since_check
                bar.advance(since_check, loss=judged)
                if stopper.step(judged):
                    break
                running.zero_()
                since_check = 0
    stopper.restore()
    return steps
