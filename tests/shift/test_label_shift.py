"""The operating point after training (issue 35), against a simulation with known truth.

Negatives' logits are N(0, 1) and positives' N(MU, 1); a held-out curve is drawn at the training rate PI and new
rows at PI x {0.25, 0.5, 1, 2, 4}. The true TPR and FPR of any threshold, and so the true precision at any rate,
follow from the normal CDFs. Every rate is checked over hundreds of draws; assertion messages carry the counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dmocli.errors import DmoError
from dmocli.operating_point.calibration import Calibration
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem, f_beta
from dmocli.operating_point.search import search_curve
from dmocli.shift.adaptation import adapt_threshold
from dmocli.shift.at_rate import flagged_share, shifted_metrics
from dmocli.shift.carry import expected_share
from dmocli.shift.expected import adapted_curve, metrics_under_covariate_shift, metrics_under_label_shift
from dmocli.shift.prevalence import DEFAULT_METHOD, estimate_prevalence

MU, PI = 2.0, 0.1
SHIFTS = (0.25, 0.5, 1.0, 2.0, 4.0)
HELD_OUT_ROWS = (500, 10_000)  # 50 and 1000 held-out positives
NEW_ROWS = 5_000
DRAWS = 200
# The Platt map the simulation's scores have (log-odds linear in the logit): fitting one per draw would only add
# time, and the default estimator (pacc) takes its class means from the curve, so a map's error is no bias to it.
TRUE_MAP = Calibration(MU, -MU * MU / 2 + float(np.log(PI / (1 - PI))), "the simulation")


def draw(n: int, rate: float, rng: np.random.Generator, grid: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """n logits at positive rate `rate`, rounded to multiples of `grid` when one is given."""
    y = (rng.random(n) < rate).astype(np.int64)
    scores = rng.normal(size=n) + MU * y
    return (scores if grid is None else np.round(scores / grid) * grid).astype(np.float32), y


def true_precision(threshold: float, rate: float, grid: float | None = None) -> float:
    """Precision of `logit >= threshold` at `rate`; on a grid, a threshold between grid points takes the rows whose
    unrounded logit reaches half a step below the first grid point above it."""
    if grid is not None:
        threshold = (np.ceil(threshold / grid) - 0.5) * grid
    positive = rate * stats.norm.sf(threshold - MU)
    return positive / (positive + (1 - rate) * stats.norm.sf(threshold))


@pytest.fixture(scope="module")
def simulation() -> list[dict]:
    """DRAWS draws alternating the held-out size and cycling the shifts (20 per pair): the default estimate,
    classify-and-count at the model's threshold (best F1 at the training rate) and the metrics there."""
    rng = np.random.default_rng(35)
    records = []
    for i in range(DRAWS):
        scores, labels = draw(HELD_OUT_ROWS[i % 2], PI, rng)
        curve = HeldOutCurve.from_scores(scores, labels)
        threshold = search_curve(curve.score_curve(), Problem("ofbs")).threshold
        rate = PI * SHIFTS[(i // 2) % len(SHIFTS)]
        new_scores, _ = draw(NEW_ROWS, rate, rng)
        estimate = estimate_prevalence(curve, new_scores, TRUE_MAP, seed=i)
        counted = estimate_prevalence(curve, new_scores, TRUE_MAP, method="cc", threshold=threshold, seed=i)
        metrics = metrics_under_label_shift(curve, threshold, estimate)
        low, high = metrics["precision_interval"]
        records.append(
            {
                "rate": rate,
                "error": abs(estimate.rate - rate),
                "cc_error": abs(counted.rate - rate),
                "covered": estimate.low <= rate <= estimate.high,
                "precision_covered": low <= true_precision(threshold, rate) <= high,
            }
        )
    return records


def test_default_estimator_beats_classify_and_count_under_shift(simulation):
    shifted = [r for r in simulation if r["rate"] != PI]
    mae = np.mean([r["error"] for r in shifted])
    cc_mae = np.mean([r["cc_error"] for r in shifted])
    assert mae < cc_mae / 2, f"{DEFAULT_METHOD} MAE {mae:.4f} vs classify-and-count {cc_mae:.4f} on {len(shifted)}"


def test_rate_interval_covers_the_true_rate(simulation):
    covered = sum(r["covered"] for r in simulation)
    assert covered >= 0.9 * len(simulation), f"95% interval covered the true rate in {covered}/{len(simulation)}"


def test_precision_interval_under_label_shift_covers_the_true_precision(simulation):
    covered = sum(r["precision_covered"] for r in simulation)
    assert covered >= 0.9 * len(simulation), f"covered the true precision in {covered}/{len(simulation)}"


def test_adapted_fpor_threshold_meets_the_target_at_lower_rates():
    """With confidence 0.95 and the rate's 95% interval, the adapted cut's true precision at the true rate
    reaches the target; a draw that certifies nothing counts as a failure. 2000 held-out positives and 20,000
    new rows: fewer leave the rate's low end and the bounds too loose to certify precision 0.5 at rate 0.025.
    Logits are rounded to 0.01 (ties, as real models have): 800 cuts instead of 20,000, whose Clopper-Pearson
    bounds are this test's main cost."""
    rng = np.random.default_rng(7)
    target, met, feasible, grid = 0.5, 0, 0, 0.01
    for i in range(DRAWS):
        curve = HeldOutCurve.from_scores(*draw(20_000, PI, rng, grid))
        rate = PI * (0.25, 0.5)[i % 2]
        estimate = estimate_prevalence(curve, draw(20_000, rate, rng, grid)[0], TRUE_MAP, seed=i)
        interval = (estimate.low, estimate.high)
        adapted = adapt_threshold(
            curve, Problem("fpor", target), estimate.rate, confidence=0.95, rate_interval=interval, threshold=0.0
        )
        feasible += adapted.feasible
        met += adapted.feasible and true_precision(adapted.threshold, rate, grid) >= target
    assert met >= 0.9 * DRAWS, f"met precision {target} in {met}/{DRAWS} draws ({feasible} certified)"


def brute_force(curve: HeldOutCurve, problem: Problem, rate: float) -> tuple[int, int, bool | None]:
    """(TP, FP) of the best cut at `rate` found by trying every cut, and feasibility (search.py's rules:
    ties to the larger precision, then the higher threshold; infeasible FPOR: the most precise non-empty cut)."""
    cuts = [(int(curve.positives[k:].sum()), int(curve.negatives[k:].sum())) for k in range(curve.scores.size, -1, -1)]
    tpr = np.array([tp / curve.n_pos for tp, _ in cuts])
    fpr = np.array([fp / curve.n_neg for _, fp in cuts])
    positive, predicted = rate * tpr, rate * tpr + (1 - rate) * fpr
    precision = np.round(np.divide(positive, predicted, out=np.zeros_like(positive), where=predicted > 0), 12)
    if problem.kind == "ofbs":
        return *cuts[int(np.argmax(np.round(f_beta(positive, predicted - positive, rate, problem.beta), 12)))], None
    ok = (precision >= problem.target) & (tpr > 0)
    if not ok.any():
        return *cuts[int(np.argmax(np.where(tpr > 0, precision, -1)))], False
    best = max(np.flatnonzero(ok), key=lambda k: (tpr[k], precision[k], -k))
    return *cuts[best], True


def test_adapt_threshold_matches_brute_force_on_tiny_curves():
    rng = np.random.default_rng(3)
    for case in range(300):
        size = int(rng.integers(1, 7))
        scores = np.sort(rng.choice(np.arange(-20, 20), size, replace=False)).astype(np.float32) / 4
        positives, negatives = rng.integers(0, 5, size), rng.integers(0, 5, size)
        positives[0] += positives.sum() == 0
        negatives[-1] += negatives.sum() == 0
        curve = HeldOutCurve(scores, positives.astype(np.uint32), negatives.astype(np.uint32), "val", 1)
        rate = float(rng.uniform(0.01, 0.9))
        problem = Problem("fpor", float(rng.uniform(0.05, 0.95))) if case % 2 else Problem("ofbs", beta=0.5)
        adapted = adapt_threshold(curve, problem, rate, threshold=0.0)
        *expected, feasible = brute_force(curve, problem, rate)
        assert [*curve.counts_at(adapted.threshold)] == expected, f"case {case}: {curve}, {problem}, rate {rate}"
        assert adapted.feasible == feasible, f"case {case}"


def test_adapted_curve_gives_the_precision_at_the_new_rate():
    rng = np.random.default_rng(1)
    curve = HeldOutCurve.from_scores(*draw(2_000, PI, rng))
    weighted = adapted_curve(curve, 0.3)
    tpr, fpr = weighted.tp / weighted.n_pos, weighted.fp / weighted.n_neg
    base = curve.score_curve()
    np.testing.assert_allclose(tpr, base.tp / base.n_pos)
    np.testing.assert_allclose(weighted.tp / (weighted.tp + weighted.fp), 0.3 * tpr / (0.3 * tpr + 0.7 * fpr))


def test_frop_threshold_does_not_move_and_ofbs_has_no_confidence():
    rng = np.random.default_rng(2)
    curve = HeldOutCurve.from_scores(*draw(2_000, PI, rng))
    adapted = adapt_threshold(curve, Problem("frop", 0.8), 0.02, confidence=0.9)
    assert adapted.threshold == adapted.old_threshold and "does not move" in adapted.note
    assert adapted.at_new["recall"] == adapted.at_old["recall"] >= 0.8
    with pytest.raises(DmoError, match="ofbs"):
        adapt_threshold(curve, Problem("ofbs"), 0.02, confidence=0.9)


def test_curve_replicates_count_like_a_row_level_bootstrap():
    """A curve of more points than bins: the replicates' counts above a threshold inside a bin have the
    binomial mean and variance a row-level resample gives."""
    rng = np.random.default_rng(4)
    scores, labels = draw(20_000, PI, rng)
    curve = HeldOutCurve.from_scores(scores, labels)
    estimate = estimate_prevalence(curve, draw(1_000, PI, rng)[0], None, replicates=2_000)
    tp, _ = curve.counts_at(1.2345)
    tps, _ = estimate.curve_replicates.counts_at(1.2345)
    share = tp / curve.n_pos
    assert abs(tps.mean() - tp) < 4 * np.sqrt(curve.n_pos * share * (1 - share) / tps.size)
    assert 0.85 < tps.var() / (curve.n_pos * share * (1 - share)) < 1.15


def test_covariate_shift_intervals_cover_the_realized_metrics():
    """Rows whose labels follow the (true) calibrated probabilities: the realized precision, recall and F1 at
    the threshold fall in the 95% intervals in >= 90% of draws."""
    rng = np.random.default_rng(5)
    covered = {"precision": 0, "recall": 0, "f_beta": 0}
    for _ in range(DRAWS):
        scores = (rng.normal(size=3_000) + MU * (rng.random(3_000) < 0.3)).astype(np.float32)
        y = rng.random(scores.size) < TRUE_MAP.probability(scores)
        metrics = metrics_under_covariate_shift(scores, 2.0, TRUE_MAP)
        tp, predicted = np.sum(y & (scores >= 2.0)), np.sum(scores >= 2.0)
        realized = {"precision": tp / predicted, "recall": tp / y.sum(), "f_beta": 2 * tp / (predicted + y.sum())}
        for name, value in realized.items():
            low, high = metrics[f"{name}_interval"]
            covered[name] += low <= value <= high
    assert min(covered.values()) >= 0.9 * DRAWS, f"covered in {covered} of {DRAWS} draws"


def test_emq_reaches_the_fixed_point_of_saerens_em():
    """The Newton solve stops where the literal EM of Saerens, Latinne & Decaestecker stops."""
    rng = np.random.default_rng(6)
    curve = HeldOutCurve.from_scores(*draw(5_000, PI, rng))
    new_scores = draw(3_000, 0.3, rng)[0]
    estimate = estimate_prevalence(curve, new_scores, TRUE_MAP, method="emq")
    p, rate = TRUE_MAP.probability(new_scores), curve.rate
    for _ in range(3_000):
        weighted = p * rate / curve.rate
        rate = float(np.mean(weighted / (weighted + (1 - p) * (1 - rate) / (1 - curve.rate))))
    assert abs(estimate.rate - rate) < 1e-6 and estimate.iterations < 20, (estimate.rate, rate, estimate.iterations)


def test_the_rate_estimate_takes_the_confidence_range_every_command_takes():
    """One range for a confidence (options.CONFIDENCE, [0.5, 1)): the estimate refuses what `--confidence` refuses,
    and needs at least one bootstrap replicate."""
    rng = np.random.default_rng(7)
    curve = HeldOutCurve.from_scores(*draw(1_000, PI, rng))
    new_scores = draw(200, PI, rng)[0]
    assert estimate_prevalence(curve, new_scores, TRUE_MAP, 0.5, replicates=5).confidence == 0.5
    for level in (0.3, 1.0):
        with pytest.raises(DmoError, match=r"confidence .* must be in \[0\.5, 1\)"):
            estimate_prevalence(curve, new_scores, TRUE_MAP, level)
    with pytest.raises(DmoError, match="replicates 0 must be at least 1"):
        estimate_prevalence(curve, new_scores, TRUE_MAP, replicates=0)


def test_the_share_a_cut_flags_is_one_formula_from_counts_or_rates():
    """r TPR + (1 - r) FPR: from the curve's counts and class totals (carry.expected_share) or from TPR and FPR
    (the metrics at rate r), the same share, and precision at rate r is r TPR over it."""
    rng = np.random.default_rng(8)
    curve = HeldOutCurve.from_scores(*draw(2_000, PI, rng))
    tp, fp = curve.counts_at(1.0)
    tpr, fpr = tp / curve.n_pos, fp / curve.n_neg
    share = flagged_share(0.3, tpr, fpr)
    assert share == pytest.approx(0.3 * tpr + 0.7 * fpr, rel=1e-15)
    assert expected_share(curve, 1.0, 0.3) == pytest.approx(share, rel=1e-15)
    assert float(shifted_metrics(0.3, tpr, fpr, 1.0)["precision"]) == pytest.approx(0.3 * tpr / share, rel=1e-15)
