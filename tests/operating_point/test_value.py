"""--problem value's core (operating_point/gain.py and its branch of search.py): the exact search against brute
force over every cut on tiny data with random per-row gains, the curves' gain sums (merged bins included), the
interval, and the gain matrix's parsing and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmocli.errors import DmoError
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.gain import GainMatrix, RowGains, ValueAt, squares_at_cuts, value_at_cuts, value_under_rate
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search_curve

FRAUD = "tp=50,fp=-5,fn=-amount,tn=0.02*amount"


def brute_force(scores: np.ndarray, labels: np.ndarray, gains: RowGains) -> tuple[float, np.ndarray]:
    """The best total value of any cut `score >= v` (v every distinct score, or above them all), and every cut's."""
    cuts = np.concatenate(([np.inf], np.unique(scores)[::-1]))
    totals = np.array([gains.realized(labels, scores >= cut).sum() for cut in cuts])
    return float(totals.max()), totals


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_search_finds_the_best_cut_of_every_one_on_random_per_row_gains(dtype) -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 25))
        scores = (rng.integers(0, 8, n) / 3).astype(dtype)  # ties on purpose
        labels = rng.integers(0, 2, n)
        labels[0] = 1
        gains = RowGains(*(rng.normal(scale=rng.choice([1, 100]), size=n) for _ in range(4)))
        point = search_curve(ScoreCurve.from_scores(scores, labels, gains=gains), Problem("value"))
        best, _ = brute_force(scores, labels, gains)
        chosen = gains.realized(labels, scores >= dtype(point.threshold)).sum()
        assert chosen == pytest.approx(best, rel=1e-9, abs=1e-9)
        assert point.objective * n == pytest.approx(best, rel=1e-9, abs=1e-9)
        assert point.feasible is None


def test_every_cut_of_the_curve_has_the_brute_force_value_and_spread() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 30, 200).astype(np.float32)
    labels = (rng.random(200) < 0.3).astype(int)
    amount = rng.exponential(80, 200)
    gain = GainMatrix.parse(FRAUD)
    gains = gain.row_gains({"amount": amount}, 200)
    curve = ScoreCurve.from_scores(scores, labels, gains=gains)
    _, totals = brute_force(scores, labels, gains)
    np.testing.assert_allclose(value_at_cuts(curve), totals, rtol=1e-12)
    cuts = np.concatenate(([np.inf], np.unique(scores)[::-1]))
    squares = [(gains.realized(labels, scores >= cut) ** 2).sum() for cut in cuts]
    np.testing.assert_allclose(squares_at_cuts(curve), squares, rtol=1e-12)
    stored = HeldOutCurve.from_scores(scores, labels, gain=gain, gain_values=amount[:, None])
    np.testing.assert_allclose(value_at_cuts(stored), totals, rtol=1e-12)  # the same cut order from either curve


def test_merged_bins_keep_the_value_exact_at_every_stored_cut() -> None:
    rng = np.random.default_rng(5)
    scores = rng.normal(size=500).astype(np.float32)
    labels = (rng.random(500) < 0.2).astype(int)
    amount = rng.exponential(50, 500)
    gain = GainMatrix.parse(FRAUD)
    gains = gain.row_gains({"amount": amount}, 500)
    curve = HeldOutCurve.from_scores(scores, labels, gain=gain, gain_values=amount[:, None], max_points=16)
    assert not curve.exact and curve.scores.size == 16
    stored_cuts = np.concatenate(([np.inf], curve.scores[::-1]))
    expected = [gains.realized(labels, scores >= cut).sum() for cut in stored_cuts]
    np.testing.assert_allclose(value_at_cuts(curve), expected, rtol=1e-12)


def test_value_under_rate_is_the_value_per_row_at_the_curves_own_rate_and_moves_with_the_mix() -> None:
    rng = np.random.default_rng(11)
    scores = rng.normal(size=300).astype(np.float32)
    labels = (rng.random(300) < 0.25).astype(int)
    amount = rng.exponential(50, 300)
    curve = HeldOutCurve.from_scores(scores, labels, gain=GainMatrix.parse(FRAUD), gain_values=amount[:, None])
    np.testing.assert_allclose(value_under_rate(curve, curve.rate), value_at_cuts(curve) / 300, rtol=1e-12)
    # at rate 1 every row is a positive: the positives' mean gain, flagging all of them earns tp = 50 each
    assert value_under_rate(curve, 1.0)[-1] == pytest.approx(50.0)
    nothing = -amount[labels == 1].mean()
    assert value_under_rate(curve, 1.0)[0] == pytest.approx(nothing)


def test_the_interval_is_the_normal_interval_of_the_rows_mean_value() -> None:
    rng = np.random.default_rng(2)
    values = rng.exponential(10, 400) - 3
    at = ValueAt.of(float(values.sum()), float((values**2).sum()), values.size, 17)
    half = 1.959963984540054 * values.std(ddof=1) / math.sqrt(values.size)
    assert at.per_row == pytest.approx(values.mean())
    assert at.per_row_interval == pytest.approx((values.mean() - half, values.mean() + half))
    assert at.total_interval == pytest.approx(
        (values.size * (values.mean() - half), values.size * (values.mean() + half))
    )
    assert at.flagged == 17


def test_the_gain_matrix_reads_each_form_and_writes_one_canonical_text() -> None:
    gain = GainMatrix.parse(" FP = -5 , tp=50, fn=-amount,tn=amount*0.02")
    assert gain.text == FRAUD and gain.columns == ("amount",)
    assert GainMatrix.parse(gain.text) == gain
    assert GainMatrix.parse("fn=-amount").text == "tp=0,fp=0,fn=-amount,tn=0"  # a cell left out is 0
    assert GainMatrix.parse("tp=fee,fn=-1*amount,fp=1e2").text == "tp=fee,fp=100,fn=-1*amount,tn=0"
    rows = GainMatrix.parse(FRAUD).row_gains({"amount": np.array([100.0, 0.0])}, 2)
    np.testing.assert_array_equal(rows.tn, [2.0, 0.0])
    np.testing.assert_array_equal(rows.realized(np.array([1, 0]), np.array([False, True])), [-100.0, -5.0])


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "--gain is empty"),
        ("tp=1,tp=2", "gives tp twice"),
        ("tx=1", "'tx=1' is not CELL=GAIN"),
        ("tp", "'tp' is not CELL=GAIN"),
        ("tp=2*3", "is not a number, a column"),
        ("tp=amount*fee", "is not a number, a column"),
        ("fp=5 amount", "is not a number, a column"),
        ("fp=1e999", "is not a finite number"),
    ],
)
def test_a_gain_that_does_not_read_is_refused_naming_it(text: str, named: str) -> None:
    with pytest.raises(DmoError) as refused:
        GainMatrix.parse(text)
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_bad_amounts_are_refused_naming_the_column_the_rows_and_the_fix() -> None:
    gain = GainMatrix.parse(FRAUD)
    with pytest.raises(DmoError, match=r"'amount' is missing or not finite in 1 of 3 labeled rows; fill"):
        gain.row_gains({"amount": np.array([1.0, np.nan, 2.0])}, 3)
    with pytest.raises(DmoError, match=r"'amount' is negative in 2 of 3 labeled rows, and -amount counts it as a loss"):
        gain.row_gains({"amount": np.array([1.0, -1.0, -2.0])}, 3)
    signed = GainMatrix.parse("fn=-1*amount,tn=0.02*amount")  # the way out the message names: signed amounts
    assert signed.row_gains({"amount": np.array([1.0, -1.0])}, 2).fn.tolist() == [-1.0, 1.0]


def test_value_has_no_target_beta_or_bound_and_trains_as_ofbs() -> None:
    assert Problem("value").trained_as == Problem("ofbs")
    assert Problem("value").constraint_name is None and Problem("value").objective_name == "value"
    for kwargs, named in [
        ({"target": 0.5}, "--target applies to fpor/frop"),
        ({"beta": 2.0}, "--beta weighs F-beta"),
        ({"confidence": 0.9}, "--confidence bounds the constrained metric"),
    ]:
        with pytest.raises(DmoError, match=named):
            Problem.from_options("value", kwargs.get("target"), kwargs.get("beta", 1.0), kwargs.get("confidence"))
    gains = RowGains(*(np.ones(2) for _ in range(4)))
    curve = ScoreCurve.from_scores(np.array([0.1, 0.2]), np.array([0, 1]), gains=gains)
    with pytest.raises(DmoError, match="--problem value maximizes the expected value"):
        search_curve(curve, Problem("value"), 0.9)
    with pytest.raises(DmoError, match="train with --gain"):
        search_curve(ScoreCurve.from_scores(np.array([0.1, 0.2]), np.array([0, 1])), Problem("value"))


def test_a_stored_curve_is_reweighed_over_its_own_columns_only() -> None:
    rng = np.random.default_rng(1)
    scores = rng.normal(size=50).astype(np.float32)
    labels = (rng.random(50) < 0.4).astype(int)
    amount = rng.exponential(10, 50)
    curve = HeldOutCurve.from_scores(scores, labels, gain=GainMatrix.parse(FRAUD), gain_values=amount[:, None])
    doubled = curve.with_gain(GainMatrix.parse("tp=50,fp=-5,fn=-2*amount,tn=0.02*amount"))
    gains = GainMatrix.parse("tp=50,fp=-5,fn=-2*amount,tn=0.02*amount").row_gains({"amount": amount}, 50)
    _, totals = brute_force(scores, labels, gains)
    np.testing.assert_allclose(value_at_cuts(doubled), totals, rtol=1e-12)
    with pytest.raises(
        DmoError, match=r"names column\(s\) fee, and the model's held-out curve keeps the sums of amount"
    ):
        curve.with_gain(GainMatrix.parse("fp=-fee"))
    with pytest.raises(DmoError, match="trained without --gain"):
        HeldOutCurve.from_scores(scores, labels).with_gain(GainMatrix.parse(FRAUD))
