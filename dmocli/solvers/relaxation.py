"""Differentiable pieces shared by the metric-optimizing solvers (docs/algorithms.md#ero).

ERO lifts every prediction 1{g(x_i) > t} to a variable s_i in [0,1] and ties
the two together with the exact one-sided identities built on
h(s, z) = clip01(s + z) - s; the smoothed baselines (sigmoid-f1, lagrangian)
replace the indicator by a sigmoid instead. Both end up with "soft counts"
TP = sum_P s, FP = sum_N s, from which the same objective and constraint are
computed here, so every solver optimizes the very quantities that
`problems.Problem` evaluates on hard counts.
"""

from __future__ import annotations

import torch

from dmocli.operating_point.problems import Problem


def h(s: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """h(s, z) = clip01(s + z) - s = max(z, -s) - max(s + z - 1, 0)."""
    return torch.maximum(z, -s) - torch.clamp(s + z - 1.0, min=0.0)


def violations(s: torch.Tensor, z: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Per-row violation c_i: positives max(0, -h) (s may not exceed the prediction), negatives max(0, h)."""
    hv = h(s, z)
    return torch.where(positive, torch.clamp(-hv, min=0.0), torch.clamp(hv, min=0.0))


def metric_terms(
    problem: Problem, tp: torch.Tensor, fp: torch.Tensor, n_pos: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(objective to maximize, constraint gap a - metric (<= 0 is feasible) or None) from soft counts.

    Matches `Problem.objective` / `Problem.constrained_metric` on hard counts;
    precision of an empty prediction is 0, as there.
    """
    eps = 1e-12
    predicted = tp + fp
    prec = tp / predicted.clamp(min=eps)
    rec = tp / max(n_pos, eps)
    if problem.kind == "fpor":
        return rec, problem.target - prec
    if problem.kind == "frop":
        return prec, problem.target - rec
    b2 = problem.beta * problem.beta
    return (1 + b2) * tp / (b2 * n_pos + predicted).clamp(min=eps), None


def soft_counts(s: torch.Tensor, positive: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """TP = sum over positives of s, FP = sum over negatives of s."""
    pos = positive.to(s.dtype)
    tp = (s * pos).sum()
    return tp, s.sum() - tp


def agreement_bce(logits: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Per-row BCE(g = sigmoid(logit), target s), differentiable in both (ERO's regularizer R)."""
    return -(s * torch.nn.functional.logsigmoid(logits) + (1.0 - s) * torch.nn.functional.logsigmoid(-logits))
