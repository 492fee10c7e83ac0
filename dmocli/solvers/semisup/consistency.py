"""The FixMatch training loop shared by `fixmatch` (one fixed threshold) and `adsh` (per-class thresholds).

Per step (docs/algorithms.md#adsh): L = L_s + lambda_u L_u, with L_s the
cross-entropy of a labeled batch of B rows (weak view; with balanced=true
weighted by inverse labeled class frequency exactly like `wce`, so that a
comparison with the class-weighted supervised baseline changes only the
unlabeled term) and
  L_u = 1/(mu B) sum_b 1{max_k q_bk >= tau_{yhat_b}} CE(yhat_b, f(A(x_b))),
q_b = softmax f(alpha(x_b)) (weak view, no gradient), yhat_b = argmax q_b.
The two solvers differ only in how the per-class thresholds tau change once
per epoch (an epoch is `steps_per_epoch` optimizer steps; the paper updates
every 512 iterations). A threshold of exactly 1.0 selects nothing, so
thresholds at 1.0 switch the unlabeled loss off even when a saturated softmax
returns a confidence of 1.0.

Weights are averaged (EMA); the returned network (evaluation, threshold
adjustment, the saved model) is the EMA network. Binary problems (one logit
z) use the two-class distribution (1 - sigmoid z, sigmoid z).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.operating_point.metrics import multiclass_scores
from dmocli.operating_point.problems import safe_div
from dmocli.solvers.base import (
    FitContext,
    FitResult,
    InMemorySolver,
    SolverParams,
    SplitData,
    inverse_frequency_weights,
    seed_everything,
)
from dmocli.solvers.semisup.feature_views import VIEW_MODES, FeatureViews

if TYPE_CHECKING:  # torch is imported where a fit makes tensors: `dmo solvers` and `dmo check` start without it
    import torch


@dataclass
class SemiParams(SolverParams):
    """Hyper-parameters common to fixmatch and adsh (defaults from the paper's appendix B where it gives them)."""

    lr: float = field(default=2e-3, metadata={"positive": True, "help": "Adam learning rate (paper: 2e-3)"})
    weight_decay: float = field(default=0.0, metadata={"min": 0, "help": "Adam weight decay (L2)"})
    batch_size: int = field(default=64, metadata={"min": 1, "help": "labeled rows per step, B (paper: 64)"})
    mu: int = field(default=4, metadata={"min": 1, "help": "unlabeled rows per step = mu * B (paper: 2..7)"})
    lambda_u: float = field(default=1.0, metadata={"min": 0, "help": "weight of the unlabeled loss"})
    ema: float = field(
        default=0.999, metadata={"min": 0, "below": 1, "help": "EMA decay of the weights (saved model = EMA weights)"}
    )
    epochs: int = field(default=20, metadata={"min": 1, "help": "epochs; thresholds are updated after each"})
    steps_per_epoch: int = field(default=50, metadata={"min": 1, "help": "optimizer steps per epoch"})
    weak_noise: float = field(
        default=0.1, metadata={"min": 0, "help": "weak view: Gaussian noise, in units of each feature's std"}
    )
    strong_noise: float = field(
        default=0.2, metadata={"min": 0, "help": "strong view: Gaussian noise, in units of each feature's std"}
    )
    strong_mask: float = field(
        default=0.1,
        metadata={"min": 0, "below": 1, "help": "strong view: probability of dropping a feature (inverted dropout)"},
    )
    views: str = field(
        default="auto",
        metadata={
            "choices": VIEW_MODES,
            "help": "auto: <embedding>_weak/_strong columns if present, else noise; noise; columns",
        },
    )
    balanced: bool = field(
        default=True,
        metadata={"help": "weight L_s by inverse labeled class frequency, as wce (false: plain CE, the paper's)"},
    )
    warm_start: bool = field(
        default=True, metadata={"help": "start from the supervised wce fit on the labeled rows (false: random weights)"}
    )
    fallback: bool = field(
        default=True,
        metadata={
            "help": "judge the fit against wce on held-out labeled rows (--val/--val-frac, else folds) and save "
            "the better model, warning when the unlabeled rows did not help"
        },
    )
    fallback_folds: int = field(
        default=3, metadata={"min": 2, "help": "fallback without --val/--val-frac: folds of the labeled rows"}
    )
    fallback_margin: float = field(
        default=1.0,
        metadata={
            "min": 0,
            "help": "fallback: standard errors (paired bootstrap of the held-out rows) by which the fit must beat "
            "wce to be kept (0: any gain)",
        },
    )


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """(n, K) log-probabilities; a single logit z is the two-class distribution (1 - sigmoid z, sigmoid z)."""
    import torch
    import torch.nn.functional as F

    if logits.ndim == 1 or logits.shape[1] == 1:
        z = logits.reshape(-1)
        return torch.stack([F.logsigmoid(-z), F.logsigmoid(z)], dim=1)
    return F.log_softmax(logits, dim=1)


def constant_thresholds(value: float, name: str, n_classes: int) -> np.ndarray:
    """The same starting threshold for every class, from `--param NAME=value` in [0, 1]."""
    if not 0.0 <= value <= 1.0:
        raise DmoError(f"--param {name}={value} must be in [0, 1]")
    return np.full(n_classes, value)


def selection_mask(confidence: torch.Tensor, pseudo: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """1{max q >= tau_{yhat}}, with a threshold of 1.0 (or more) selecting nothing."""
    tau = thresholds[pseudo]
    return (confidence >= tau) & (tau < 1.0)


def unlabeled_loss(
    weak_logits: torch.Tensor, strong_logits: torch.Tensor, thresholds: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """FixMatch's L_u (mean over all mu*B rows, unselected rows count as 0) and the selection mask."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        confidence, pseudo = log_probs(weak_logits).exp().max(dim=1)
        mask = selection_mask(confidence, pseudo, thresholds)
    per_row = F.nll_loss(log_probs(strong_logits), pseudo, reduction="none")
    return (per_row * mask).mean(), mask


class WeightEMA:
    """Exponential moving average of a network's parameters (buffers such as BatchNorm statistics are copied).

    The decay ramps up as min(decay, (1 + t) / (10 + t)) over the first
    updates (TensorFlow's num_updates rule), so short runs are not dominated
    by the random initial weights; from a few thousand steps on it is `decay`.
    """

    def __init__(self, network: torch.nn.Module, decay: float):
        if not 0.0 <= decay < 1.0:
            raise DmoError(f"--param ema={decay} must be in [0, 1)")
        self.network = copy.deepcopy(network).eval()
        for param in self.network.parameters():
            param.requires_grad_(False)
        self.decay = decay
        self.updates = 0

    def update(self, live: torch.nn.Module) -> None:
        import torch

        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        with torch.no_grad():
            for shadow, param in zip(self.network.parameters(), live.parameters()):
                shadow.lerp_(param, 1.0 - decay)
            for shadow, buffer in zip(self.network.buffers(), live.buffers()):
                shadow.copy_(buffer)


class IndexStream:
    """Endless batches of row positions: shuffled passes over `rows`, joined so a batch may span two passes."""

    def __init__(self, rows: torch.Tensor, batch: int, generator: torch.Generator):
        self.rows = rows
        self.batch = batch
        self.generator = generator
        self.pending = rows[:0]

    def next(self) -> torch.Tensor:
        import torch

        while self.pending.numel() < self.batch:
            order = torch.randperm(self.rows.numel(), generator=self.generator, device=self.rows.device)
            self.pending = torch.cat([self.pending, self.rows[order]])
        out, self.pending = self.pending[: self.batch], self.pending[self.batch :]
        return out


def pseudo_label_quality(
    pseudo: np.ndarray, selected: np.ndarray, truth: np.ndarray, n_classes: int
) -> dict[str, list[float]]:
    """Per class k: precision = correct selected / selected as k; recall = correct selected / true k
    (rows with known truth)."""
    known = truth >= 0
    chosen = selected & known
    predicted = np.bincount(pseudo[chosen], minlength=n_classes)
    correct = np.bincount(pseudo[chosen & (pseudo == truth)], minlength=n_classes)
    actual = np.bincount(truth[known], minlength=n_classes)
    return {
        "precision": safe_div(correct, predicted).tolist(),
        "recall": safe_div(correct, actual).tolist(),
        "selected": predicted.tolist(),
        "true": actual.tolist(),
    }


def supervised_start(train: SplitData, labeled: torch.Tensor, ctx: FitContext) -> torch.nn.Module:
    """wce's network on the labeled rows (the linear model's exact optimum): where the FixMatch loop starts, so
    the first pseudo-labels are the supervised model's and the loop need not re-learn what wce finds directly."""
    from dmocli.solvers.wce import WeightedCrossEntropy  # same layer; only the warm start needs it

    sup_ctx = dataclasses.replace(ctx, params=WeightedCrossEntropy.Params())
    return WeightedCrossEntropy().fit(train.take(labeled), None, sup_ctx).network


class SemiSupervisedSolver(InMemorySolver):
    """FixMatch loop; subclasses say where thresholds start and how they move after each epoch."""

    multiclass = True
    uses_unlabeled = True

    def initial_thresholds(self, params: SemiParams, n_classes: int) -> np.ndarray:
        raise NotImplementedError

    def update_thresholds(
        self, confidence: np.ndarray, pseudo: np.ndarray, *, previous: np.ndarray, majority: int, params: SemiParams
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """New thresholds from one weak-view pass over all unlabeled rows, and what to log about the update."""
        raise NotImplementedError

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        """The semi-supervised fit, or with fallback=true the better of it and wce (solvers/semisup/fallback.py)."""
        from dmocli.solvers.semisup.fallback import fit_with_fallback

        if not ctx.params.fallback:
            return self.fit_semi(train, val, ctx)
        p = ctx.params
        return fit_with_fallback(
            self.name, self.fit_semi, train=train, val=val, ctx=ctx, k=p.fallback_folds, margin=p.fallback_margin
        )

    def fit_semi(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        import torch

        from dmocli.models.networks import build_network, logits_of
        from dmocli.solvers.loop import adam

        p = ctx.params
        seed_everything(ctx.seed)
        generator = torch.Generator(device=ctx.device).manual_seed(ctx.seed)
        n_classes = max(2, ctx.architecture.n_outputs)
        labeled, unlabeled, counts = _labeled_rows(train, n_classes, self.name)
        majority = int(np.argmax(counts))  # most labeled rows; the lowest class index among ties
        class_weights = (
            inverse_frequency_weights(train.y[labeled].cpu(), n_classes).to(ctx.device) if p.balanced else None
        )
        views = FeatureViews(
            train,
            weak_noise=p.weak_noise,
            strong_noise=p.strong_noise,
            strong_mask=p.strong_mask,
            mode=p.views,
            generator=generator,
        )
        truth = train.extra.get("unlabeled_truth")
        truth_u = truth[unlabeled].cpu().numpy() if truth is not None else None

        network = build_network(ctx.architecture).to(ctx.device)
        if p.warm_start:
            network.load_state_dict(supervised_start(train, labeled, ctx).state_dict())
        ema = WeightEMA(network, p.ema)
        optimizer = adam(network.parameters(), lr=p.lr, weight_decay=p.weight_decay)
        lab_stream = IndexStream(labeled, p.batch_size, generator)
        unl_stream = IndexStream(unlabeled, p.mu * p.batch_size, generator)
        thresholds = self.initial_thresholds(p, n_classes)
        trace: dict[str, Any] = {
            "labeled_loss": "class-weighted CE" if p.balanced else "CE",
            "majority_class": majority,
            "labeled_counts": counts.tolist(),
            "n_unlabeled": int(unlabeled.numel()),
            "views": views.source,
            "thresholds": [thresholds.tolist()],
            "pseudo_labels": [],
            "predicted": [],
            "unlabeled_used_fraction": [],
            "updates": [],
        }
        if truth_u is not None:
            trace["pseudo_label_quality"] = []
        if val is not None and val.n:
            trace["val_balanced_accuracy"] = []
        with progress.task(self.name, total=p.epochs, unit="epochs") as bar:
            for _ in range(p.epochs):
                tau = torch.as_tensor(thresholds, dtype=torch.float32, device=ctx.device)
                used = _train_epoch(
                    network,
                    ema=ema,
                    optimizer=optimizer,
                    streams=(lab_stream, unl_stream),
                    views=views,
                    train=train,
                    class_weights=class_weights,
                    tau=tau,
                    p=p,
                )
                trace["unlabeled_used_fraction"].append(used)
                bar.advance(1, unlabeled_used=trace["unlabeled_used_fraction"][-1])
                epoch = self._pseudo_labels(network, views.weak(unlabeled), previous=thresholds, majority=majority, p=p)
                thresholds = epoch.thresholds
                epoch.record(trace, n_classes)
                if truth_u is not None:
                    quality = pseudo_label_quality(epoch.pseudo, epoch.selected, truth_u, n_classes)
                    trace["pseudo_label_quality"].append(quality)
                if "val_balanced_accuracy" in trace:
                    val_pred = log_probs(logits_of(ema.network, val.X)).argmax(dim=1).cpu().numpy()
                    trace["val_balanced_accuracy"].append(
                        multiclass_scores(val.y.cpu().numpy(), val_pred, n_classes)["balanced_accuracy"]
                    )
        return FitResult(
            network=ema.network.eval(), trace=trace, threshold=0.0 if ctx.architecture.n_outputs == 1 else None
        )

    def _pseudo_labels(
        self,
        network: torch.nn.Module,
        weak_unlabeled: torch.Tensor,
        *,
        previous: np.ndarray,
        majority: int,
        p: SemiParams,
    ) -> _EpochLabels:
        """After an epoch: the unlabeled rows' pseudo-labels and confidences under the weak view, the solver's
        thresholds updated on them, and which rows those thresholds select."""
        import torch

        from dmocli.models.networks import logits_of

        confidence, pseudo = log_probs(logits_of(network, weak_unlabeled)).exp().max(dim=1)
        confidence_np = confidence.double().cpu().numpy()
        pseudo_np = pseudo.cpu().numpy()
        thresholds, info = self.update_thresholds(
            confidence_np, pseudo_np, previous=previous, majority=majority, params=p
        )
        selected = (
            selection_mask(
                confidence, pseudo, torch.as_tensor(thresholds, device=confidence.device, dtype=confidence.dtype)
            )
            .cpu()
            .numpy()
        )
        return _EpochLabels(thresholds, info, pseudo_np, selected)


@dataclass
class _EpochLabels:
    """One epoch's pseudo-labels: the thresholds updated on them (and the update's own figures), each unlabeled
    row's pseudo-label and whether the thresholds select it."""

    thresholds: np.ndarray
    info: dict[str, Any]
    pseudo: np.ndarray
    selected: np.ndarray

    def record(self, trace: dict[str, Any], n_classes: int) -> None:
        """Append the epoch's thresholds and pseudo-label counts to the trace."""
        trace["thresholds"].append(self.thresholds.tolist())
        trace["updates"].append(self.info)
        trace["predicted"].append(np.bincount(self.pseudo, minlength=n_classes).tolist())
        trace["pseudo_labels"].append(np.bincount(self.pseudo[self.selected], minlength=n_classes).tolist())


def _labeled_rows(train: SplitData, n_classes: int, solver: str) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """(positions of the labeled rows, of the unlabeled rows, the labeled rows per class); the solver needs both."""
    import torch

    labeled = torch.nonzero(train.y >= 0).flatten()
    unlabeled = torch.nonzero(train.y < 0).flatten()
    if labeled.numel() == 0 or unlabeled.numel() == 0:
        raise DmoError(f"solver {solver} needs both labeled and unlabeled rows in the training data")
    return labeled, unlabeled, torch.bincount(train.y[labeled], minlength=n_classes).cpu().numpy()


def _train_epoch(
    network: torch.nn.Module,
    *,
    ema: WeightEMA,
    optimizer: torch.optim.Optimizer,
    streams: tuple[IndexStream, IndexStream],
    views: FeatureViews,
    train: SplitData,
    class_weights: torch.Tensor | None,
    tau: torch.Tensor,
    p: SemiParams,
) -> float:
    """One epoch of steps, each on a labeled batch (weak view) and an unlabeled one (weak view for the pseudo-label,
    strong for the loss); the share of unlabeled rows whose pseudo-label passed `tau`."""
    import torch
    import torch.nn.functional as F

    lab_stream, unl_stream = streams
    network.train()
    used = torch.zeros((), device=tau.device)
    for _ in range(p.steps_per_epoch):
        rows_l, rows_u = lab_stream.next(), unl_stream.next()
        batch = torch.cat([views.weak(rows_l), views.weak(rows_u), views.strong(rows_u)])
        logits_l, logits_w, logits_s = network(batch).split([rows_l.numel(), rows_u.numel(), rows_u.numel()])
        loss_s = F.nll_loss(log_probs(logits_l), train.y[rows_l], weight=class_weights)
        loss_u, mask = unlabeled_loss(logits_w.detach(), logits_s, tau)
        loss = loss_s + p.lambda_u * loss_u
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        ema.update(network)
        used += mask.sum()
    return float(used) / (p.steps_per_epoch * rows_u.numel())
