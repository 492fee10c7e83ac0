"""Registry of solvers: one module per solver, looked up by the name used on the command line.

Modules are imported on first use, so a command that runs one numpy solver
does not import torch and every other solver (seconds of start-up).
"""

from __future__ import annotations

from importlib import import_module

from dmocli.errors import DmoError
from dmocli.solvers.base import Solver

_SOLVERS: dict[str, str] = {  # name -> "module:class" under dmocli.solvers
    "wce": "wce:WeightedCrossEntropy",
    "ero": "ero:ERO",
    "sigmoid-f1": "sigmoid_f1:SigmoidF1",
    "lagrangian": "lagrangian:Lagrangian",
    "fixmatch": "fixmatch:FixMatch",
    "adsh": "adsh:Adsh",
    "lus": "lus:LocalUncertaintySampling",
    "fofo": "online:Fofo",
    "ofo": "online:Ofo",
    "lr": "online:OnlineLR",
}


def available() -> list[str]:
    return sorted(_SOLVERS)


def solver_class(name: str) -> type[Solver]:
    try:
        module, cls = _SOLVERS[name].split(":")
    except KeyError:
        raise DmoError(f"--solver {name!r} is not available (choose from: {', '.join(available())})") from None
    return getattr(import_module(f"{__name__}.{module}"), cls)


def get_solver(name: str) -> Solver:
    return solver_class(name)()
