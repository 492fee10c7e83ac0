"""dmocli: thresholded classifiers for imbalanced data at one operating point.

The top-level names are imported lazily so `import dmocli` stays cheap
(torch loads only when a function that needs it is used).

Importing dmocli sets OMP_WAIT_POLICY=PASSIVE unless the environment already sets it, as the `dmo` command does
(cli/entry.py): idle OpenMP threads of torch and XGBoost then sleep instead of spinning, which on a machine
whose cores other jobs hold made a library fit several times slower than the same `dmo train`
(bench/library_speed.py, docs/python.md#speed). OpenMP reads the variable once, when torch or XGBoost first
starts it, and both are imported lazily, so this is in time unless the caller imported them before dmocli.
"""

from __future__ import annotations

import os
from typing import Any

from dmocli.version import __version__

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime starts (module docstring)

_API = {
    "train": ("pipelines.train", "train"),
    "TrainOptions": ("options", "TrainOptions"),
    "evaluate": ("use.evaluate", "evaluate"),
    "predict": ("use.in_memory_predict", "predict"),
    "refit_threshold": ("use.apply", "refit_threshold"),
    "load_model": ("models.modelfile", "load_model"),
    "Problem": ("operating_point.problems", "Problem"),
    "search_threshold": ("operating_point.search", "search"),
    "extract": ("extract", "extract"),
    "ExtractOptions": ("extract", "ExtractOptions"),
    "DmoClassifier": ("estimator", "DmoClassifier"),
    "DmoError": ("errors", "DmoError"),
    "UnreachableTarget": ("errors", "UnreachableTarget"),
    "report_schema": ("report", "report_schema"),
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from importlib import import_module

        module, attr = _API[name]
        return getattr(import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'dmocli' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (what `dir(dmocli)` and tab completion show), without importing any of it."""
    return sorted(__all__)
