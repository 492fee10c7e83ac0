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

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from dmocli.engines.torch_distributed import OneProcess
from dmocli.errors import DmoError
from dmocli.models.networks import build_network, logits_of
from dmocli.operating_point.search import search
from dmocli.solvers.base import FitContext, FitResult, InMemorySolver, SolverParams, SplitData, seed_everything
from dmocli.solvers.loop import EarlyStopping, adam, endless_minibatches
from dmocli.solvers.relaxation import agreement_bce, metric_terms, soft_counts, violations
from dmocli.solvers.selection import BestIterate, Evaluation, WithinNoiseIterate, evaluate_decision
from dmocli.solvers.wce import WeightedCrossEntropy

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup


@dataclass
class Settings:
    """Concrete ERO hyper-parameters after applying a preset."""

    warm_steps: int
    warm_lr: float
    warm_patience: int
    warm_balanced: bool
    warm_start: str  # bce (the loop below) | wce (the wce solver, with its defaults)
    warm_monitor: (
        str  # wce warm start: early-stop on the train or the val loss; auto: val when a monitored split is given
    )
    warm_epochs: int  # wce warm start: most epochs (its patience is warm_patience // 4 epochs)
    init: str  # ta | predictions | random
    outer: int
    outer_patience: int  # 0: run every outer iteration
    inner_steps: int
    inner_patience: int
    inner_tol: float
    inner_rule: str  # best | window
    inner_epochs: int
    lr: float
    lr_s: float
    mu0: float
    mu_init: float
    growth: float
    lam: float
    violation_tol: float
    reg_weighting: str  # none | balanced
    bias_projection: bool
    # best (strict arg-max on the monitored split) | within-noise (WithinNoiseIterate) | train (arg-max on train)
    selection: str


def _preset(protocol: str, model: str) -> Settings:
    mlp = model == "mlp"
    if protocol == "thorough":
        # The train problem, solved hard (best train objective): the authors' kind of warm start (plain BCE, full batch,
        # early-stopped on the training loss) at 10x their learning rate for 1/10 of their steps, then the
        # fast penalty phase, keeping the best iterate on train. Linear: fast's warm start (wce's exact optimum)
        # is kept.
        warm = (
            dict(warm_start="bce", warm_balanced=False, warm_lr=1e-3, warm_steps=300, warm_patience=50) if mlp else {}
        )
        return replace(_preset("fast", model), selection="train", **warm)
    if protocol == "authors":
        return Settings(
            warm_steps=3000,
            warm_lr=1e-4 if mlp else 1e-3,
            warm_patience=50,
            warm_balanced=False,
            warm_start="bce",
            warm_monitor="train",
            warm_epochs=300,
            init="random",
            outer=50,
            outer_patience=0,
            inner_steps=1000,
            inner_patience=50,
            inner_tol=0.0,
            inner_rule="best",
            inner_epochs=20,
            lr=1e-4 if mlp else 1e-3,
            lr_s=0.1,
            mu0=100.0,
            mu_init=100.0,
            growth=1.3,
            lam=1.0,
            violation_tol=1e-5,
            reg_weighting="none",
            bias_projection=False,
            selection="best",
        )
    if protocol == "fast":
        return Settings(
            warm_steps=1000 if mlp else 150,
            warm_lr=3e-3 if mlp else 3e-2,
            warm_patience=40,
            warm_balanced=True,
            warm_start="wce",
            warm_monitor="auto",
            warm_epochs=300,
            init="ta",
            outer=5,
            outer_patience=3,
            inner_steps=100,
            inner_patience=15,
            inner_tol=1e-3,
            inner_rule="window",
            inner_epochs=10,
            lr=1e-3 if mlp else 1e-2,
            lr_s=0.1,
            mu0=100.0,
            mu_init=100.0,
            growth=1.3,
            lam=1.0,
            violation_tol=1e-5,
            reg_weighting="none",
            bias_projection=True,
            selection="best" if mlp else "within-noise",
        )
    raise AssertionError(f"unreachable: --param protocol={protocol!r} is checked when parsed")


WARM_PARAMS = {
    "bce": ("warm_steps", "warm_lr", "warm_patience", "warm_balanced"),
    "wce": ("warm_patience", "warm_monitor", "warm_epochs"),
}


def _refuse_unused_warm_params(given: dict[str, Any], warm_start: str, model: str) -> None:
    """A warm-start parameter the chosen warm start does not read would be ignored: refuse it. The linear
    model's wce warm start is the exact optimum (L-BFGS) and reads none of them."""
    used = WARM_PARAMS[warm_start] if warm_start == "bce" or model != "linear" else ()
    unused = [key for params in WARM_PARAMS.values() for key in params if key in given and key not in used]
    if not unused:
        return
    keys = ", ".join(dict.fromkeys(key.replace("_", "-") for key in unused))
    if model == "linear" and all(key in WARM_PARAMS["wce"] and key not in WARM_PARAMS["bce"] for key in unused):
        raise DmoError(
            f"--param {keys} applies to the MLP's wce warm start only; the linear model's wce warm start "
            "is the exact optimum and the bce one reads no such parameter: drop it"
        )
    what = (
        "the linear model's wce warm start (the exact optimum)"
        if warm_start == "wce" and model == "linear"
        else f"the {warm_start} warm start"
    )
    other = "bce" if warm_start == "wce" else "wce"
    raise DmoError(f"--param {keys} does not apply to {what}; drop it, or add --param warm-start={other}")


class ERO(InMemorySolver):
    name = "ero"
    summary = "exact reformulation + l1 exact penalty (Peng et al.): direct FPOR/FROP/OFBS training"
    distributed = True

    @dataclass
    class Params(SolverParams):
        protocol: str = field(
            default="fast",
            metadata={
                "choices": ("fast", "thorough", "authors"),
                "help": "preset: fast (default), thorough (best train objective: over-fits) or authors "
                "(the paper's protocol); the options below override it",
            },
        )
        warm_steps: int | None = field(
            default=None,
            metadata={"min": 1, "help": "bce warm start: Adam steps (authors 3000; None = from the preset)"},
        )
        warm_lr: float | None = field(default=None, metadata={"positive": True, "help": "warm-start learning rate"})
        warm_patience: int | None = field(
            default=None, metadata={"min": 1, "help": "warm-start early-stopping patience (steps)"}
        )
        warm_balanced: bool | None = field(
            default=None, metadata={"help": "weight the warm-start BCE by inverse class frequency"}
        )
        warm_start: str | None = field(
            default=None,
            metadata={
                "choices": ("bce", "wce"),
                "help": "bce (plain/balanced BCE Adam loop: authors) or wce (the wce solver: fast, thorough; "
                "exact L-BFGS for the linear model)",
            },
        )
        warm_monitor: str | None = field(
            default=None,
            metadata={
                "choices": ("train", "val", "auto"),
                "help": "wce warm start: early-stop on the train or the val loss, or auto (fast: val when a monitored "
                "split is given, else train)",
            },
        )
        warm_epochs: int | None = field(
            default=None,
            metadata={"min": 1, "help": "wce warm start: most epochs (its patience is warm-patience // 4 epochs)"},
        )
        init: str | None = field(
            default=None,
            metadata={
                "choices": ("ta", "predictions", "random"),
                "help": "s start: ta (bias moved to the TA threshold, s = predictions), predictions, random",
            },
        )
        outer: int | None = field(
            default=None, metadata={"min": 1, "help": "outer (penalty update) iterations (authors 50)"}
        )
        outer_patience: int | None = field(
            default=None,
            metadata={
                "min": 0,
                "help": "stop after this many outer iterations without a better monitored iterate once train-feasible "
                "(0: never)",
            },
        )
        inner_steps: int | None = field(
            default=None,
            metadata={"min": 1, "help": "max Adam steps per penalty subproblem, full batch (authors 1000)"},
        )
        inner_patience: int | None = field(
            default=None, metadata={"min": 1, "help": "subproblem early-stopping patience in steps (authors 50)"}
        )
        inner_tol: float | None = field(
            default=None,
            metadata={
                "min": 0,
                "help": "subproblem stops when F fell by less than this (relative) over the patience window",
            },
        )
        inner_rule: str | None = field(
            default=None,
            metadata={
                "choices": ("best", "window"),
                "help": "subproblem stopping: best (no new best for patience steps, authors) or window (fast)",
            },
        )
        inner_epochs: int | None = field(
            default=None, metadata={"min": 1, "help": "max epochs per subproblem in mini-batch mode"}
        )
        lr: float | None = field(
            default=None,
            metadata={"positive": True, "help": "Adam learning rate for the model (authors 1e-3 linear, 1e-4 mlp)"},
        )
        lr_s: float | None = field(
            default=None, metadata={"positive": True, "help": "Adam learning rate for s (authors 0.1)"}
        )
        mu0: float | None = field(default=None, metadata={"min": 0, "help": "initial penalty on the metric constraint"})
        mu_init: float | None = field(default=None, metadata={"min": 0, "help": "initial per-row penalty mu_i"})
        growth: float | None = field(default=None, metadata={"min": 1, "help": "penalty update factor (authors 1.3)"})
        lam: float | None = field(
            default=None,
            metadata={"min": 0, "help": "initial weight of the BCE agreement regularizer (grows by the same factor)"},
        )
        violation_tol: float | None = field(
            default=None, metadata={"min": 0, "help": "a row counts as violating when c_i exceeds this"}
        )
        reg_weighting: str | None = field(
            default=None,
            metadata={
                "choices": ("none", "balanced"),
                "help": "regularizer row weights: none (authors' code) or balanced (paper)",
            },
        )
        bias_projection: bool | None = field(
            default=None,
            metadata={"help": "judge each outer iterate with its bias at the exact train-optimal value (fast: on)"},
        )
        selection: str | None = field(
            default=None,
            metadata={
                "choices": ("best", "within-noise", "train"),
                "help": "iterate kept: best (monitored arg-max: authors, fast mlp), within-noise (best train "
                "objective within one standard error of it: fast linear) or train (best on train, validation "
                "unused: thorough)",
            },
        )
        mode: str = field(
            default="auto",
            metadata={
                "choices": ("auto", "full", "minibatch"),
                "help": "full, minibatch, or auto (full batch while rows x activations per row "
                "<= full-batch-max-activations)",
            },
        )
        batch_size: int = field(
            default=0, metadata={"min": 0, "help": "rows per step in mini-batch mode (0: n/8 clipped to 256..8192)"}
        )
        full_batch_max_activations: float = field(
            default=5e7,
            metadata={
                "positive": True,
                "help": "auto mode: largest rows x (inputs + layer outputs) trained full batch (memory, ~0.2 GB "
                "per float32 copy)",
            },
        )
        folding: int = field(
            default=0,
            metadata={
                "min": 0,
                "help": "K >= 2 and no validation split: hold out fold `fold` of a stratified K-fold partition of "
                "train for iterate selection",
            },
        )
        fold: int = field(default=0, metadata={"min": 0, "help": "which fold to hold out (0..K-1) with folding"})

    def settings(self, params: ERO.Params, model: str) -> Settings:
        """The preset for `params.protocol` and the model kind, with explicitly given values on top."""
        base = _preset(params.protocol, model)
        given = {f.name: getattr(params, f.name) for f in fields(Settings) if getattr(params, f.name) is not None}
        out = replace(base, **given)
        _refuse_unused_warm_params(given, out.warm_start, model)
        if out.selection == "train" and params.folding:
            raise DmoError(
                "--param selection=train keeps the best iterate on the training rows, so a held-out fold "
                "(folding) would go unused: drop folding or use selection=best"
            )
        return out

    def check_params(self, params: ERO.Params, model: str) -> None:
        self.settings(params, model)

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        started = time.perf_counter()
        p = ctx.params
        problem = ctx.problem
        cfg = self.settings(p, ctx.architecture.kind)
        generator = seed_everything(ctx.seed)
        if ctx.group is not None and p.folding:
            raise DmoError(
                "--folding holds out a fold of rows spread over every process; under torchrun give --val FILE"
            )
        rows = ctx.group if ctx.group is not None else OneProcess()
        train, monitor, monitor_name = _monitor_split(train, val, p.folding, p.fold, ctx.seed)
        positive = train.y == 1
        n, n_pos = rows.sum_int(train.n), rows.sum_int(int(positive.sum()))  # over every process's rows
        if n_pos == 0 or n_pos == n:
            raise DmoError("ERO needs both classes in the training data")
        network = build_network(ctx.architecture).to(ctx.device)
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

        if cfg.warm_start == "wce":
            wce = WeightedCrossEntropy()
            wce_params = (
                wce.Params(
                    patience=max(1, cfg.warm_patience // 4), max_epochs=cfg.warm_epochs
                )  # epochs; wce's defaults 20, 300
                if ctx.architecture.kind != "linear"
                else wce.Params()
            )  # linear: the exact optimum
            if cfg.warm_monitor == "val" and monitor is train:
                raise DmoError(
                    "--param warm-monitor=val early-stops the warm start on a validation split; give --val, "
                    "--val-frac or --folding, or drop it"
                )
            on_val = cfg.warm_monitor == "val" or (cfg.warm_monitor == "auto" and monitor is not train)
            fitted = wce.fit(train, monitor if on_val else None, replace(ctx, params=wce_params))
            network, warm = (
                fitted.network,
                fitted.trace.get("epochs", fitted.trace.get("iterations", 0)),
            )  # adam | lbfgs
            warm_monitor = fitted.trace.get(
                "monitored_split"
            )  # adam's early-stopping split; lbfgs (the exact optimum): none
        else:
            warm_monitor = "train"
            warm = _warm_start(network, train, cfg, batch, generator, rows)
        rows.broadcast_parameters(network)  # BatchNorm statistics: rank 0's, so every process judges one network
        s = _initial_s(network, train, problem, cfg.init, generator, rows)
        warm_seconds = time.perf_counter() - started

        # Per-row class weights of the penalty (rare class weighs more) and of the regularizer.
        w = torch.where(positive, (n - n_pos) / n, n_pos / n).to(torch.float32)
        rw = (
            torch.where(positive, n / (2 * n_pos), n / (2 * (n - n_pos))).to(torch.float32)
            if cfg.reg_weighting == "balanced"
            else torch.ones_like(w)
        )
        mu = torch.full((train.n,), cfg.mu_init, device=ctx.device)  # this process's rows
        mu0, lam = cfg.mu0, cfg.lam
        s_adam = RowAdam(train.n, ctx.device)

        best = WithinNoiseIterate(network, problem) if cfg.selection == "within-noise" else BestIterate(network)
        warm_train = evaluate_decision(network, train.X, train.y, problem, group=ctx.group)
        _offer(best, _judged(cfg, _evaluate(network, monitor, train, problem, ctx.group), warm_train), 0, warm_train)
        history: list[dict[str, Any]] = []
        steps_total, stale = 0, 0
        for outer in range(1, cfg.outer + 1):
            outer_started = time.perf_counter()
            weights = (mu * w, lam * rw)
            steps = _inner_solve(
                network, s, s_adam, train, problem, weights, mu0, cfg, batch, generator, rows, n, n_pos
            )
            steps_total += steps
            rows.broadcast_parameters(network)
            # Exact full pass: violations, metric constraint on s, then the outer update rule.
            with torch.no_grad():
                train_logits = logits_of(network, train.X).float()
                z = torch.sigmoid(train_logits) - 0.5
                c = violations(s, z, positive)
                violating = c > cfg.violation_tol
                tp, fp = rows.sum(torch.stack(soft_counts(s, positive)))
                objective, gap = metric_terms(problem, tp, fp, n_pos)
                gap_value = float(gap) if gap is not None else 0.0
                n_violating = rows.sum_int(int(violating.sum()))
                max_violation = float(rows.max(c.max()))
                mu = torch.where(violating, mu * cfg.growth, mu / cfg.growth)
            if gap_value > 0:
                mu0 *= cfg.growth
            lam *= cfg.growth
            with _bias_projected(network, train_logits, train.y, problem, cfg.bias_projection, rows):
                train_eval = evaluate_decision(network, train.X, train.y, problem, group=ctx.group)
                monitored = _evaluate(network, monitor, train, problem, ctx.group)
                improved = _offer(best, _judged(cfg, monitored, train_eval), outer, train_eval)
            history.append(
                {
                    "outer": outer,
                    "steps": steps,
                    "seconds": time.perf_counter() - outer_started,
                    "n_violating": n_violating,
                    "max_violation": max_violation,
                    "metric_gap_on_s": gap_value,
                    "objective_on_s": float(objective),
                    "train_objective": train_eval.objective,
                    "train_feasible": train_eval.feasible,
                    f"{monitor_name}_objective": monitored.objective,
                    f"{monitor_name}_feasible": monitored.feasible,
                }
            )
            stale = 0 if improved else stale + 1
            train_feasible = train_eval.feasible is not False and n_violating == 0 and gap_value <= 0
            if cfg.outer_patience and (train_feasible and stale >= cfg.outer_patience or _unbeatable(cfg, best)):
                break
        best.restore()
        network.eval()
        final = evaluate_decision(network, train.X, train.y, problem, group=ctx.group)
        mu_all = rows.gather_rows(mu)
        trace = {
            "protocol": p.protocol,
            "settings": vars(cfg),
            "mode": "full" if full else "minibatch",
            "batch_size": batch,
            # under torchrun batch_size is each process's: a step takes that many from each
            "processes": rows.world_size,
            "monitored_split": monitor_name,
            "selected_on": "train" if cfg.selection == "train" else monitor_name,
            "warm_start_steps": warm,
            "warm_start_train_objective": warm_train.objective,
            "warm_start_monitor": warm_monitor,
            "outer_iterations": len(history),
            "inner_steps_total": steps_total,
            "selected_outer": best.best_step,
            "selected": best.best.to_dict() if best.best else None,
            "final_constraint_violations": {
                "n_rows_violating": history[-1]["n_violating"] if history else None,
                "max_row_violation": history[-1]["max_violation"] if history else None,
                "metric_gap_on_s": history[-1]["metric_gap_on_s"] if history else None,
            },
            "penalty_parameters": {
                "mu0": mu0,
                "lam": lam,
                "mu_min": float(mu_all.min()),
                "mu_median": float(mu_all.median()),
                "mu_max": float(mu_all.max()),
            },
            "train_before_ta": final.to_dict(),
            "warm_start_seconds": warm_seconds,
            "seconds": time.perf_counter() - started,
            "history": history,
        }
        return FitResult(network=network, threshold=0.0, trace=trace)


def _evaluate(
    network: torch.nn.Module, split: SplitData, train: SplitData, problem, group: ProcessGroup | None
) -> Evaluation:
    """evaluate_decision on the monitored split: summed over the processes when it is the (sharded) training
    split; --val is whole on every process, and rank 0's counts are taken."""
    return evaluate_decision(network, split.X, split.y, problem, group=group, sharded=split is train)


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
    if isinstance(best, WithinNoiseIterate):
        return best.offer(monitored, step, train_feasible=train_eval.feasible, train_objective=train_eval.objective)
    return best.offer(monitored, step, train_feasible=train_eval.feasible)


class RowAdam:
    """Adam on the per-row vector s that touches only the given rows (their moments and step counts).

    torch's Adam would move every row by its stale momentum on each
    mini-batch step; here a row changes only when its batch comes, and s is
    projected back onto [0, 1] after every step.
    """

    def __init__(self, n: int, device: torch.device, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.m = torch.zeros(n, device=device)
        self.v = torch.zeros(n, device=device)
        self.t = torch.zeros(n, device=device)
        self.b1, self.b2, self.eps = betas[0], betas[1], eps

    @torch.no_grad()
    def step(self, s: torch.Tensor, rows: torch.Tensor | slice, grad: torch.Tensor, lr: float) -> None:
        t = self.t[rows] + 1
        m = self.b1 * self.m[rows] + (1 - self.b1) * grad
        v = self.b2 * self.v[rows] + (1 - self.b2) * grad * grad
        self.t[rows], self.m[rows], self.v[rows] = t, m, v
        m_hat = m / (1 - torch.pow(self.b1, t))
        v_hat = v / (1 - torch.pow(self.b2, t))
        s[rows] = (s[rows] - lr * m_hat / (v_hat.sqrt() + self.eps)).clamp_(0.0, 1.0)


def penalty_value(
    logits: torch.Tensor,
    s_rows: torch.Tensor,
    positive_rows: torch.Tensor,
    totals: tuple[torch.Tensor, torch.Tensor],
    scale: float,
    problem,
    n_pos: int,
    row_penalty: torch.Tensor,
    row_reg: torch.Tensor,
    mu0: float,
    batch_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact penalty function F on a batch of rows (all rows in full-batch mode), and its per-row part.

    The metric uses the totals over all of s, with the batch rows' share made
    differentiable and scaled by n/b, so its gradient w.r.t. a row of s is
    the full-batch one times n/b, like the batch means of the per-row terms.
    batch_rows (torchrun): the rows of the whole batch, every process's; the per-row terms of this process's
    rows are summed over it, so the processes' parts add up to the batch mean.
    """
    tp_b, fp_b = soft_counts(s_rows, positive_rows)
    tp = totals[0] + scale * (tp_b - tp_b.detach())
    fp = totals[1] + scale * (fp_b - fp_b.detach())
    objective, gap = metric_terms(problem, tp, fp, n_pos)
    z = torch.sigmoid(logits) - 0.5
    penalty = row_penalty * violations(s_rows, z, positive_rows)
    regularizer = row_reg * agreement_bce(logits, s_rows)
    if batch_rows is None:  # the batch mean, summed in this order as always (the same floats, the same runs)
        penalty_part, regularizer_part = penalty.mean(), regularizer.mean()
    else:
        penalty_part, regularizer_part = penalty.sum() / batch_rows, regularizer.sum() / batch_rows
    loss = -objective + penalty_part
    loss = loss + regularizer_part
    if gap is not None:
        loss = loss + mu0 * torch.clamp(gap, min=0.0)
    return loss, (penalty_part + regularizer_part).detach()


def _inner_solve(
    network: torch.nn.Module,
    s: torch.Tensor,
    s_adam: RowAdam,
    train: SplitData,
    problem,
    weights: tuple[torch.Tensor, torch.Tensor],
    mu0: float,
    cfg: Settings,
    batch: int,
    generator: torch.Generator,
    rows: ProcessGroup | OneProcess,
    n: int,
    n_pos: int,
) -> int:
    """Adam over (theta, s) on the penalty function for fixed penalties; returns the steps taken.

    Under torchrun each process steps on a batch of its own rows (its s rows stay its own); the soft counts,
    the batch size and the network's gradients are summed over the processes at every step, so a step is
    the one-process step on the union of their batches (the MLP's BatchNorm normalizes each process's batch on
    its own, as DDP does). n, n_pos: every process's rows.
    """
    positive = train.y == 1
    per_process = rows.largest_share(n)
    full = batch >= per_process
    per_epoch = math.ceil(per_process / batch)
    max_steps = cfg.inner_steps if full else cfg.inner_epochs * per_epoch
    check_every = 1 if full else per_epoch
    patience = cfg.inner_patience if full else 3
    optimizer = adam(network.parameters(), lr=cfg.lr)
    network.train()
    checks: list[float] = []
    running, running_rows, steps = torch.zeros((), device=s.device), torch.zeros((), device=s.device), 0
    rows_iter = endless_minibatches(train.n, batch, generator, s.device)
    for step in range(max_steps):
        decay = 0.5 * (1.0 + math.cos(math.pi * step / max_steps))
        for param_group in optimizer.param_groups:
            param_group["lr"] = cfg.lr * decay
        picked = next(rows_iter)
        index: torch.Tensor | slice = slice(None) if full else picked
        s_rows = s[index].detach().requires_grad_(True)
        with torch.no_grad():
            tp, fp = soft_counts(s, positive)  # float64 on the wire: a batch's row count stays exact past 2^24
            summed = rows.sum(
                torch.stack([tp.double(), fp.double(), tp.new_tensor(s_rows.numel(), dtype=torch.float64)])
            )
            tp, fp, batch_rows = summed[0].to(s.dtype), summed[1].to(s.dtype), float(summed[2])
        optimizer.zero_grad(set_to_none=True)
        logits = network(train.X[index]).squeeze(-1)
        loss, row_part = penalty_value(
            logits,
            s_rows,
            positive[index],
            (tp, fp),
            n / batch_rows,
            problem,
            n_pos,
            weights[0][index],
            weights[1][index],
            mu0,
            batch_rows=batch_rows if rows.world_size > 1 else None,
        )
        loss.backward()
        rows.sum_gradients(network.parameters())
        optimizer.step()
        s_adam.step(s, index, s_rows.grad, cfg.lr_s * decay)
        running += loss.detach()
        running_rows += row_part
        steps = step + 1
        if steps % check_every == 0:  # F of the whole batch: the shared metric terms once, every process's rows
            total = running if rows.world_size == 1 else running - running_rows + rows.sum(running_rows)
            # rank 0's value: the processes' float sums can differ in the last bits, and all must stop alike
            checks.append(float(rows.from_rank_zero(total)) / check_every)
            running.zero_()
            running_rows.zero_()
            if _converged(checks, patience, cfg.inner_tol, cfg.inner_rule):
                break
    return steps


def _converged(checks: list[float], patience: int, tol: float, rule: str) -> bool:
    """Subproblem stopping test on the recorded loss values.

    best (the authors'): no new best for `patience` checks. window (fast): the
    loss fell by less than tol (relative) over the last `patience` checks; it
    tolerates the rise of F in the first Adam steps on s (which leave the
    kink of the l1 penalty), where `best` stops before any progress.
    """
    if rule == "best":
        return len(checks) > patience and min(checks[-patience:]) >= min(checks[:-patience]) - 1e-6 * max(
            1.0, abs(min(checks))
        )
    return len(checks) > 2 * patience and checks[-1 - patience] - checks[-1] < tol * max(1.0, abs(checks[-1]))


def _warm_start(
    network: torch.nn.Module,
    train: SplitData,
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
            if stopper.step(float(rows.sum(running)) / since_check):
                break
            running.zero_()
            since_check = 0
    stopper.restore()
    return steps


@torch.no_grad()
def _initial_s(
    network: torch.nn.Module,
    train: SplitData,
    problem,
    init: str,
    generator: torch.Generator,
    rows: ProcessGroup | OneProcess,
) -> torch.Tensor:
    """s at the start of the penalty phase (see the module docstring for `ta`)."""
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
    return [m for m in network.modules() if isinstance(m, torch.nn.Linear)][-1]


def _monitor_split(
    train: SplitData, val: SplitData | None, folding: int, fold: int, seed: int
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
    generator = torch.Generator().manual_seed(seed)
    fold_of = torch.empty_like(y)
    for label in (0, 1):
        rows = torch.nonzero(y == label).squeeze(-1)
        order = rows[torch.randperm(rows.numel(), generator=generator)]
        fold_of[order] = torch.arange(order.numel()) % k
    return fold_of == fold
