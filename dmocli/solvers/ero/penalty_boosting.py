"""ERO for gradient-boosted trees (docs/ero.md): the exact penalty of docs/algorithms.md#ero, with boosting rounds
in place of the network's Adam steps.

The penalty function F(f, s) is the torch solver's (`ero/penalty.py: penalty_value`):
the metric on the per-row variables s, the l1 penalty mu_i w_i c_i(s, z_i) on the
one-sided identities with z_i = sigmoid(f_i - shift) - 1/2, the BCE agreement term
lam R(f, s), and mu0 times the metric constraint's gap. f is now the trees'
margin. One inner step is `s-steps` projected Adam steps on s (f fixed, as
RowAdam does for the torch solver) and then one boosting round fitted to the
per-row gradient dF/df_i with the curvature (lam r_i + mu_i w_i) p_i (1 - p_i),
p_i = sigmoid(f_i - shift): the agreement BCE's own curvature, weighted by each
row's total weight, which keeps a Newton step of the same size as the
penalties grow. `tree-rounds` rounds make one outer iteration; then the
authors' update rule (mu_i grows on violating rows and shrinks elsewhere, mu0
grows while the metric gap is positive, lam grows). Each outer iterate is
judged at its own exact operating point on the held-out rows (validation
split, else a stratified `stop-frac` of the training rows), and the trees are
cut at the round of the best. Where those rows hold fewer than
`stop-min-positives` positives (solvers/boosting.py), nothing can judge the
iterates: the warm start, on the fixed schedule, is the model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.models.trees import BoostedTrees
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search
from dmocli.solvers.base import FitContext, FitResult, SplitData
from dmocli.solvers.boosting import Held, boost_weighted, held_out
from dmocli.solvers.ero.penalty import Penalties, RowAdam, outer_record, penalty_value
from dmocli.solvers.ero.settings import Settings
from dmocli.solvers.relaxation import metric_terms, soft_counts, violations
from dmocli.solvers.selection import Evaluation

KEPT_WARM_START = "warm start kept: no held-out rows to judge iterates"


def _at_best_cut(scores: np.ndarray, y: np.ndarray, problem: Problem) -> Evaluation:
    """The metrics of the exact best cut of these scores (docs/operating-points.md)."""
    point = search(scores, y, problem)
    return Evaluation.from_counts(point.tp, point.fp, point.tp + point.fn, problem)


def _clearly_better(
    key: tuple[float, ...], evaluation: Evaluation, *, best_key: tuple[float, ...], best: Evaluation, problem: Problem
) -> bool:
    """A later iterate (more trees) replaces the kept one only when the held-out rows can tell them apart: in a
    better feasibility class, or, both feasible, by more than one binomial standard error of the kept
    objective. The threshold is searched on the same rows afterwards, and a strict arg-max over iterates would
    add its own optimism to the search's."""
    if evaluation.feasible is False or best.feasible is False:
        return key > best_key
    return evaluation.objective > best.objective + best.standard_error(problem)


def round_gradients(
    logits: torch.Tensor,
    s: torch.Tensor,
    *,
    positive: torch.Tensor,
    problem: Problem,
    n_pos: int,
    row_penalty: torch.Tensor,
    row_reg: torch.Tensor,
    mu0: float,
) -> tuple[np.ndarray, np.ndarray]:
    """What one boosting round fits, per row (n,): the gradient of n F (the penalty function on the sum scale of
    XGBoost's objectives) in the margin f_i for fixed s, and the curvature (row_reg + row_penalty) p (1 - p)."""
    logits = logits.detach().clone().requires_grad_(True)
    loss, _ = penalty_value(
        logits,
        s.detach(),
        positive_rows=positive,
        totals=soft_counts(s, positive),
        scale=1.0,
        problem=problem,
        n_pos=n_pos,
        row_penalty=row_penalty,
        row_reg=row_reg,
        mu0=mu0,
    )
    (grad,) = torch.autograd.grad(loss, logits)
    p = torch.sigmoid(logits.detach())
    hess = ((row_reg + row_penalty) * p * (1 - p)).clamp(min=1e-6)
    return (grad * len(logits)).numpy().astype(np.float32), hess.numpy().astype(np.float32)


def fit_ero_trees(
    train: SplitData, val: SplitData | None, ctx: FitContext, *, cfg: Settings, rounds_per_outer: int, s_steps: int
) -> FitResult:
    """The warm start (class-weighted boosting), s started at its exact best cut, then the outer iterations; the
    trees are cut at the round of the iterate the held-out rows kept (see the module docstring)."""
    started = time.perf_counter()
    problem = ctx.problem
    held = held_out(train, val, ctx.params, ctx)
    booster, dtrain, warm_trace = boost_weighted(held, ctx)
    y = held.y
    n, n_pos = len(y), int(y.sum())
    if n_pos == 0 or n_pos == n:
        raise DmoError("ERO needs both classes in the training data")
    margins = booster.predict(dtrain, output_margin=True)
    start = search(margins, y, problem).threshold
    shift = float(start) if np.isfinite(start) else 0.0
    positive = torch.as_tensor(y == 1)
    run = _TreeRun(
        booster=booster,
        dtrain=dtrain,
        held=held,
        problem=problem,
        cfg=cfg,
        positive=positive,
        n_pos=n_pos,
        shift=shift,
        s=torch.as_tensor((margins >= shift).astype(np.float32)),
        penalties=Penalties(positive, n, n_pos, cfg),
        s_adam=RowAdam(n, torch.device("cpu")),
    )
    key, _, monitored = run.judged(margins)
    best = {"key": key, "rounds": booster.num_boosted_rounds(), "outer": 0, "eval": monitored}
    history = _outer_iterations(run, margins, best=best, rounds_per_outer=rounds_per_outer, s_steps=s_steps)
    trace = {
        "warm_start": warm_trace,
        "rounds_rule": {**held.rule, **({"ero": KEPT_WARM_START} if held.fixed else {})},
        "monitored_split": run.monitor_name,
        "rounds_per_outer": rounds_per_outer,
        "s_steps": s_steps,
        "outer_iterations": len(history),
        "selected_outer": best["outer"],
        "selected_rounds": best["rounds"],
        "selected": best["eval"].to_dict(),
        "penalty_parameters": run.penalties.summary(run.penalties.mu),
        "seconds": time.perf_counter() - started,
        "history": history,
    }
    kept = booster[: best["rounds"]]
    threshold = search(kept.predict(dtrain, output_margin=True), y, problem).threshold  # its own: train's best cut
    network = BoostedTrees.from_booster(kept, 1)
    return FitResult(network=network, threshold=float(threshold) if np.isfinite(threshold) else shift, trace=trace)


@dataclass
class _TreeRun:
    """What the outer iterations work on: the booster and its training matrix, the rows (held-out ones
    included), the penalty state and s, and the fixed shift of the margins (the warm start's exact cut)."""

    booster: Any  # xgboost.Booster, grown round by round
    dtrain: Any  # its xgboost.DMatrix
    held: Held  # the training rows and the monitored ones (solvers/boosting.py)
    problem: Problem
    cfg: Settings
    positive: torch.Tensor
    n_pos: int
    shift: float
    s: torch.Tensor
    penalties: Penalties
    s_adam: RowAdam

    @property
    def monitor_name(self) -> str:
        return self.held.monitor_name or "train"

    def judged(self, train_margins: np.ndarray) -> tuple[tuple[float, ...], Evaluation, Evaluation]:
        """(rank key, train and monitored evaluations) of an iterate. The held-out rows judge it at their own
        exact operating point, the one the threshold search after training finds: trees fit their training
        rows so closely that a threshold chosen there says little about new rows."""
        held, problem = self.held, self.problem
        on_train = _at_best_cut(train_margins, held.y, problem)
        if held.monitor is None:
            return (1.0, *on_train.rank_key()), on_train, on_train
        monitor_X, monitor_y = held.monitor[0], held.monitor[1]
        on_monitor = _at_best_cut(self.booster.inplace_predict(monitor_X, predict_type="margin"), monitor_y, problem)
        return on_monitor.rank_key(), on_train, on_monitor

    def boosted(self, margins: np.ndarray, *, rounds_per_outer: int, s_steps: int) -> np.ndarray:
        """One outer iteration's rounds, each `s_steps` projected Adam steps on s (f fixed) and then one boosting
        round on the penalty's per-row gradient and curvature; the new training margins."""
        positive, penalties = self.positive, self.penalties
        for step in range(rounds_per_outer):
            decay = 0.5 * (1.0 + math.cos(math.pi * step / rounds_per_outer))
            logits = torch.as_tensor(margins - self.shift, dtype=torch.float32)
            row_penalty, row_reg = penalties.row_weights()
            for _ in range(s_steps):  # f fixed: projected Adam on s, as the torch solver steps it
                s_rows = self.s.detach().requires_grad_(True)
                loss, _ = penalty_value(
                    logits,
                    s_rows,
                    positive_rows=positive,
                    totals=soft_counts(self.s, positive),
                    scale=1.0,
                    problem=self.problem,
                    n_pos=self.n_pos,
                    row_penalty=row_penalty,
                    row_reg=row_reg,
                    mu0=penalties.mu0,
                )
                loss.backward()
                self.s_adam.step(self.s, slice(None), s_rows.grad, self.cfg.lr_s * decay)
            grad, hess = round_gradients(
                logits,
                self.s,
                positive=positive,
                problem=self.problem,
                n_pos=self.n_pos,
                row_penalty=row_penalty,
                row_reg=row_reg,
                mu0=penalties.mu0,
            )
            self.booster.boost(self.dtrain, self.booster.num_boosted_rounds(), grad=grad, hess=hess)
            margins = self.booster.predict(self.dtrain, output_margin=True, training=True)
        return margins


def _outer_iterations(
    run: _TreeRun, margins: np.ndarray, *, best: dict[str, Any], rounds_per_outer: int, s_steps: int
) -> list[dict[str, Any]]:
    """The outer iterations (their history), `best` updated in place with each iterate the held-out rows can
    tell better; stopped once train-feasible and stale for `outer-patience` iterations."""
    cfg, positive, problem = run.cfg, run.positive, run.problem
    history: list[dict[str, Any]] = []
    stale = 0
    # Too few held-out positives to judge iterates on (solvers/boosting.py): the fixed-schedule warm start is kept,
    # as training rows would pick the iterate that fits them closest.
    outer_limit = 0 if run.held.fixed else cfg.outer
    with progress.task("ero (gbdt)", total=outer_limit, unit="outer iterations") as bar:
        for outer in range(1, outer_limit + 1):
            outer_started = time.perf_counter()
            margins = run.boosted(margins, rounds_per_outer=rounds_per_outer, s_steps=s_steps)
            with torch.no_grad():  # the authors' outer update, on an exact pass over the rows
                z = torch.sigmoid(torch.as_tensor(margins - run.shift, dtype=torch.float32)) - 0.5
                c = violations(run.s, z, positive)
                violating = c > cfg.violation_tol
                objective, gap = metric_terms(problem, *soft_counts(run.s, positive), run.n_pos)
                gap_value = float(gap) if gap is not None else 0.0
            run.penalties.update(violating, gap_value)
            key, train_eval, monitored = run.judged(margins)
            improved = _clearly_better(key, monitored, best_key=best["key"], best=best["eval"], problem=problem)
            if improved:
                best.update(key=key, rounds=run.booster.num_boosted_rounds(), outer=outer, eval=monitored)
            history.append(
                {
                    "outer": outer,
                    "rounds": run.booster.num_boosted_rounds(),
                    **outer_record(
                        seconds=time.perf_counter() - outer_started,
                        n_violating=int(violating.sum()),
                        max_violation=float(c.max()),
                        gap=gap_value,
                        objective=float(objective),
                        train_eval=train_eval,
                        monitored=monitored,
                        monitor_name=run.monitor_name,
                    ),
                }
            )
            stale = 0 if improved else stale + 1
            bar.advance(1, train_objective=train_eval.objective, violating=int(violating.sum()))
            train_feasible = train_eval.feasible is not False and not bool(violating.any()) and gap_value <= 0
            if cfg.outer_patience and train_feasible and stale >= cfg.outer_patience:
                break
    return history
