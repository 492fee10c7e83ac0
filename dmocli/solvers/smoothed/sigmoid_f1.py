"""SigmoidF1 (Bénédict et al.), the paper's OFBS baseline: maximize a sigmoid-smoothed F-beta.

Each prediction 1{g(x) > t} becomes sigmoid(tau (g(x) - t) + offset) with
g = sigmoid(logit) and t = 1/2; the soft counts give a differentiable
F-beta that Adam maximizes directly. The temperature tau trades gradient
signal (small tau) against fidelity to the true F-beta (large tau).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dmocli.solvers.base import FitContext, FitResult, InMemorySolver, SplitData
from dmocli.solvers.smoothed.training import LoopSettings, fit_smoothed


class SigmoidF1(InMemorySolver):
    name = "sigmoid-f1"
    summary = "sigmoid-smoothed F-beta maximization (SigmoidF1), OFBS only"
    problems = ("ofbs",)

    distributed = True

    @dataclass
    class Params(LoopSettings):
        tau: float = field(
            default=10.0,
            metadata={"positive": True, "help": "sigmoid temperature on g - 1/2 (larger: closer to the step)"},
        )
        offset: float = field(default=0.0, metadata={"help": "horizontal offset added inside the sigmoid"})

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        import torch

        from dmocli.solvers.relaxation import metric_terms

        p = ctx.params
        problem = ctx.problem

        def soft(logits: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(p.tau * (torch.sigmoid(logits) - 0.5) + p.offset)

        def loss_of(tp: torch.Tensor, fp: torch.Tensor, n_pos: float) -> torch.Tensor:
            return -metric_terms(problem, tp, fp, n_pos)[0]

        return fit_smoothed(train, val, ctx, soft_prediction=soft, loss_of=loss_of, loop=p, name=self.name)
