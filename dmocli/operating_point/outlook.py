"""How likely a target is to hold on the next sample, or in the population, from the counts a split gave: the
summary's honest line.

A threshold fitted at precision 0.905 on a few hundred held-out rows meets a 0.9 target on the next few hundred
rows only about half the time; the point estimate alone reads as a promise. The posterior predictive under a
uniform prior answers it: with s successes in t trials (true positives among predicted positives for precision,
among positives for recall), the successes among m new trials are Beta-binomial(m, s + 1, t - s + 1), and the
target holds when they reach ceil(target * m). `--confidence` is the way to make the probability high: a
certified threshold holds with probability C by construction.
"""

from __future__ import annotations

import math
from typing import Protocol

from scipy.special import betainc

LOW_OUTLOOK = 0.8  # below this, the summary names --confidence


def probability_target_holds(successes: int, trials: int, target: float, new_trials: int) -> float | None:
    """P(successes / new_trials >= target on `new_trials` new trials), or None when there is nothing to tell."""
    if trials < 1 or new_trials < 1:
        return None
    from scipy.stats import betabinom  # scipy.stats takes about a second to import: only a finite --new-rows needs it

    needed = math.ceil(target * new_trials - 1e-9)
    return float(betabinom.sf(needed - 1, new_trials, successes + 1, trials - successes + 1))


def probability_population_holds(successes: int, trials: int, target: float) -> float | None:
    """P(the population's rate >= target) given `successes` in `trials`, under the same uniform prior: the
    Beta(s + 1, t - s + 1) posterior's upper tail, I_{1 - target}(t - s + 1, s + 1) by the incomplete beta
    function's symmetry (no subtraction from 1 to lose the tail to). The limit of probability_target_holds as the
    new trials grow."""
    if trials < 1:
        return None
    return float(betainc(trials - successes + 1, successes + 1, 1.0 - target))


class Counts(Protocol):
    """The counts of a binary split the outlook rests on (report.BinarySplit, built a layer above)."""

    tp: int
    fp: int
    fn: int
    n: int


def outlook(split: Counts, metric: str, target: float, new_rows: float) -> float | None:
    """The probability that `metric` (precision or recall) measured on `new_rows` rows like `split`'s reaches
    `target` (math.inf: the population's value); the new trials are the rows' expected predicted positives
    (precision) or positives (recall)."""
    tp, fp, fn, n = split.tp, split.fp, split.fn, split.n
    trials = tp + fp if metric == "precision" else tp + fn
    if n < 1:
        return None
    if math.isinf(new_rows):
        return probability_population_holds(tp, trials, target)
    return probability_target_holds(tp, trials, target, max(1, round(new_rows * trials / n)))
