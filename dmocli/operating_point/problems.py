"""The operating-point problems, evaluated on confusion counts.

One definition serves threshold search, evaluation, reports and the solvers:
FPOR (max recall s.t. precision >= a), FROP (max precision s.t. recall >= a),
OFBS (max F-beta) and VALUE (max the expected value of a gain matrix with per-row
amounts, operating_point/gain.py: its objective needs the rows' gains, not counts,
so the search computes it from the curve's gains, and a solver trains as for OFBS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dmocli.errors import DmoError
from dmocli.options import target_problem

ProblemKind = Literal["fpor", "frop", "ofbs", "value", "alerts"]
OFBS_HAS_NO_BOUND = (
    "--confidence bounds the constrained metric of fpor/frop (give --problem fpor|frop --target A); "
    "ofbs, the problem here, has none"
)
PROBLEMS: tuple[str, ...] = ("fpor", "frop", "ofbs", "value", "alerts")  # alerts: an alert budget alone
VALUE_HAS_NO_BOUND = (
    "--confidence bounds the constrained metric of fpor/frop; --problem value maximizes the expected value, whose "
    "interval the report gives (leave --confidence out)"
)


def safe_div(num, den):
    """num/den with 0 where den == 0 (precision of an empty prediction is taken as 0)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den > 0)
    return out if out.ndim else float(out)


def precision(tp, fp):
    return safe_div(tp, np.asarray(tp) + np.asarray(fp))


def recall(tp, n_pos):
    return safe_div(tp, n_pos)


def f_beta(tp, fp, n_pos, beta: float = 1.0):
    b2 = beta * beta
    return safe_div(
        (1 + b2) * np.asarray(tp, dtype=np.float64), b2 * np.asarray(n_pos) + np.asarray(tp) + np.asarray(fp)
    )


@dataclass(frozen=True)
class Problem:
    """An operating-point problem: kind, target a in (0,1) (FPOR/FROP) and beta (OFBS)."""

    kind: ProblemKind
    target: float | None = None
    beta: float = 1.0

    @classmethod
    def from_options(cls, kind: str, target: float | None, beta: float, confidence: float | None = None) -> "Problem":
        """The problem a command line asks for; --target or --confidence with ofbs is refused, not ignored (ofbs
        has no constraint to meet or bound). Model files go through the constructor, which stays lenient."""
        kind = kind.lower() if isinstance(kind, str) else kind
        if kind == "ofbs" and target is not None:
            raise DmoError("--target applies to fpor/frop; --problem ofbs maximizes F-beta (choose beta with --beta)")
        if kind == "ofbs" and confidence is not None:
            raise DmoError(OFBS_HAS_NO_BOUND)
        if kind == "value":
            _refuse_value_options(target, beta, confidence)
        return cls(kind, target, beta)

    def __post_init__(self) -> None:
        if isinstance(self.kind, str):  # `FPOR` as the README and papers write it
            object.__setattr__(self, "kind", self.kind.lower())
        if self.kind not in PROBLEMS:
            raise DmoError(f"--problem {self.kind!r} is not known (use fpor, frop, ofbs or value)")
        if self.kind in ("fpor", "frop"):
            if self.target is None:
                raise DmoError(f"--problem {self.kind} needs --target A with 0 < A < 1")
            problem = target_problem(self.target)
            if problem is not None:
                raise DmoError(problem)
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise DmoError(f"--beta {self.beta} must be a positive finite number (1 weighs precision and recall alike)")

    @property
    def objective_name(self) -> str:
        return {"fpor": "recall", "frop": "precision", "ofbs": "f_beta", "value": "value", "alerts": "recall"}[
            self.kind
        ]

    @property
    def constraint_name(self) -> str | None:
        return {"fpor": "precision", "frop": "recall", "ofbs": None, "value": None, "alerts": None}[self.kind]

    @property
    def trained_as(self) -> "Problem":
        """The problem a solver trains for: value's gains decide the cut, not the loss, so the model family trains
        as it does for OFBS (F1), as it does for alerts, whose budget decides the cut; every other problem as itself."""
        return Problem("ofbs") if self.kind in ("value", "alerts") else self

    def objective(self, tp, fp, n_pos):
        if self.kind == "value":
            raise DmoError("the value of a cut needs the rows' gains (--gain), not counts alone")
        if self.kind in ("fpor", "alerts"):  # alerts: the most recall within the alert budget (alert_budget.py)
            return recall(tp, n_pos)
        if self.kind == "frop":
            return precision(tp, fp)
        return f_beta(tp, fp, n_pos, self.beta)

    def constrained_metric(self, tp, fp, n_pos):
        """The metric that must reach the target (None for OFBS)."""
        if self.kind == "fpor":
            return precision(tp, fp)
        if self.kind == "frop":
            return recall(tp, n_pos)
        return None

    def feasible(self, tp, fp, n_pos) -> bool | None:
        value = self.constrained_metric(tp, fp, n_pos)
        if value is None:
            return None
        return bool(value >= self.target - 1e-12)

    def describe(self) -> str:
        if self.kind == "fpor":
            return f"max recall s.t. precision >= {self.target:g}"
        if self.kind == "frop":
            return f"max precision s.t. recall >= {self.target:g}"
        if self.kind == "value":
            return "max expected value"
        if self.kind == "alerts":
            return "max recall within the alert budget"
        return f"max F{self.beta:g}"

    def to_dict(self) -> dict:
        return {"problem": self.kind, "target": self.target, "beta": self.beta}


def _refuse_value_options(target: float | None, beta: float, confidence: float | None) -> None:
    """--problem value has no target, F-beta or bound: each given is refused, not ignored."""
    if target is not None:
        raise DmoError("--target applies to fpor/frop; --problem value maximizes the expected value of --gain")
    if beta != 1.0:
        raise DmoError("--beta weighs F-beta; --problem value maximizes the expected value of --gain (leave it out)")
    if confidence is not None:
        raise DmoError(VALUE_HAS_NO_BOUND)
