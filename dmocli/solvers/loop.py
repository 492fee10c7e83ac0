"""Small training-loop pieces shared by the gradient-based solvers."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import torch

from dmocli import progress
from dmocli.errors import DmoError

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup

FLOAT64_MAX_VALUES = 2**25  # feature values up to which the CPU L-BFGS fit runs in float64 (a 256 MB copy)


def adam(parameters: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam, fused into a few kernels per step when every parameter is on CUDA.

    These networks are small, so a GPU step is bound by kernel launches and
    Python dispatch, not arithmetic (an H100 profile of a 10x100 MLP step:
    ~9 ms of host time for ~0.8 ms of kernels); the default multi-tensor
    Adam was about a sixth of that host time. On CPU torch's default is kept.
    """
    parameters = list(parameters)
    fused = bool(parameters) and all(p.is_cuda for p in parameters)
    return torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay, fused=True if fused else None)


def minibatches(n: int, batch_size: int, generator: torch.Generator, device: torch.device) -> Iterator[torch.Tensor]:
    """Row indices of one shuffled epoch; a single full batch when batch_size >= n. A last batch of one row
    joins the one before: BatchNorm cannot train on a single row (65 rows in batches of 32 failed)."""
    if batch_size >= n:
        yield torch.arange(n, device=device)
        return
    order = torch.randperm(n, generator=generator).to(device)
    for start in range(0, n, batch_size):
        stop = n if n - (start + batch_size) == 1 else start + batch_size
        yield order[start:stop]
        if stop == n:
            return


def endless_minibatches(
    n: int, batch_size: int, generator: torch.Generator, device: torch.device
) -> Iterator[torch.Tensor]:
    """minibatches, epoch after epoch: a loop counting steps, not epochs, takes as many on every process of a
    torchrun group whatever the size of each process's share."""
    while True:
        yield from minibatches(n, batch_size, generator, device)


def refuse_single_row_batches(network: torch.nn.Module, batch_size: int) -> None:
    """BatchNorm cannot train on one row (torch raises mid-fit): refuse --param batch-size=1 up front."""
    if batch_size < 2 and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in network.modules()):
        raise DmoError(
            "--param batch-size=1 cannot train the MLP: its BatchNorm layers need at least 2 rows per "
            "batch; use 2 or more"
        )


def refresh_batchnorm(network: torch.nn.Module, X: torch.Tensor, chunk_rows: int = 65536) -> None:
    """Set every BatchNorm layer's running statistics to those of `X` under the current weights (no-op
    without BatchNorm), so that an eval-mode judgement sees the network training has made. Momentum 0.1
    leaves them stale after few steps: with one or two batches per epoch (a few hundred or thousand rows),
    a 10-layer MLP in eval mode gave a constant output, early stopping read a rising loss and kept the
    first epoch's weights. torch's own update_bn (the SWA utility) does the pass."""
    from torch.optim.swa_utils import update_bn

    was_training = network.training
    with torch.no_grad():
        update_bn([X[start : start + chunk_rows] for start in range(0, X.shape[0], chunk_rows)], network)
    network.train(was_training)


class EarlyStopping:
    """Track the best monitored loss, keep a copy of the best weights, say when patience runs out."""

    def __init__(self, network: torch.nn.Module, patience: int, min_delta: float = 1e-6):
        self.network = network
        self.patience = patience
        self.min_delta = min_delta
        self.best = float("inf")
        self.bad_steps = 0
        self.steps = 0
        self.best_step = 0  # 1-based: the step whose weights restore() brings back
        self.best_state = copy.deepcopy(network.state_dict())

    def step(self, value: float) -> bool:
        """Record a value; True when training should stop."""
        improved = value < self.best - self.min_delta * max(1.0, abs(self.best)) if self.best < float("inf") else True
        self.steps += 1
        if improved:
            self.best = value
            self.best_step = self.steps
            self.bad_steps = 0
            self.best_state = copy.deepcopy(self.network.state_dict())
            return False
        self.bad_steps += 1
        return self.bad_steps >= self.patience

    def restore(self) -> None:
        self.network.load_state_dict(self.best_state)


def lbfgs_dtype(X: torch.Tensor, group: ProcessGroup | None = None) -> torch.dtype:
    """The dtype fit_linear_lbfgs computes in for X; callers cast their per-row tensors (offsets) to it once,
    not at every loss evaluation. Under torchrun it counts every process's values, so all sum in one dtype."""
    values = X.numel() if group is None else group.sum_int(X.numel())
    return torch.float64 if X.device.type == "cpu" and values <= FLOAT64_MAX_VALUES else torch.float32


def fit_linear_lbfgs(
    network: torch.nn.Sequential,
    X: torch.Tensor,
    *,
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    l2: float,
    max_iter: int,
    group: ProcessGroup | None = None,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Minimize loss_of(network(X)) + l2/2 ||W||^2 for a linear network by full-batch L-BFGS, to convergence.

    The loss of a linear model under (weighted) cross-entropy is convex, so a quasi-Newton method reaches its
    optimum in tens of full passes, where Adam mini-batches need hundreds of epochs for a worse value (2M x 50
    rows: 13 L-BFGS iterations in 1.3 s against 78 Adam epochs in 134 s). Starts from zero (the
    minimum-norm solution of the shift-invariant softmax). float64 on CPU while X has at most
    FLOAT64_MAX_VALUES values, float32 beyond (and on CUDA), so the copy never outgrows the data much.
    loss_of receives the logits in that dtype. Returns a float32 network in eval mode and a trace.

    With a torchrun `group`, X is this process's share of the rows and loss_of its share of the loss (its rows'
    sum over every process's row count): the shares and their gradients are summed over the group before each
    L-BFGS step, so every process takes the same steps to the same optimum one process would reach.
    """
    dtype = lbfgs_dtype(X, group)
    network = network.to(dtype)
    for tensor in network.parameters():
        torch.nn.init.zeros_(tensor)
    Xd = X.to(dtype)
    weight = network[0].weight
    optimizer = torch.optim.LBFGS(
        network.parameters(),
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def data_loss(loss: torch.Tensor) -> torch.Tensor:
        return loss.detach() if group is None else group.sum(loss)

    def closure() -> torch.Tensor:
        bar.advance(1)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(network(Xd))
        loss.backward()
        if group is not None:
            group.sum_gradients(network.parameters())
        with torch.no_grad():  # the penalty after the sum: counted once, not once per process
            weight.grad += l2 * weight
            return data_loss(loss) + 0.5 * l2 * (weight * weight).sum()

    with progress.task("lbfgs", unit="loss evaluations") as bar:
        optimizer.step(closure)
    if group is not None:
        group.broadcast_parameters(network)
    with torch.no_grad():
        final = float(data_loss(loss_of(network(Xd))) + 0.5 * l2 * (weight * weight).sum())
    state = optimizer.state[weight]
    return network.float().eval(), {
        "optimizer": "lbfgs",
        "iterations": int(state.get("n_iter", 0)),
        "objective": final,
        "l2": l2,
        "dtype": str(dtype).replace("torch.", ""),
    }
