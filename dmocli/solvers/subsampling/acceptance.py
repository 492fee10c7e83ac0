"""Acceptance probabilities of the three subsampling methods (docs/algorithms.md#lus), as pure array math.

Kept apart from the I/O pass (pipelines/subsample.py) and from training (solvers/subsampling/lus.py)
so that the streaming pass, the Dask workers and the in-memory `train
--solver lus` path all use the very same formulas.
"""

from __future__ import annotations

import numpy as np

from dmocli.errors import DmoError

STREAM_SALT = 0x4C5553  # "LUS": keeps our streams apart from a plain default_rng(seed) (trailing zeros are ignored)
Q_MAX = 1.0 - 1e-7  # a pilot probability of exactly 1 would give a = 0 and an infinite log offset


def check_gamma(gamma: float) -> float:
    if not np.isfinite(gamma) or gamma < 1.0:
        raise DmoError(f"--gamma {gamma:g} must be >= 1 (the subsample keeps at most 1/gamma of the rows)")
    return float(gamma)


def acceptance(proba: np.ndarray, gamma: float) -> np.ndarray:
    """a(x, k) for every row and every class k, from pilot probabilities p~(k|x) of shape (n, K).

    q = max(0.5, max_k p~(k|x)); the class whose probability is q >= 0.5 gets
    (1 - q) / (gamma - max(q, gamma/2)), every other class min(1, 2q/gamma).
    Computed for all k (not only the label) because training adds log a(x, k)
    to every class logit.
    """
    p = np.asarray(proba, dtype=np.float64)
    q = np.clip(np.maximum(0.5, p.max(axis=1, keepdims=True)), 0.5, Q_MAX)
    confident_a = (1.0 - q) / (gamma - np.maximum(q, gamma / 2.0))
    other_a = np.minimum(1.0, 2.0 * q / gamma)
    confident = p >= q  # p~(k|x) = q >= 0.5; a tie at exactly 0.5 gives 1/gamma in both branches
    return np.clip(np.where(confident, confident_a, other_a), 0.0, 1.0)


def check_pilot_classes(y: np.ndarray, classes: list, fix: str) -> None:
    """A pilot that never saw a class is sure no row belongs to it: LUS would then drop that class's rows
    (a = 0 where the pilot is certain) and fit a model that never met it, and --match-size would size the
    baselines by that. Refuse, naming the class."""
    seen = np.bincount(np.asarray(y), minlength=len(classes))
    if (seen == 0).any():
        missing = classes[int(np.argmin(seen))]
        raise DmoError(
            f"the pilot sample ({len(y)} rows) holds no row of class {missing!r}, so LUS would drop that class; {fix}"
        )


def case_control_rates(counts: np.ndarray, target: float) -> np.ndarray:
    """Per-class acceptance rates for equal expected counts per class, about `target` rows in all.

    Water-filling: every class gets min(n_k, t) expected rows with t chosen so
    the total is `target`; a class smaller than t is kept whole (the paper's
    rule for marginally imbalanced data).
    """
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if target >= total:
        return np.ones_like(counts)
    order = np.sort(counts)
    remaining, left = float(target), counts.size
    level = 0.0
    for n_k in order:  # K iterations, not rows
        share = remaining / left
        if n_k <= share:
            remaining -= n_k
            left -= 1
        else:
            level = share
            break
    return np.where(counts > 0, np.minimum(counts, level) / np.maximum(counts, 1), 1.0)


def row_generator(seed: int, part: int) -> np.random.Generator:
    """The random stream of one batch/partition: same seed and partitioning, same draws, in any engine.

    Salted because numpy's SeedSequence ignores trailing zeros: default_rng([0, 0]) would replay
    default_rng(0), the very stream a user (or a test) may have generated the data with.
    """
    return np.random.default_rng([seed, part, STREAM_SALT])
