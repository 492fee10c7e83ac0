"""A cut's figures at another positive rate under label shift: the one formula of the share it flags,
r TPR + (1 - r) FPR, and the precision, recall and F-beta that follow.

Label shift: the positive rate moves from the training rate pi to r, the score distribution of each class does
not. TPR and FPR at a cut are then what the held-out curve says, recall does not move, and precision at rate r is
r TPR / (r TPR + (1 - r) FPR). Every module of shift/ that needs the flagged share calls `flagged_share`: the rate
estimate's `rows_needed` (prevalence.py), the expected metrics and their intervals (expected.py, adaptation.py),
and the share a carried cut keeps (carry.py).
"""

from __future__ import annotations

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.problems import safe_div


def flagged_share(rate, tp, fp, *, n_pos: int = 1, n_neg: int = 1):
    """The share of rows at positive rate `rate` that a cut flags: r TPR + (1 - r) FPR, TPR = tp / n_pos and
    FPR = fp / n_neg. Pass the held-out counts at the cut and the class totals, or TPR and FPR themselves (the totals
    left at 1, a division that is exact). Scalars or arrays, as the arguments are."""
    return rate * tp / n_pos + (1.0 - rate) * fp / n_neg


def shifted_metrics(rate, tpr, fpr, beta: float) -> dict:
    """Precision, recall and F-beta at rate `rate` of a cut with these TPR and FPR (scalars or arrays)."""
    rate, tpr, fpr = (np.asarray(v, dtype=np.float64) for v in (rate, tpr, fpr))
    positive, predicted = rate * tpr, flagged_share(rate, tpr, fpr)
    b2 = beta * beta
    return {
        "precision": safe_div(positive, predicted),
        "recall": tpr,
        "f_beta": safe_div((1.0 + b2) * positive, b2 * rate + predicted),
    }


def checked_rate(rate: float) -> float:
    """A positive rate to move a curve to, refused outside (0, 1): at 0 or 1 one class has no rows to weigh."""
    if not 0.0 < rate < 1.0:
        raise DmoError(f"a positive rate of {rate} is outside (0, 1)")
    return float(rate)
