"""Keep the best iterate of a metric-optimizing solver, judged by the true metrics at the model's own decision.

The paper keeps "the best model during training": the best objective among
iterates whose constrained metric meets the target on the monitored split,
else the least violating one. Judging by hard counts at logit 0 (the decision
the solver trains for) rather than by a surrogate loss is what makes the
choice comparable across solvers.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from ..networks import logits_of
from ..problems import Problem


@dataclass
class Evaluation:
    """Hard-count metrics of the decision logit >= 0 on one split."""

    tp: int
    fp: int
    n_pos: int
    objective: float
    constrained: float | None
    feasible: bool | None

    def rank_key(self) -> tuple[float, ...]:
        """Larger is better: feasible first by objective, infeasible by how close the constraint is."""
        if self.constrained is None:
            return (1.0, self.objective)
        if self.feasible:
            return (1.0, self.objective, self.constrained)
        return (0.0, self.constrained, self.objective)

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "constrained_metric": self.constrained, "feasible": self.feasible,
                "tp": self.tp, "fp": self.fp, "n_pos": self.n_pos}


def evaluate_decision(network: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, problem: Problem,
                      threshold: float = 0.0) -> Evaluation:
    """Counts at `logit >= threshold` (eval mode), then the problem's objective and constraint."""
    predicted = logits_of(network, X) >= threshold
    positive = y == 1
    tp = int((predicted & positive).sum())
    fp = int((predicted & ~positive).sum())
    n_pos = int(positive.sum())
    constrained = problem.constrained_metric(tp, fp, n_pos)
    return Evaluation(tp, fp, n_pos, float(problem.objective(tp, fp, n_pos)),
                      None if constrained is None else float(constrained), problem.feasible(tp, fp, n_pos))


class BestIterate:
    """Remember the network state with the best `Evaluation.rank_key` seen so far."""

    def __init__(self, network: torch.nn.Module):
        self.network = network
        self.best: Evaluation | None = None
        self.best_step: int | None = None
        self.best_key: tuple[float, ...] = ()
        self.best_state: dict[str, torch.Tensor] | None = None

    def offer(self, evaluation: Evaluation, step: int, train_feasible: bool | None = None) -> bool:
        """Record an iterate; True when it is the new best (its weights are copied).

        With `train_feasible`, iterates that meet the constraint on the
        training data (the problem actually solved) rank above those that do not.
        """
        key = (float(train_feasible is not False), *evaluation.rank_key())
        if self.best is not None and not key > self.best_key:
            return False
        self.best, self.best_step, self.best_key = evaluation, step, key
        self.best_state = copy.deepcopy(self.network.state_dict())
        return True

    def restore(self) -> None:
        if self.best_state is not None:
            self.network.load_state_dict(self.best_state)

