"""Checks of options that several commands share, made before any data is read or any work done."""
from __future__ import annotations

from dmocli.errors import DmoError

MAX_SEED = 2**63 - 1  # numpy's and torch's generators take seeds in [0, 2^63)


def check_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise DmoError(f"--seed {seed} must be a whole number from 0 to {MAX_SEED}")


def check_confidence(confidence: float | None) -> None:
    """The level of the one-sided Clopper-Pearson bound: below 0.5 it would loosen the target, not guard it."""
    if confidence is not None and not 0.5 <= confidence < 1.0:
        raise DmoError(f"--confidence {confidence} must be in [0.5, 1), e.g. 0.95")
