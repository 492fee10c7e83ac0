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
from typing import TYPE_CHECKING, Any

import torch

from dmocli.models.networks import logits_of
from dmocli.operating_point.problems import Problem

if TYPE_CHECKING:
    from dmocli.engines.torch_distributed import ProcessGroup


@dataclass
class Evaluation:
    """Hard-count metrics of the decision logit >= 0 on one split."""

    tp: int
    fp: int
    n_pos: int
    objective: float
    constrained: float | None
    feasible: bool | None

    @classmethod
    def from_counts(cls, tp: int, fp: int, n_pos: int, problem: Problem) -> "Evaluation":
        """The problem's objective, constrained metric and feasibility of these counts."""
        constrained = problem.constrained_metric(tp, fp, n_pos)
        return cls(
            tp,
            fp,
            n_pos,
            float(problem.objective(tp, fp, n_pos)),
            None if constrained is None else float(constrained),
            problem.feasible(tp, fp, n_pos),
        )

    def standard_error(self, problem: Problem) -> float:
        """Binomial standard error of the objective (precision: over predicted positives, else positives)."""
        rows = self.tp + self.fp if problem.objective_name == "precision" else self.n_pos
        p = min(max(self.objective, 0.0), 1.0)
        return (p * (1.0 - p) / max(rows, 1)) ** 0.5

    def rank_key(self) -> tuple[float, ...]:
        """Larger is better: feasible first by objective, infeasible by how close the constraint is."""
        if self.constrained is None:
            return (1.0, self.objective)
        if self.feasible:
            return (1.0, self.objective, self.constrained)
        return (0.0, self.constrained, self.objective)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "constrained_metric": self.constrained,
            "feasible": self.feasible,
            "tp": self.tp,
            "fp": self.fp,
            "n_pos": self.n_pos,
        }


def evaluate_decision(
    network: torch.nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    problem: Problem,
    threshold: float = 0.0,
    group: ProcessGroup | None = None,
    sharded: bool = True,
) -> Evaluation:
    """Counts at `logit >= threshold` (eval mode), then the problem's objective and constraint. With a torchrun
    `group`: X and y are this process's rows and the counts are summed over every process's (sharded), or
    every process holds the whole split (--val) and rank 0's counts are taken, so all keep the same iterate."""
    predicted = logits_of(network, X) >= threshold
    positive = y == 1
    counts = torch.stack([(predicted & positive).sum(), (predicted & ~positive).sum(), positive.sum()])
    if group is not None:
        counts = group.sum(counts) if sharded else group.from_rank_zero(counts)
    tp, fp, n_pos = (int(c) for c in counts.tolist())
    return Evaluation.from_counts(tp, fp, n_pos, problem)


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


class WithinNoiseIterate(BestIterate):
    """BestIterate, then among the iterates the monitored split cannot tell apart, the best on train.

    The monitored objective is a proportion over a few hundred rows at most
    (val precision on page_blocks0 rests on ~100 predicted positives: one
    standard error is ~0.03), so the strict arg-max over iterates mostly
    picks noise and, in practice, the earliest, least-fitted iterate.
    Among iterates in the same feasibility class as the best whose monitored
    objective is within one binomial standard error of it, this keeps the one
    with the best train objective (the problem actually solved); later wins ties.
    """

    def __init__(self, network: torch.nn.Module, problem: Problem):
        super().__init__(network)
        self.problem = problem
        self.candidates: list[tuple[tuple[float, ...], Evaluation, int, float, dict[str, torch.Tensor]]] = []

    def offer(
        self,
        evaluation: Evaluation,
        step: int,
        train_feasible: bool | None = None,
        train_objective: float = float("-inf"),
    ) -> bool:
        improved = super().offer(evaluation, step, train_feasible)
        key = (float(train_feasible is not False), *evaluation.rank_key())
        self.candidates.append((key, evaluation, step, train_objective, copy.deepcopy(self.network.state_dict())))
        return improved

    def restore(self) -> None:
        if self.best is None or self.best.feasible is False:
            super().restore()
            return
        floor = self.best.objective - self.best.standard_error(self.problem)
        same_class = [c for c in self.candidates if c[0][:2] == self.best_key[:2] and c[1].objective >= floor]
        key, evaluation, step, _, state = max(same_class, key=lambda c: (c[3], c[2]))
        self.best, self.best_step, self.best_key, self.best_state = evaluation, step, key, state
        super().restore()
