"""A cut carried from the held-out scores' scale to a model's own scores, by the share of rows it flags.

A threshold is searched on held-out scores. Where the saved model's scores are on another scale, the same number
is another cut: a `--cv` ensemble of boosted trees averages its members' probabilities, while its held-out scores
are each member's own out-of-fold logit, which reach far higher (docs/measurements.md: segment0, held-out cuts up
to 123, the ensemble's scores at most 1.67), so a cut from the top of the curve can lie above every score the
model gives. The share of rows a cut flags is the same on every scale of the same ranking: a gbdt `--cv` ensemble
and `--cv-transfer rank` have their out-of-fold scores carried to the saved model's own scores of the same rows
(`carried_by_rank`), so the threshold is searched, certified and stored on the scale the model decides on, and the
held-out curve the model file keeps is on it too (a re-target and the monitor then read it at the cut the model
applies); `dmo threshold --adapt` keeps the share of NEW the adapted cut is expected to flag at the new rate
(r TPR + (1 - r) FPR on the curve).
"""

from __future__ import annotations

import numpy as np

from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.shift.at_rate import flagged_share


def cut_flagging(scores: np.ndarray, count: int) -> float:
    """The threshold on `scores` (decision: score >= threshold) that flags their `count` highest (rows tied with
    the last one flagged are flagged with it); just above every score when `count` is 0."""
    if count <= 0 or scores.size == 0:
        return float(np.nextafter(np.float32(scores.max(initial=-np.inf)), np.float32(np.inf)))
    return float(np.sort(scores)[::-1][min(count, scores.size) - 1])


def carried_by_rank(held_out: np.ndarray, own: np.ndarray) -> np.ndarray:
    """The held-out scores moved onto the model's own scale by rank: each becomes the model's cut (`cut_flagging`
    of `own`, the model's scores of the same rows, or of as many rows from the same data) that flags the share of
    rows the held-out rows at or above it make up. Rows keep their order and tied rows stay tied, so the positive
    and negative counts at every cut are the held-out ones; adjacent held-out scores whose cuts the model's own
    scores cannot tell apart (ties there) become one, as the model can only flag them together. float32, as the
    model's logits are compared."""
    held_out = np.asarray(held_out, dtype=np.float32)
    own = np.sort(np.asarray(own, dtype=np.float32))[::-1]
    if held_out.size == 0 or own.size == 0:
        return held_out
    _, index, counts = np.unique(held_out, return_inverse=True, return_counts=True)
    at_or_above = np.cumsum(counts[::-1])[::-1]  # held-out rows scoring at least each distinct score
    flagged = np.clip(np.rint(at_or_above * (own.size / held_out.size)).astype(np.int64), 1, own.size)
    return own[flagged - 1][index.reshape(held_out.shape)]


def expected_share(curve: HeldOutCurve, cut: float, rate: float) -> float:
    """The share of rows at positive rate `rate` that `cut` flags, under label shift: r TPR + (1 - r) FPR, with
    TPR and FPR read from the held-out curve at the cut (at_rate.flagged_share)."""
    tp, fp = curve.counts_at(cut)
    return flagged_share(rate, tp, fp, n_pos=max(curve.n_pos, 1), n_neg=max(curve.n_neg, 1))


def carried_by_share(curve: HeldOutCurve, cut: float, rate: float, scores: np.ndarray) -> tuple[float, float]:
    """(threshold on `scores`, expected share): the threshold on the model's own scores of the new rows that flags
    as many of them as the curve's `cut` is expected to flag at `rate` (rounded to a whole row)."""
    share = expected_share(curve, cut, rate)
    return cut_flagging(scores, int(round(share * scores.size))), share
