"""The safety net of the semi-supervised solvers: keep their model only when the unlabeled rows helped.

A semi-supervised fit can lose to plain supervised training on the labeled
rows alone (issue 22: unlabeled rows from another distribution, pseudo-labels
that compound a head-class bias). A user who added unlabeled rows must not get
a worse model than if they had thrown them away, so with `--param
fallback=true` (the default) the semi-supervised fit is judged against `wce`
(class-weighted cross-entropy, the same model, the same labeled rows) on
labeled rows neither saw:

- with a validation split (`--val` or `--val-frac`): both are fitted once and
  scored on it;
- without one: the labeled rows are dealt into `fallback-folds` stratified
  folds; each method is fitted once per fold (the semi-supervised one with
  every unlabeled row) and the held-out fold is scored; the scores are pooled
  over the folds (each labeled row scored once), then the winner is fitted on
  all rows. Classes with fewer than 2 labeled rows stay in every fold's
  training part and are not judged (a fold without its only row can predict it
  by neither method).

The score is balanced accuracy for multi-class problems, and for binary ones
the problem's objective at the exact threshold searched on the held-out
scores (a cut meeting the target ranks above one that does not). The
semi-supervised model is kept only if it scores higher by more than `margin`
standard errors of the difference (a paired bootstrap of the held-out rows,
resampled within each class so that every class keeps its count); otherwise
the supervised one is returned with a warning. The held-out rows are few
(a long tail has one or two labeled rows in its rarest classes, and each
weighs 1/(K n_k) in balanced accuracy), so a plain "higher" follows the
noise: on bench/adsh.py the sign of the held-out difference agreed with the
sign of the test difference in barely more than half of the runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import torch

from dmocli.models.networks import logits_of
from dmocli.operating_point.metrics import multiclass_scores
from dmocli.operating_point.search import search
from dmocli.solvers.base import FitContext, FitResult, SplitData

Fit = Callable[[SplitData, "SplitData | None", FitContext], FitResult]


def labeled_folds(y: np.ndarray, k: int, seed: int) -> np.ndarray:
    """A fold in [0, k) for each labeled row, -1 for unlabeled rows and for rows of classes with fewer than 2
    labeled rows (never held out). Each class is dealt round-robin in a seeded random order, continuing where the
    previous class stopped, so small classes spread over the folds."""
    rng = np.random.default_rng(seed)
    folds = np.full(y.size, -1, dtype=np.int64)
    start = 0
    for cls in np.unique(y[y >= 0]):
        rows = np.flatnonzero(y == cls)
        if rows.size < 2:
            continue
        rng.shuffle(rows)
        folds[rows] = (start + np.arange(rows.size)) % k
        start = (start + rows.size) % k
    return folds


def score(logits: np.ndarray, y: np.ndarray, ctx: FitContext) -> tuple[float, float, str]:
    """(rank key, reported value, metric name) of held-out logits: balanced accuracy (multi-class), or the binary
    problem's objective at its exact threshold on these rows, a feasible cut ranking above any infeasible one."""
    if ctx.problem is None:
        value = multiclass_scores(y, logits.argmax(axis=1), max(2, ctx.architecture.n_outputs))["balanced_accuracy"]
        return value, value, "balanced_accuracy"
    if not y.any() or y.all():
        return 0.0, float("nan"), ctx.problem.objective_name  # one class held out: nothing to judge
    point = search(logits.reshape(-1), y, ctx.problem)
    rank = point.objective + (0.0 if point.feasible is not False else -2.0)
    return rank, point.objective, f"{ctx.problem.objective_name} ({ctx.problem.describe()}) at the exact threshold"


BOOTSTRAPS = 200


def bootstrap_se(semi: np.ndarray, sup: np.ndarray, y: np.ndarray, ctx: FitContext) -> float:
    """Standard error of score(semi) - score(sup) over paired resamples of the held-out rows, each class resampled
    within itself."""
    rng = np.random.default_rng(ctx.seed)
    groups = [np.flatnonzero(y == cls) for cls in np.unique(y)]
    diffs = []
    for _ in range(BOOTSTRAPS):
        rows = np.concatenate([rng.choice(g, g.size) for g in groups])
        diffs.append(score(semi[rows], y[rows], ctx)[1] - score(sup[rows], y[rows], ctx)[1])
    return float(np.nanstd(diffs))


def held_out_logits(result: FitResult, X: torch.Tensor, n_outputs: int) -> np.ndarray:
    out = logits_of(result.network.eval(), X).float().cpu().numpy()
    return out.reshape(-1) if n_outputs == 1 else out


def fit_with_fallback(
    name: str, fit_semi: Fit, *, train: SplitData, val: SplitData | None, ctx: FitContext, k: int, margin: float
) -> FitResult:
    """The better of `fit_semi` (labeled and unlabeled rows) and `wce` (labeled rows), judged as the module
    docstring says; the result's trace has a `fallback` section and, when wce won, a warning."""
    from dmocli.solvers.wce import WeightedCrossEntropy  # same layer; imported here so wce never loads for nothing

    supervised = WeightedCrossEntropy()
    sup_ctx = dataclasses.replace(ctx, params=WeightedCrossEntropy.Params())
    labeled = train.labeled()
    n_out = ctx.architecture.n_outputs
    if val is not None and val.n:
        semi = fit_semi(train, val, ctx)
        sup = supervised.fit(labeled, val, sup_ctx)
        y_held = val.y.cpu().numpy()
        semi_logits, sup_logits = held_out_logits(semi, val.X, n_out), held_out_logits(sup, val.X, n_out)
        judged_on = f"the validation split ({val.n} labeled rows)"
        finals: dict[str, FitResult] = {"semi": semi, "supervised": sup}
    else:
        folds = labeled_folds(train.y.cpu().numpy(), k, ctx.seed)
        judged = np.flatnonzero(folds >= 0)
        shape = (judged.size,) if n_out == 1 else (judged.size, n_out)
        semi_logits, sup_logits = np.empty(shape, np.float32), np.empty(shape, np.float32)
        position = np.full(folds.size, -1)
        position[judged] = np.arange(judged.size)
        for fold in range(k):
            held = np.flatnonzero(folds == fold)
            if held.size == 0:
                continue
            keep = torch.as_tensor(np.flatnonzero(folds != fold), device=train.y.device)
            part = train.take(keep)
            held_X = train.X[torch.as_tensor(held, device=train.X.device)]
            semi_logits[position[held]] = held_out_logits(fit_semi(part, None, ctx), held_X, n_out)
            sup_part = part.labeled()
            sup_logits[position[held]] = held_out_logits(supervised.fit(sup_part, None, sup_ctx), held_X, n_out)
        y_held = train.y.cpu().numpy()[judged]
        judged_on = f"{k} folds of the labeled rows ({judged.size} rows scored out of fold)"
        finals = {}
    semi_rank, semi_value, metric = score(semi_logits, y_held, ctx)
    sup_rank, sup_value, _ = score(sup_logits, y_held, ctx)
    se = bootstrap_se(semi_logits, sup_logits, y_held, ctx)
    winner = "semi" if semi_rank > sup_rank and semi_value - sup_value > margin * se else "supervised"
    result = finals.get(winner)
    if result is None:
        result = fit_semi(train, None, ctx) if winner == "semi" else supervised.fit(labeled, None, sup_ctx)
    verdict: dict[str, Any] = {
        "judged_on": judged_on,
        "metric": metric,
        name: semi_value,
        "wce": sup_value,
        "difference": semi_value - sup_value,
        "standard_error": se,
        "margin": margin,
        "saved": name if winner == "semi" else "wce",
    }
    trace = dict(result.trace) if winner == "semi" else {"supervised_trace": result.trace}
    trace["fallback"] = verdict
    warnings = list(result.warnings)
    if winner == "supervised":
        warnings.append(
            f"the unlabeled rows did not help: supervised wce on the labeled rows scored {sup_value:.4f} "
            f"{metric} against {semi_value:.4f} for {name} on {judged_on} (keeping {name} needs a gain above "
            f"{margin:g} x {se:.4f}, the difference's standard error); the saved model is the supervised one "
            f"(--param fallback=false keeps {name}'s)"
        )
    return FitResult(network=result.network, trace=trace, threshold=result.threshold, warnings=warnings)
