"""The penalty subproblem of ERO: the penalty function of (network, s) and its inner Adam loop, with s's own
per-row Adam state."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from dmocli.engines.torch_distributed import OneProcess
from dmocli.solvers.base import SplitData
from dmocli.solvers.ero.settings import Settings
from dmocli.solvers.loop import adam, endless_minibatches
from dmocli.solvers.relaxation import agreement_bce, metric_terms, soft_counts, violations

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup
    from dmocli.solvers.selection import Evaluation


class Penalties:
    """The exact penalty's parameters and the authors' outer update rule (docs/algorithms.md#ero), one copy for the
    network solver and the tree solver.

    Per row: the class weight of the penalty w_i (the rare class weighs more) and of the agreement regularizer
    r_i, and the penalty mu_i on the row's one-sided identities; mu0 on the metric constraint, lam on the
    regularizer. `positive` holds this process's rows; n and n_pos count every process's.
    """

    def __init__(self, positive: torch.Tensor, n: int, n_pos: int, cfg: Settings):
        self.w = torch.where(positive, (n - n_pos) / n, n_pos / n).to(torch.float32)
        self.rw = (
            torch.where(positive, n / (2 * n_pos), n / (2 * (n - n_pos))).to(torch.float32)
            if cfg.reg_weighting == "balanced"
            else torch.ones_like(self.w)
        )
        self.mu = torch.full(positive.shape, cfg.mu_init, device=positive.device)
        self.mu0, self.lam, self.growth = cfg.mu0, cfg.lam, cfg.growth

    def row_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu_i w_i, lam r_i): the per-row weights of the penalty and of the regularizer in F."""
        return self.mu * self.w, self.lam * self.rw

    @torch.no_grad()
    def update(self, violating: torch.Tensor, gap: float) -> None:
        """mu_i grows on violating rows and shrinks elsewhere; mu0 grows while the metric gap is positive; lam grows."""
        self.mu = torch.where(violating, self.mu * self.growth, self.mu / self.growth)
        if gap > 0:
            self.mu0 *= self.growth
        self.lam *= self.growth

    def summary(self, mu: torch.Tensor) -> dict[str, float]:
        """The trace's penalty parameters; `mu`: every process's rows."""
        return {
            "mu0": self.mu0,
            "lam": self.lam,
            "mu_min": float(mu.min()),
            "mu_median": float(mu.median()),
            "mu_max": float(mu.max()),
        }


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
    *,
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


def inner_solve(
    network: torch.nn.Module,
    s: torch.Tensor,
    *,
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
            positive_rows=positive[index],
            totals=(tp, fp),
            scale=n / batch_rows,
            problem=problem,
            n_pos=n_pos,
            row_penalty=weights[0][index],
            row_reg=weights[1][index],
            mu0=mu0,
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


def outer_record(
    *,
    seconds: float,
    n_violating: int,
    max_violation: float,
    gap: float,
    objective: float,
    train_eval: Evaluation,
    monitored: Evaluation,
    monitor_name: str,
) -> dict[str, Any]:
    """One outer iteration's entry of the solver trace, after the caller's own keys (steps for a network, rounds
    for trees): the same figures whichever model ERO trains, so a report reads alike for both."""
    return {
        "seconds": seconds,
        "n_violating": n_violating,
        "max_violation": max_violation,
        "metric_gap_on_s": gap,
        "objective_on_s": objective,
        "train_objective": train_eval.objective,
        "train_feasible": train_eval.feasible,
        f"{monitor_name}_objective": monitored.objective,
        f"{monitor_name}_feasible": monitored.feasible,
    }


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
