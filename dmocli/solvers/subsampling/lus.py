"""LUS: multinomial logistic regression on a local uncertainty subsample (docs/algorithms.md#lus).

Two ways in:
- DATA is a `dmo subsample` file: its per-class log acceptance offsets are
  added to every class logit during training (no post-hoc correction) and
  the fit is plain maximum likelihood on those rows;
- `--gamma G` on ordinary data: pilot on a uniform `pilot_frac` of the rows,
  acceptance drawn for the other rows, offset-corrected fit on the accepted
  ones and the pilot's rows (offset 0: a uniform draw needs no correction),
  all in memory (use `dmo subsample` for data that does not fit).
The linear model is fitted to convergence by full-batch L-BFGS (float64 on
CPU), so it is the maximum likelihood estimate the paper's variance claims
are about; the MLP uses Adam mini-batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.solvers.base import (
    FitContext,
    FitResult,
    InMemorySolver,
    SolverParams,
    SplitData,
    offset_logits,
    seed_everything,
)
from dmocli.solvers.subsampling.acceptance import acceptance, check_gamma, check_pilot_classes, row_generator

if TYPE_CHECKING:  # torch is imported where a fit makes tensors: `dmo solvers` and `dmo check` start without it
    import torch

    from dmocli.models.architecture import Architecture


@dataclass
class LogisticParams(SolverParams):
    """How to fit an offset-corrected logistic model (shared by the solver, the pilot and the bench)."""

    l2: float = field(
        default=1e-5, metadata={"min": 0, "help": "L2 penalty on the weights (keeps separable data finite)"}
    )
    max_iter: int = field(default=500, metadata={"min": 1, "help": "L-BFGS iterations (linear model)"})
    lr: float = field(default=3e-3, metadata={"positive": True, "help": "Adam learning rate (mlp)"})
    batch_size: int = field(default=1024, metadata={"min": 1, "help": "rows per mini-batch (mlp)"})
    max_epochs: int = field(default=200, metadata={"min": 1, "help": "upper bound on passes over the data (mlp)"})
    patience: int = field(default=10, metadata={"min": 0, "help": "epochs without improvement before stopping (mlp)"})


def offset_nll(logits: torch.Tensor, y: torch.Tensor, offsets: torch.Tensor | None) -> torch.Tensor:
    """Mean negative log-likelihood of log softmax(f(x) + log a(x, .))[y]; one-logit heads use the log-odds form."""
    import torch.nn.functional as F

    logits = offset_logits(logits, offsets)
    if logits.shape[-1] == 1:
        return F.binary_cross_entropy_with_logits(logits.squeeze(-1), y.to(logits.dtype))
    return F.cross_entropy(logits, y)


def fit_offset_logistic(
    X: torch.Tensor,
    y: torch.Tensor,
    offsets: torch.Tensor | None,
    *,
    arch: Architecture,
    seed: int,
    params: LogisticParams,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Fit `arch` by maximum likelihood with training-only offsets; returns a float32 network and a trace."""
    from dmocli.models.networks import build_network
    from dmocli.solvers.loop import fit_linear_lbfgs, lbfgs_dtype

    generator = seed_everything(seed)
    network = build_network(arch).to(X.device)
    if arch.kind == "linear":
        off = None if offsets is None else offsets.to(lbfgs_dtype(X))
        return fit_linear_lbfgs(
            network, X, loss_of=lambda logits: offset_nll(logits, y, off), l2=params.l2, max_iter=params.max_iter
        )
    return _fit_adam(network, X, y=y, offsets=offsets, params=params, generator=generator)


def _fit_adam(
    network: torch.nn.Module,
    X: torch.Tensor,
    *,
    y: torch.Tensor,
    offsets: torch.Tensor | None,
    params: LogisticParams,
    generator: torch.Generator,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    import torch

    from dmocli.solvers.loop import EarlyStopping, adam, minibatches, refresh_batchnorm, refuse_single_row_batches

    refuse_single_row_batches(network, params.batch_size)
    optimizer = adam(network.parameters(), lr=params.lr, weight_decay=params.l2)
    stopper = EarlyStopping(network, patience=params.patience)
    epochs = 0
    with progress.task("lus", total=params.max_epochs, unit="epochs") as bar:
        for epoch in range(params.max_epochs):
            network.train()
            for idx in minibatches(X.shape[0], params.batch_size, generator, X.device):
                optimizer.zero_grad(set_to_none=True)
                loss = offset_nll(network(X[idx]), y[idx], None if offsets is None else offsets[idx])
                loss.backward()
                optimizer.step()
            refresh_batchnorm(network, X)
            network.eval()
            with torch.no_grad():
                monitored = float(offset_nll(network(X), y, offsets))
            epochs = epoch + 1
            bar.advance(1, loss=monitored)
            if stopper.step(monitored):
                break
    stopper.restore()
    return network.eval(), {"optimizer": "adam", "epochs": epochs, "objective": stopper.best}


def softmax_proba(logits: torch.Tensor) -> np.ndarray:
    """Class probabilities (n, K) as float64; a one-logit head becomes [1 - p, p]."""
    import torch

    logits = logits.double()
    if logits.ndim == 1:
        logits = torch.stack([torch.zeros_like(logits), logits], dim=1)
    return torch.softmax(logits, dim=1).cpu().numpy()


class LocalUncertaintySampling(InMemorySolver):
    name = "lus"
    summary = "local uncertainty sampling: logistic fit on a subsample with per-class log-acceptance offsets"
    multiclass = True
    uses_offsets = True

    @dataclass
    class Params(LogisticParams):
        gamma: float = field(
            default=0.0,
            metadata={
                "help": "subsample so variance <= gamma x full-data MLE (>= 1; also --gamma); "
                "0: DATA is a dmo subsample file"
            },
        )
        pilot_frac: float = field(
            default=0.1,
            metadata={"positive": True, "below": 1, "help": "uniform fraction of rows for the pilot (with --gamma)"},
        )
        pilot_model: str = field(
            default="linear", metadata={"choices": ("linear", "mlp"), "help": "pilot network: linear or mlp"}
        )
        keep_pilot: bool = field(
            default=True,
            metadata={
                "help": "fit on the pilot's rows too (offset 0); false: the accepted rows only, the paper's setting"
            },
        )

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        p = ctx.params
        arch = ctx.architecture
        offsets = train.extra.get("offsets")
        own_threshold = 0.0 if arch.n_outputs == 1 else None
        if offsets is not None:
            if p.gamma:
                raise DmoError("DATA is already a subsample (it has log_accept_* columns); drop --gamma to fit on it")
            if not p.keep_pilot:
                raise DmoError(
                    "--param keep-pilot applies to --gamma; DATA is a subsample file (its pilot rows are "
                    "in it unless it was written with `dmo subsample --no-keep-pilot`)"
                )
            network, trace = fit_offset_logistic(train.X, train.y, offsets, arch=arch, seed=ctx.seed, params=p)
            return FitResult(network, {**trace, "subsample": "offsets read from DATA", "rows": train.n}, own_threshold)
        if not p.gamma:
            raise DmoError("--solver lus needs --gamma G (>= 1), or a DATA file written by `dmo subsample`")
        gamma = check_gamma(p.gamma)
        sub, info = self._subsample(train, ctx, gamma)
        network, trace = fit_offset_logistic(sub.X, sub.y, sub.extra["offsets"], arch=arch, seed=ctx.seed, params=p)
        return FitResult(network, {**trace, **info}, own_threshold)

    def _subsample(self, train: SplitData, ctx: FitContext, gamma: float) -> tuple[SplitData, dict[str, Any]]:
        """Pilot on a uniform sample, then accept each other row with a(x, y); rows keep log a(x, .) as offsets.

        With keep_pilot the pilot's rows join the accepted ones with offset 0: their selection did not
        depend on y, so each row's likelihood stays exact and the fit uses every row the budget paid for.
        """
        import torch

        from dmocli.models.networks import Architecture, logits_of

        p = ctx.params
        n = train.n
        rng = row_generator(ctx.seed, 0)
        in_pilot = rng.random(n) < p.pilot_frac
        draws = rng.random(n)
        if in_pilot.sum() < 2 or in_pilot.all():
            raise DmoError(
                f"--param pilot-frac={p.pilot_frac:g} leaves no rows for the pilot or for the subsample "
                f"({n} rows); change it or use more data"
            )
        n_classes = max(2, ctx.architecture.n_outputs)
        pilot_arch = Architecture(
            p.pilot_model,
            ctx.architecture.n_inputs,
            n_classes,
            width=ctx.architecture.width,
            depth=ctx.architecture.depth,
        )
        pilot_rows = torch.as_tensor(np.flatnonzero(in_pilot), device=train.X.device)
        names = ctx.class_names or list(range(n_classes))
        check_pilot_classes(
            train.y[pilot_rows].cpu().numpy(),
            names,
            "raise --param pilot-frac until every class is in it, or subsample with "
            "`dmo subsample --method case-control`",
        )
        pilot, _ = fit_offset_logistic(
            train.X[pilot_rows], train.y[pilot_rows], None, arch=pilot_arch, seed=ctx.seed, params=p
        )
        rest = np.flatnonzero(~in_pilot)
        rest_t = torch.as_tensor(rest, device=train.X.device)
        proba = softmax_proba(logits_of(pilot, train.X[rest_t]))
        a = acceptance(proba, gamma)
        y_rest = train.y[rest_t].cpu().numpy()
        a_y = a[np.arange(rest.size), y_rest]
        keep = draws[rest] < a_y
        fitted = in_pilot & p.keep_pilot
        fitted[rest[keep]] = True
        rows = np.flatnonzero(fitted)  # data order
        log_a = np.zeros((rows.size, a.shape[1]))
        log_a[np.searchsorted(rows, rest[keep])] = np.log(a[keep])
        kept = torch.as_tensor(rows, device=train.X.device)
        offsets = torch.as_tensor(log_a, dtype=torch.float32, device=train.X.device)
        info = {
            "gamma": gamma,
            "rows": n,
            "pilot_rows": int(in_pilot.sum()),
            "kept_rows": int(keep.sum()),
            "pilot_rows_in_fit": int(in_pilot.sum()) if p.keep_pilot else 0,
            "expected_fraction": float(a_y.sum() / n),
            "realized_fraction": float(keep.sum() / n),
            "fraction_used": float((in_pilot.sum() + keep.sum()) / n),
            "pilot_accuracy": float((proba.argmax(axis=1) == y_rest).mean()),
        }
        return SplitData(train.X[kept], train.y[kept], {"offsets": offsets}), info
