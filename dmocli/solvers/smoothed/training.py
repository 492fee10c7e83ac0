"""The training loop shared by the sigmoid-smoothed baselines (sigmoid-f1, lagrangian).

Both replace each prediction 1{g(x) > t} by a sigmoid, compute soft TP/FP
counts (batch counts scaled by n/b in mini-batch mode, so rates keep their
full-data scale), and take Adam steps on a loss built from them. The
iterate kept is the best by true metrics at logit 0 on the monitored split
(see solvers/selection.py), checked every `eval_every` steps. Under torchrun the
soft counts and the batch size are summed over the processes at every step,
each process's share carrying its gradient, and the gradients are summed:
the one-process step on the union of the processes' batches (BatchNorm
aside: it normalizes each process's batch on its own, as DDP does).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from dmocli import progress
from dmocli.operating_point.problems import Problem
from dmocli.solvers.base import FitContext, FitResult, SolverParams, SplitData, seed_everything

if TYPE_CHECKING:  # torch is imported where a fit makes tensors: `dmo solvers` and `dmo check` start without it
    import torch

    from dmocli.engines.torch_distributed import OneProcess, ProcessGroup

    LossFn = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


@dataclass
class LoopSettings(SolverParams):
    """Hyper-parameters of the shared loop; each smoothed solver's Params extends this."""

    lr: float = field(default=1e-2, metadata={"positive": True, "help": "Adam learning rate for the model"})
    steps: int = field(default=2000, metadata={"min": 1, "help": "max Adam steps"})
    batch_size: int = field(default=0, metadata={"min": 0, "help": "rows per step (0: full batch)"})
    eval_every: int = field(default=20, metadata={"min": 1, "help": "steps between checks of the monitored metrics"})
    patience: int = field(default=15, metadata={"min": 0, "help": "checks without a better iterate before stopping"})


def fit_smoothed(
    train: SplitData,
    val: SplitData | None,
    ctx: FitContext,
    *,
    soft_prediction: Callable[[torch.Tensor], torch.Tensor],
    loss_of: LossFn,
    loop: LoopSettings,
    after_step: Callable[[], None] | None = None,
    name: str = "smoothed",
) -> FitResult:
    """Adam on loss_of(soft TP, soft FP, n_pos); returns the best monitored iterate with threshold 0. `name` labels
    the progress line."""

    from dmocli.engines.torch_distributed import OneProcess
    from dmocli.models.networks import build_network
    from dmocli.solvers.loop import adam, endless_minibatches
    from dmocli.solvers.relaxation import soft_counts
    from dmocli.solvers.selection import BestIterate, evaluate_decision

    started = time.perf_counter()
    problem: Problem = ctx.problem
    generator = seed_everything(ctx.seed)
    network = build_network(ctx.architecture).to(ctx.device)
    optimizer = adam(network.parameters(), lr=loop.lr)
    monitor, monitor_name = (val, "val") if val is not None and val.n > 0 else (train, "train")
    group = ctx.group
    rows = group if group is not None else OneProcess()
    positive = train.y == 1
    n, n_pos = rows.sum_int(train.n), float(rows.sum_int(int(positive.sum())))  # over every process's rows
    per_process = rows.largest_share(n)
    batch = per_process if loop.batch_size <= 0 else min(loop.batch_size, per_process)
    best = BestIterate(network)
    stale, step = 0, 0
    batches = endless_minibatches(train.n, batch, generator, ctx.device)
    with progress.task(name, total=loop.steps, unit="steps") as bar:
        while step < loop.steps and stale < loop.patience:
            picked = next(batches)
            network.train()
            optimizer.zero_grad(set_to_none=True)
            q = soft_prediction(network(train.X[picked]).squeeze(-1))
            tp, fp, batch_rows = _pooled(rows, *soft_counts(q, positive[picked]), picked.numel())
            scale = n / batch_rows
            loss = loss_of(tp * scale, fp * scale, n_pos)
            loss.backward()
            rows.sum_gradients(network.parameters())
            optimizer.step()
            if after_step is not None:
                after_step()
            step += 1
            if step % loop.eval_every == 0 or step == loop.steps:
                rows.broadcast_parameters(network)  # BatchNorm statistics: rank 0's, so every process keeps one iterate
                judged = evaluate_decision(
                    network, monitor.X, monitor.y, problem=problem, group=group, sharded=monitor is train
                )
                stale = 0 if best.offer(judged, step) else stale + 1
                bar.update(step, monitored_objective=judged.objective)
    best.restore()
    network.eval()
    final = evaluate_decision(network, train.X, train.y, problem=problem, group=group)
    trace = {
        "steps": step,
        "batch_size": batch,
        "processes": rows.world_size,
        "monitored_split": monitor_name,
        "selected_step": best.best_step,
        "selected": best.best.to_dict() if best.best else None,
        "train_before_ta": final.to_dict(),
        "seconds": time.perf_counter() - started,
    }
    return FitResult(network=network, threshold=0.0, trace=trace)


def _pooled(
    rows: ProcessGroup | OneProcess, tp: torch.Tensor, fp: torch.Tensor, batch_rows: int
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The soft counts of every process's batch (one process: its own, the same floats), each process's share
    carrying its gradient, and the batch's rows over every process; float64 on the wire keeps the row count exact."""
    import torch

    summed = rows.sum(
        torch.stack([tp.detach().double(), fp.detach().double(), tp.new_tensor(batch_rows, dtype=torch.float64)])
    )
    tp = summed[0].to(tp.dtype) + (tp - tp.detach())
    fp = summed[1].to(fp.dtype) + (fp - fp.detach())
    return tp, fp, float(summed[2])
