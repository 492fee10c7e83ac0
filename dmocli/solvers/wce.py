"""Weighted cross-entropy: the plain baseline every other solver is measured against.

Binary: BCE with rows weighted by inverse class frequency (decision at
logit 0 before threshold adjustment). Multi-class: class-weighted softmax CE.
Adam, mini-batches, early stopping on validation loss (train loss if no
validation split), best weights restored. On a `dmo subsample` file the
per-class log acceptance offsets are added to the logits during training.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..networks import build_network, logits_of
from .base import (FitContext, FitResult, SplitData, Solver, inverse_frequency_weights, offset_logits,
                   seed_everything)
from .loop import EarlyStopping, adam, minibatches


class WeightedCrossEntropy(Solver):
    name = "wce"
    summary = "weighted cross-entropy (inverse class frequency), then exact threshold adjustment"
    multiclass = True
    binary_only = False
    uses_offsets = True

    @dataclass
    class Params:
        lr: float = field(default=3e-3, metadata={"positive": True, "help": "Adam learning rate"})
        weight_decay: float = field(default=0.0, metadata={"min": 0, "help": "Adam weight decay (L2)"})
        batch_size: int = field(default=1024, metadata={"min": 1, "help": "rows per mini-batch"})
        max_epochs: int = field(default=300, metadata={"min": 1, "help": "upper bound on passes over the data"})
        patience: int = field(default=20, metadata={"min": 0, "help": "epochs without improvement before stopping"})
        balanced: bool = field(default=True, metadata={"help": "weight rows by inverse class frequency"})

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        p = ctx.params
        generator = seed_everything(ctx.seed)
        network = build_network(ctx.architecture).to(ctx.device)
        n_classes = max(2, ctx.architecture.n_outputs)
        weights = inverse_frequency_weights(train.y.cpu(), n_classes).to(ctx.device) if p.balanced else None

        def loss_of(raw_logits: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor | None) -> torch.Tensor:
            logits = offset_logits(raw_logits, offsets)
            if ctx.architecture.n_outputs == 1:
                row_w = weights[y] if weights is not None else None
                return F.binary_cross_entropy_with_logits(logits.squeeze(-1), y.float(), weight=row_w)
            return F.cross_entropy(logits, y, weight=weights)

        optimizer = adam(network.parameters(), lr=p.lr, weight_decay=p.weight_decay)
        monitor = val if val is not None and val.n > 0 else train
        stopper = EarlyStopping(network, patience=p.patience)
        epochs = 0
        offsets = train.extra.get("offsets")
        for epoch in range(p.max_epochs):
            network.train()
            for idx in minibatches(train.n, p.batch_size, generator, ctx.device):
                optimizer.zero_grad(set_to_none=True)
                loss = loss_of(network(train.X[idx]), train.y[idx], None if offsets is None else offsets[idx])
                loss.backward()
                optimizer.step()
            with torch.no_grad():  # logits in chunks: inference memory stays bounded on a large split
                monitored_logits = logits_of(network, monitor.X).reshape(monitor.n, -1)
                monitored = float(loss_of(monitored_logits, monitor.y, monitor.extra.get("offsets")))
            epochs = epoch + 1
            if stopper.step(monitored):
                break
        stopper.restore()
        return FitResult(
            network=network.eval(),
            threshold=0.0 if ctx.architecture.n_outputs == 1 else None,
            trace={"epochs": epochs, "best_monitored_loss": stopper.best,
                   "monitored_split": "val" if monitor is val else "train"},
        )
