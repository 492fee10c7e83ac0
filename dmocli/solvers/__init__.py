"""Registry of solvers: one class per solver, looked up by the name used on the command line.

A solver that is one module sits at this package's top level (`wce`); a family of solvers, or one solver of
several modules, has its own subpackage (`ero/`, `online/`, `semisup/`, `subsampling/`, `smoothed/`). The
helpers shared across families stay at the top level (`base`, `loop`, `selection`, `relaxation`, `boosting`).
Modules are imported on first use, so a command that runs one numpy solver does not import torch and every
other solver (seconds of start-up).
"""

from __future__ import annotations

import dataclasses
from importlib import import_module

from dmocli.errors import DmoError
from dmocli.solvers.base import Solver

_SOLVERS: dict[str, str] = {  # name -> "module:class" under dmocli.solvers
    "wce": "wce:WeightedCrossEntropy",
    "ero": "ero.solver:ERO",
    "sigmoid-f1": "smoothed.sigmoid_f1:SigmoidF1",
    "lagrangian": "smoothed.lagrangian:Lagrangian",
    "fixmatch": "semisup.fixmatch:FixMatch",
    "adsh": "semisup.adsh:Adsh",
    "lus": "subsampling.lus:LocalUncertaintySampling",
    "fofo": "online.solvers:Fofo",
    "ofo": "online.solvers:Ofo",
    "lr": "online.solvers:OnlineLR",
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


def describe(name: str) -> dict:
    """One solver as `dmo solvers --json` lists it: what it trains on, and each `--param` key with its default,
    help and declared checks."""
    solver = get_solver(name)
    params = []
    # the solver's own keys first, then the trees' (--model gbdt) that wce and ero share
    for spec in sorted(
        dataclasses.fields(solver.Params), key=lambda spec: spec.metadata.get("help", "").startswith("gbdt")
    ):
        default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()  # type: ignore[misc]
        checks = {
            key: spec.metadata[key]
            for key in ("choices", "min", "max", "below", "positive", "models", "torchrun")
            if key in spec.metadata
        }
        params.append(
            {"name": spec.name.replace("_", "-"), "default": default, "help": spec.metadata.get("help", ""), **checks}
        )
    return {
        "name": name,
        "summary": solver.summary,
        "streaming": solver.streaming,
        "multiclass": solver.multiclass,
        "problems": list(solver.problems),
        "uses_unlabeled": solver.uses_unlabeled,
        "uses_offsets": solver.uses_offsets,
        "distributed": solver.distributed,
        "adjust_by_default": solver.adjust_by_default,
        "models": list(solver.models),
        "engines": {engine: list(models) for engine, models in solver.engines().items()},
        "model_auto": solver.selects_model,
        "params": params,
    }
