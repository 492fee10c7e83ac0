"""TFCO-style Lagrangian baseline: sigmoid-smoothed rates, multiplier by projected gradient ascent.

min over theta, max over lambda >= 0 of  -objective(q) + lambda (a - metric(q)),
q = sigmoid(logit / temperature) per row. theta takes Adam steps, lambda
takes a gradient-ascent step on the smoothed constraint gap after each one.
As the paper stresses, this finds a feasible point only when lambda gets
near the optimal multiplier, which is why every model still goes through
threshold adjustment. OFBS has no constraint: plain smoothed F-beta ascent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dmocli.solvers.base import FitContext, FitResult, InMemorySolver, SplitData
from dmocli.solvers.smoothed.training import LoopSettings, fit_smoothed


class Lagrangian(InMemorySolver):
    name = "lagrangian"
    summary = "TFCO-style Lagrangian on sigmoid-smoothed rates (multiplier by gradient ascent)"

    distributed = True

    @dataclass
    class Params(LoopSettings):
        temperature: float = field(default=1.0, metadata={"positive": True, "help": "q = sigmoid(logit / temperature)"})
        lr_multiplier: float = field(
            default=0.05, metadata={"positive": True, "help": "gradient-ascent step for the multiplier"}
        )
        multiplier_init: float = field(default=0.0, metadata={"min": 0, "help": "initial Lagrange multiplier"})

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        import torch

        from dmocli.solvers.relaxation import metric_terms

        p = ctx.params
        problem = ctx.problem
        state = {"multiplier": p.multiplier_init, "gap": 0.0}

        def soft(logits: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(logits / p.temperature)

        def loss_of(tp: torch.Tensor, fp: torch.Tensor, n_pos: float) -> torch.Tensor:
            objective, gap = metric_terms(problem, tp, fp, n_pos)
            if gap is None:
                return -objective
            state["gap"] = gap.detach()
            return -objective + state["multiplier"] * gap

        def ascend() -> None:
            if problem.constraint_name is not None:
                state["multiplier"] = max(0.0, state["multiplier"] + p.lr_multiplier * float(state["gap"]))

        result = fit_smoothed(
            train, val, ctx, soft_prediction=soft, loss_of=loss_of, loop=p, after_step=ascend, name=self.name
        )
        result.trace["final_multiplier"] = state["multiplier"]
        result.trace["final_smoothed_gap"] = float(state["gap"])
        return result
