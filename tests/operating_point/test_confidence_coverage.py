"""`--confidence C` holds on new data: a simulation with known score distributions, many draws of a validation
split, the threshold selected among all cuts, and the true precision or recall at the selected threshold
computed exactly from the distributions.

A draw fails when the search certifies a cut whose true constrained metric is below the target; refusing (no
cut certified) is safe. A valid method fails in at most 1 - C of the draws; each assertion allows the binomial
noise of the draw count (a failure count that a valid method exceeds with probability 0.001). The old per-cut
bound (take any cut whose own Clopper-Pearson bound reaches the target) is run beside it, to show where it
falls short: precision that sits just under the target at many thresholds.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dmocli.operating_point.bounds import clopper_pearson_lower
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search

DRAWS = 400


class Gaussian:
    """Negatives N(0, 1), positives N(shift, 1), positive share `prior`: precision rises with the threshold."""

    def __init__(self, prior: float, shift: float):
        self.prior, self.shift = prior, shift

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        y = (rng.random(n) < self.prior).astype(np.int64)
        return rng.normal(size=n) + self.shift * y, y

    def precision(self, t: float) -> float:
        pos, neg = self.prior * stats.norm.sf(t - self.shift), (1 - self.prior) * stats.norm.sf(t)
        return pos / (pos + neg) if pos + neg > 0 else 1.0

    def recall(self, t: float) -> float:
        return float(stats.norm.sf(t - self.shift))


class Plateau:
    """Both classes uniform on [0, 1]: precision equals the prior at every threshold (just under the target)."""

    def __init__(self, prior: float):
        self.prior = prior

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return rng.random(n), (rng.random(n) < self.prior).astype(np.int64)

    def precision(self, t: float) -> float:
        return self.prior

    def recall(self, t: float) -> float:
        return float(np.clip(1.0 - t, 0.0, 1.0))


def per_cut_fpor(scores: np.ndarray, y: np.ndarray, target: float, confidence: float) -> float | None:
    """The old rule: the most recall among cuts whose own precision bound reaches the target (None: refused)."""
    curve = ScoreCurve.from_scores(scores, y)
    bound = clopper_pearson_lower(curve.tp, curve.tp + curve.fp, confidence)
    ok = np.flatnonzero(bound >= target)
    if not ok.size:
        return None
    return float(curve.values[ok[np.argmax(curve.tp[ok])]])


def failures(world, problem: Problem, confidence: float, n: int, rule: str, seed: int) -> tuple[int, int]:
    """(false certificates, answered draws) over DRAWS validation splits of n rows."""
    rng = np.random.default_rng(seed)
    truth = world.precision if problem.kind == "fpor" else world.recall
    wrong = answered = 0
    for _ in range(DRAWS):
        scores, y = world.draw(n, rng)
        if rule == "per-cut":
            threshold = per_cut_fpor(scores, y, problem.target, confidence)
        else:
            point = search(scores, y, problem, confidence)
            threshold = point.threshold if point.feasible else None
        if threshold is None:
            continue
        answered += 1
        wrong += truth(threshold) < problem.target
    return wrong, answered


def allowed(confidence: float) -> int:
    """The most false certificates a method valid at `confidence` shows in DRAWS draws, but for odds of 0.001."""
    return int(stats.binom.ppf(0.999, DRAWS, 1.0 - confidence))


@pytest.mark.parametrize("confidence", [0.9, 0.95])
@pytest.mark.parametrize(
    "world, n",
    [(Gaussian(prior=0.1, shift=2.5), 1500), (Gaussian(prior=0.05, shift=3.0), 3000), (Plateau(prior=0.79), 1000)],
    ids=["gaussian-10pct", "gaussian-5pct", "plateau"],
)
def test_fpor_certificates_hold_with_the_cut_selected_among_all(world, n, confidence):
    wrong, answered = failures(world, Problem("fpor", 0.8), confidence, n, "search", seed=1)
    print(f"fpor {type(world).__name__} C={confidence}: {wrong} false of {answered} answered, {DRAWS} draws")
    assert wrong <= allowed(confidence)


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_fpor_certificates_are_given_where_the_target_is_clear(confidence):
    """Validity by refusing everything would be useless: where precision 0.8 is reached with room, most draws
    get a certified cut."""
    _, answered = failures(Gaussian(prior=0.1, shift=2.5), Problem("fpor", 0.8), confidence, 1500, "search", seed=2)
    assert answered >= 0.8 * DRAWS


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_the_old_per_cut_precision_bound_falls_short_on_a_plateau(confidence):
    """Precision 0.79 at every threshold, target 0.8: some of the many cuts' own bounds reach 0.8 by chance."""
    wrong, answered = failures(Plateau(prior=0.79), Problem("fpor", 0.8), confidence, 1000, "per-cut", seed=1)
    print(f"per-cut plateau C={confidence}: {wrong} false of {answered} answered, {DRAWS} draws")
    assert wrong > allowed(confidence)


@pytest.mark.parametrize("confidence", [0.9, 0.95])
@pytest.mark.parametrize("world, n", [(Gaussian(prior=0.1, shift=2.0), 500), (Gaussian(prior=0.03, shift=2.5), 2000)])
def test_frop_certificates_hold_with_the_cut_selected_among_all(world, n, confidence):
    """Recall falls with the threshold, so the strictest cut whose recall bound reaches the target is valid as it
    is: the cuts stricter than the true limit all have recall below the target, and the bound of the one at the
    limit reaches it with probability at most 1 - C."""
    wrong, answered = failures(world, Problem("frop", 0.8), confidence, n, "search", seed=3)
    print(f"frop C={confidence}: {wrong} false of {answered} answered, {DRAWS} draws")
    assert wrong <= allowed(confidence) and answered >= 0.5 * DRAWS
