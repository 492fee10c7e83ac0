"""Weighted cross-entropy: the plain baseline every other solver is measured against.

Binary: BCE with rows weighted by inverse class frequency (decision at
logit 0 before threshold adjustment). Multi-class: class-weighted softmax CE.
On a `dmo subsample` file the per-class log acceptance offsets are added to
the logits during training.

The linear model's loss is convex, so it is minimized exactly: full-batch
L-BFGS with scikit-learn's default L2 (C = 1, i.e. l2 = 1/n on the mean
loss). The MLP uses Adam mini-batches with early stopping on the validation
loss, best weights restored. Without a validation split a stratified
`stop-frac` of the training rows is held out to stop on (a network judged on
its own training loss keeps fitting noise); under torchrun, and with
`stop-frac=0`, the training loss is monitored. After cross-fitting, the final
model trains on all rows for the folds' median best epoch (refit_params).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.prep.dataset import stopping_split
from dmocli.solvers.base import (
    FitContext,
    FitResult,
    InMemorySolver,
    SplitData,
    inverse_frequency_weights,
    offset_logits,
    seed_everything,
)
from dmocli.solvers.boosting import TreeParams, check_model_params, fit_weighted

if TYPE_CHECKING:  # torch is imported where a fit makes tensors: `dmo check` and `dmo solvers` start without it
    import torch


class WeightedCrossEntropy(InMemorySolver):
    name = "wce"
    summary = "weighted cross-entropy (inverse class frequency), then exact threshold adjustment"
    multiclass = True
    uses_offsets = True
    distributed = True
    models = ("linear", "mlp", "gbdt")
    dask_models = ("gbdt",)  # XGBoost's Dask interface (pipelines/dask_trees.py)

    @dataclass
    class Params(TreeParams):
        optimizer: str = field(
            default="auto",
            metadata={
                "choices": ("auto", "lbfgs", "adam"),
                "help": "auto (lbfgs for the linear model, adam for the MLP), lbfgs (linear only: the exact optimum) "
                "or adam",
            },
        )
        l2: float | None = field(
            default=None,
            metadata={
                "min": 0,
                "help": "lbfgs: L2 penalty l2/2 ||W||^2 on the mean loss (default 1/rows, scikit-learn's C=1)",
            },
        )
        max_iter: int = field(default=500, metadata={"min": 1, "help": "lbfgs: most iterations"})
        lr: float = field(default=3e-3, metadata={"positive": True, "help": "adam: learning rate"})
        weight_decay: float = field(default=0.0, metadata={"min": 0, "help": "adam: weight decay (L2)"})
        batch_size: int = field(default=1024, metadata={"min": 1, "help": "adam: rows per mini-batch"})
        max_epochs: int = field(default=300, metadata={"min": 1, "help": "adam: upper bound on passes over the data"})
        patience: int = field(
            default=20, metadata={"min": 0, "help": "adam: epochs without improvement before stopping"}
        )
        balanced: bool = field(default=True, metadata={"help": "weight rows by inverse class frequency"})

    def check_params(self, params: Params, model: str) -> None:
        check_model_params(params, model, TORCH_PARAMS, shared=("stop_frac",))
        if model != "gbdt":
            _optimizer(params, model)

    def refit_params(self, params: Params, fold_traces: list[dict[str, Any]]) -> Params:
        """Trees: the folds' median early-stopped rounds; adam: the folds' median best epoch, on all rows."""
        if fold_traces and all("rounds" in trace for trace in fold_traces):
            rounds = int(np.median([trace["rounds"] for trace in fold_traces]))
            # the fixed schedule's learning rate and shares, where every fold took it
            kept = {key: _shared(fold_traces, key, getattr(params, key)) for key in ("eta", "subsample", "colsample")}
            return dataclasses.replace(params, rounds=rounds, early_stopping=0, **kept)
        stopped_on_held_out = [trace.get("monitored_split") not in (None, "train") for trace in fold_traces]
        if fold_traces and all(stopped_on_held_out):
            epochs = int(np.median([trace["best_epoch"] for trace in fold_traces]))
            return dataclasses.replace(params, max_epochs=max(1, epochs), stop_frac=0.0)
        return params

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        p = ctx.params
        if ctx.architecture.kind == "gbdt":  # boosting on the class-weighted logistic loss (solvers/boosting.py)
            return fit_weighted(train, val, ctx, p.balanced)
        import torch.nn.functional as F

        from dmocli.models.networks import build_network
        from dmocli.solvers.loop import fit_linear_lbfgs, lbfgs_dtype

        group = ctx.group
        generator = seed_everything(ctx.seed)
        network = build_network(ctx.architecture).to(ctx.device)
        n_classes = max(2, ctx.architecture.n_outputs)
        weights = inverse_frequency_weights(train.y.cpu(), n_classes, group).to(ctx.device) if p.balanced else None
        n_total = train.n if group is None else group.sum_int(train.n)  # rows over every process

        def loss_of(
            raw_logits: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor | None, share_of: int | None = None
        ) -> torch.Tensor:
            """torch's (weighted) mean loss; with `share_of` (torchrun), these rows' summed loss over the rows of
            every process, so the processes' shares add up to the loss of all rows (inverse-frequency weights
            sum to the row count over the training rows, so it is the same mean there)."""
            logits = offset_logits(raw_logits, offsets)
            class_w = None if weights is None else weights.to(logits.dtype)  # float64 under the CPU L-BFGS fit
            reduction = "mean" if share_of is None else "sum"
            if ctx.architecture.n_outputs == 1:
                row_w = class_w[y] if class_w is not None else None
                loss = F.binary_cross_entropy_with_logits(
                    logits.squeeze(-1), y.to(logits.dtype), weight=row_w, reduction=reduction
                )
            else:
                loss = F.cross_entropy(logits, y, weight=class_w, reduction=reduction)
            return loss if share_of is None else loss / share_of

        offsets = train.extra.get("offsets")
        if _optimizer(p, ctx.architecture.kind) == "lbfgs":
            l2 = p.l2 if p.l2 is not None else 1.0 / n_total
            off = None if offsets is None else offsets.to(lbfgs_dtype(train.X, group))
            share_of = None if group is None else n_total
            network, trace = fit_linear_lbfgs(
                network,
                train.X,
                loss_of=lambda logits: loss_of(logits, train.y, off, share_of),
                l2=l2,
                max_iter=p.max_iter,
                group=group,
            )
            return FitResult(network=network, threshold=0.0 if ctx.architecture.n_outputs == 1 else None, trace=trace)
        return self._fit_adam(network, train, val=val, ctx=ctx, loss_of=loss_of, n_total=n_total, generator=generator)

    @staticmethod
    def _fit_adam(
        network: torch.nn.Module,
        train: SplitData,
        *,
        val: SplitData | None,
        ctx: FitContext,
        loss_of: Callable[..., torch.Tensor],
        n_total: int,
        generator: torch.Generator,
    ) -> FitResult:
        """Adam mini-batches with early stopping on the monitored loss, best weights restored. Under torchrun
        the network is wrapped in DistributedDataParallel: each step averages the processes' batch gradients
        (a global batch of processes x batch_size rows); join() lets a process whose share ends a batch
        earlier wait for the others."""
        import torch

        from dmocli.models.networks import logits_of
        from dmocli.solvers.loop import EarlyStopping, adam, minibatches, refresh_batchnorm, refuse_single_row_batches

        p, group = ctx.params, ctx.group
        refuse_single_row_batches(network, p.batch_size)
        model = network
        if group is not None:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(network, device_ids=[ctx.device] if ctx.device.type == "cuda" else None)
        optimizer = adam(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
        train, monitor, monitor_name = _monitored(train, val, ctx)
        offsets = train.extra.get("offsets")
        stopper = EarlyStopping(network, patience=p.patience)
        epochs = 0
        with progress.task("wce", total=p.max_epochs, unit="epochs") as bar:
            for epoch in range(p.max_epochs):
                model.train()
                with model.join() if group is not None else contextlib.nullcontext():
                    for idx in minibatches(train.n, p.batch_size, generator, ctx.device):
                        optimizer.zero_grad(set_to_none=True)
                        loss = loss_of(model(train.X[idx]), train.y[idx], None if offsets is None else offsets[idx])
                        loss.backward()
                        optimizer.step()
                refresh_batchnorm(network, train.X)  # the judgement below runs in eval mode
                if group is not None:  # BatchNorm's running statistics are each process's own rows': take rank 0's
                    group.broadcast_parameters(network)
                with torch.no_grad():  # logits in chunks: inference memory stays bounded on a large split
                    monitored_logits = logits_of(network, monitor.X).reshape(monitor.n, ctx.architecture.n_outputs)
                    if group is None:
                        monitored = loss_of(monitored_logits, monitor.y, monitor.extra.get("offsets"))
                    elif monitor is train:  # this process's share of the loss of every process's rows
                        monitored = group.sum(
                            loss_of(monitored_logits, monitor.y, monitor.extra.get("offsets"), n_total)
                        )
                    else:  # all of --val on every process: rank 0's value decides, so every process stops alike
                        monitored = group.from_rank_zero(
                            loss_of(monitored_logits, monitor.y, monitor.extra.get("offsets"))
                        )
                epochs = epoch + 1
                value = float(monitored)
                bar.advance(1, monitored_loss=value)
                if stopper.step(value):
                    break
        stopper.restore()
        return FitResult(
            network=network.eval(),
            threshold=0.0 if ctx.architecture.n_outputs == 1 else None,
            trace={
                "optimizer": "adam",
                "epochs": epochs,
                "best_epoch": stopper.best_step,
                "best_monitored_loss": stopper.best,
                "monitored_split": monitor_name,
            },
        )


def _monitored(train: SplitData, val: SplitData | None, ctx: FitContext) -> tuple[SplitData, SplitData, str]:
    """(rows to train on, rows early stopping judges, their name): the validation split when given; else a
    stratified `stop-frac` of the training rows in one process, when every class can spare one; else the
    training rows themselves (under torchrun each process holds only its share, and with stop-frac=0)."""
    import torch

    p = ctx.params
    if val is not None and val.n > 0:
        return train, val, "val"
    y = train.y.cpu().numpy()
    split = (
        None if ctx.group is not None else stopping_split(y, p.stop_frac, seed=ctx.seed, class_names=ctx.class_names)
    )
    if split is None:
        return train, train, "train"
    kept, held = split
    as_rows = lambda rows: torch.as_tensor(rows, device=train.X.device)  # noqa: E731
    return train.take(as_rows(kept)), train.take(as_rows(held)), f"{p.stop_frac:g} of train"


OPTIMIZER_PARAMS = {"lbfgs": ("l2", "max_iter"), "adam": ("lr", "weight_decay", "batch_size", "max_epochs", "patience")}


TORCH_PARAMS = ("optimizer", "l2", "max_iter", "lr", "weight_decay", "batch_size", "max_epochs", "patience")


def _optimizer(params: WeightedCrossEntropy.Params, model_kind: str) -> str:
    """The optimizer to use; a parameter of the other one would be ignored, so it is refused."""
    name = params.optimizer
    if name == "lbfgs" and model_kind != "linear":
        raise DmoError("--param optimizer=lbfgs fits the linear model (a convex loss); the MLP trains with adam")
    chosen = ("lbfgs" if model_kind == "linear" else "adam") if name == "auto" else name
    defaults = WeightedCrossEntropy.Params()
    for other, names in OPTIMIZER_PARAMS.items():
        ignored = [key for key in names if other != chosen and getattr(params, key) != getattr(defaults, key)]
        if ignored:
            keys = ", ".join(key.replace("_", "-") for key in ignored)
            raise DmoError(
                f"--param {keys} applies to optimizer={other}, but this {model_kind} model trains with "
                f"{chosen}; drop it, or add --param optimizer={other}"
            )
    return chosen


def _shared(fold_traces: list[dict[str, Any]], key: str, default: Any) -> Any:
    """The value of `key` every fold's trace holds (the fixed schedule's, where each fold took it), else `default`:
    the refit on all rows trains as the folds whose rounds it takes did."""
    values = {trace.get(key, default) for trace in fold_traces}
    return values.pop() if len(values) == 1 else default
