"""Adsh (Guo & Li, ICML 2022): FixMatch with per-class thresholds re-set once per epoch.

docs/algorithms.md#adsh / the paper's Algorithm 2: predict all unlabeled
rows (weak view), group the max confidences by predicted class and sort each
group descending. For the majority class (most labeled rows) let rho be the
fraction of its group with confidence >= tau_1; every class k gets
tau_k = the confidence at (1-based) position ceil(rho |C_k|) of its group,
so each class keeps the same top fraction of its own predictions instead of
the minority classes losing most of theirs to a fixed 0.95.

Edge cases, decided here (the paper's text leaves them open):
- ceil(rho |C_k|) is computed in integers, ceil(m |C_k| / |C_1|) with
  m = #{C_1 >= tau_1}, so the majority class keeps exactly its m rows
  (a float rho * |C_k| can round up past an integer).
- Ties: the threshold is a confidence value, so rows tied with the row at
  the cut position are all selected.
- A class with no predicted rows keeps its previous threshold.
- rho = 0 (no majority-class prediction reaches tau_1): every non-empty
  class gets threshold 1.0, which selects nothing (ceil(0) = no row). The
  paper's pseudo-code would instead leave rho at 1.0 and select every row.
- No row predicted as the majority class: rho is undefined; all thresholds
  stay as they were.
Thresholds start at tau_1 for every class (FixMatch for the first epoch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmocli.solvers.semisup.consistency import SemiParams, SemiSupervisedSolver, constant_thresholds


def adsh_thresholds(
    confidence: np.ndarray, pseudo: np.ndarray, *, previous: np.ndarray, majority: int, tau1: float
) -> tuple[np.ndarray, float | None]:
    """New per-class thresholds and rho (None when the majority class has no predicted rows)."""
    n_classes = previous.size
    confidence = np.asarray(confidence, dtype=np.float64)
    pseudo = np.asarray(pseudo, dtype=np.int64)
    sizes = np.bincount(pseudo, minlength=n_classes)
    n_major = int(sizes[majority])
    if n_major == 0:
        return previous.copy(), None
    m = int(np.count_nonzero(confidence[pseudo == majority] >= tau1))
    positions = -(-m * sizes // n_major)  # ceil(m |C_k| / |C_1|), exact
    ordered = confidence[np.lexsort((-confidence, pseudo))]  # by class, then confidence descending
    starts = np.cumsum(sizes) - sizes
    new = np.asarray(previous, dtype=np.float64).copy()
    cut = (sizes > 0) & (positions > 0)
    new[cut] = ordered[starts[cut] + positions[cut] - 1]
    new[(sizes > 0) & (positions == 0)] = 1.0
    return new, m / n_major


class Adsh(SemiSupervisedSolver):
    name = "adsh"
    summary = "semi-supervised Adsh: FixMatch with per-class adaptive thresholds (rho from the majority class)"

    @dataclass
    class Params(SemiParams):
        tau1: float = field(
            default=0.95,
            metadata={"min": 0, "max": 1, "help": "threshold of the majority class, sets rho (paper: 0.95..0.99)"},
        )

    def initial_thresholds(self, params: SemiParams, n_classes: int) -> np.ndarray:
        return constant_thresholds(params.tau1, "tau1", n_classes)

    def update_thresholds(
        self, confidence: np.ndarray, pseudo: np.ndarray, *, previous: np.ndarray, majority: int, params: SemiParams
    ) -> tuple[np.ndarray, dict[str, Any]]:
        new, rho = adsh_thresholds(confidence, pseudo, previous=previous, majority=majority, tau1=params.tau1)
        return new, {"rho": rho}
