"""FixMatch with one fixed confidence threshold for every class: the baseline Adsh improves on.

Pseudo-labels of unlabeled rows whose weak-view confidence reaches tau
(default 0.95, the paper's setting) train the strong view; see consistency.py
for the loop and feature_views.py for the feature-space augmentations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmocli.solvers.semisup.consistency import SemiParams, SemiSupervisedSolver, constant_thresholds


class FixMatch(SemiSupervisedSolver):
    name = "fixmatch"
    summary = "semi-supervised FixMatch (one fixed threshold tau) on rows with missing labels; EMA weights"

    @dataclass
    class Params(SemiParams):
        tau: float = field(
            default=0.95,
            metadata={"min": 0, "max": 1, "help": "confidence threshold for every class (1.0: no pseudo-labels)"},
        )

    def initial_thresholds(self, params: SemiParams, n_classes: int) -> np.ndarray:
        return constant_thresholds(params.tau, "tau", n_classes)

    def update_thresholds(
        self, confidence: np.ndarray, pseudo: np.ndarray, *, previous: np.ndarray, majority: int, params: SemiParams
    ) -> tuple[np.ndarray, dict[str, Any]]:
        return previous, {}
