"""Registry of solvers: one module per solver, looked up by the name used on the command line."""
from __future__ import annotations

from ..errors import DmoError
from .base import Solver
from .adsh import Adsh
from .ero import ERO
from .fixmatch import FixMatch
from .lagrangian import Lagrangian
from .lus import LocalUncertaintySampling
from .online import Fofo, Ofo, OnlineLR
from .sigmoid_f1 import SigmoidF1
from .wce import WeightedCrossEntropy

_SOLVERS: dict[str, type[Solver]] = {
    cls.name: cls for cls in (WeightedCrossEntropy, ERO, SigmoidF1, Lagrangian, FixMatch, Adsh,
                              LocalUncertaintySampling, Fofo, Ofo, OnlineLR)
}


def available() -> list[str]:
    return sorted(_SOLVERS)


def get_solver(name: str) -> Solver:
    try:
        return _SOLVERS[name]()
    except KeyError:
        raise DmoError(f"--solver {name!r} is not available (choose from: {', '.join(available())})") from None
