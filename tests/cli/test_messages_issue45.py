"""Refusals and summary lines state true facts, each figure the report's own (issue 45, trial 4)."""

from __future__ import annotations

import json

import numpy as np
from conftest import make_binary_frame

from dmocli.operating_point.problems import Problem
from dmocli.pipelines.model_choice import summary_line
from dmocli.pipelines.thresholding import fit_threshold


def clean_top_after_early_negatives() -> tuple[np.ndarray, np.ndarray]:
    """Three negatives among the top eight rows, then 200 clean positives: the cut with the highest precision
    bound lies past where the fixed-sequence tests stop."""
    labels = np.array([1, 1, 0, 1, 0, 1, 1, 0] + [1] * 200 + [0] * 40 + [1] * 30 + [0] * 3000)
    return -np.arange(labels.size, dtype=float), labels


def test_a_bound_above_the_target_is_said_to_be_past_where_the_tests_stopped():
    scores, labels = clean_top_after_early_negatives()
    point, message = fit_threshold(scores, labels, Problem("fpor", 0.95), confidence=0.95, where="X")
    assert point.feasible is False and point.best_achievable > 0.95  # the figure that read as a contradiction
    assert f"the cut with the highest bound ({point.best_achievable:.4f}, at {point.tp + point.fp:,} predicted" in (
        message
    )
    assert "lies past where they stopped" in message and "best achievable" not in message
    assert "needs about" not in message  # more rows are not what it lacks


def test_a_new_sample_refusal_says_the_same_of_the_population_certificate():
    """--new-rows N refused, and --new-rows inf would be refused too, for the fixed sequences' reason: not "the
    highest bound 0.958" beside a 0.95 target."""
    scores, labels = clean_top_after_early_negatives()
    point, message = fit_threshold(scores, labels, Problem("fpor", 0.95), confidence=0.95, where="X", new_rows=500)
    assert point.feasible is False and point.best_achievable > 0.95
    assert "(the population's precision) is not certified here either: the fixed-sequence tests" in message
    assert f"the cut with the highest bound ({point.best_achievable:.4f}" in message


def test_a_bound_below_the_target_is_given_as_the_highest_bound():
    scores, labels = clean_top_after_early_negatives()
    point, message = fit_threshold(scores, labels, Problem("fpor", 0.97), confidence=0.95, where="X")
    assert point.best_achievable < 0.97
    assert f"the highest 0.975 lower bound of the precision at any cut is {point.best_achievable:.4f}" in message


def test_an_absurd_row_count_is_put_in_labeled_rows_and_called_impractical():
    rng = np.random.default_rng(0)
    y = (rng.random(3000) < 0.1).astype(int)
    s = rng.normal(size=3000) + 1.2 * y
    point, message = fit_threshold(s, y, Problem("fpor", 0.6), confidence=0.95, where="X")
    times = point.rows_needed / point.rows_counted
    assert times > 100
    assert f"needs about {point.rows_needed:,} predicted positives ({times:.1f} times the {point.rows_counted:,}" in (
        message
    )
    assert f"about {times * 3000:,.0f} labeled rows like these" in message and "too close to the target" in message


def test_no_rate_would_do_says_why_and_what_the_population_certificate_does():
    rng = np.random.default_rng(0)
    labels = (rng.random(4414) < 0.065).astype(int)
    x = rng.normal(size=(4414, 2))
    scores = (x[:, 0] + 2.2 * labels) * 2.2 + (x[:, 1] + 1.8 * labels) * 1.8
    point, message = fit_threshold(scores, labels, Problem("fpor", 0.9), confidence=0.95, where="X", new_rows=300)
    assert point.feasible is False and point.required_rate is None and point.new_rows == 300
    counted = point.tp + point.fp
    expected = 300 * counted / labels.size
    assert f"at the closest cut ({counted:,} predicted positives here, precision {point.precision:.4f})" in message
    assert f"300 new rows would hold only about {expected:,.0f} predicted positives" in message
    assert "no rate would do" not in message and "certifies the population's precision instead, which passes" in (
        message
    )


def test_model_auto_says_a_candidate_is_out_of_reach_before_its_figure():
    report = {
        "problem": "fpor",
        "target": 0.95,
        "beta": 1.0,
        "model_selection": {
            "chosen": "linear",
            "candidates": [
                {"model": "linear", "objective": 0.41, "feasible": True},
                {"model": "gbdt", "objective": 0.21, "feasible": False},
            ],
            "confidence_per_candidate": None,
            "confidence": None,
        },
    }
    line = summary_line(report)
    assert "linear (out-of-fold recall 0.41 at precision >= 0.95" in line
    assert "gbdt out of reach (recall 0.21 at its closest cut, which misses the target)" in line
    assert "gbdt 0.21" not in line


def test_the_retarget_outlook_names_no_sample_size_it_did_not_use(dmo, tmp_path):
    """The re-target's outlook is about the population (as --confidence certifies by default), not `the next N
    rows` of the stored curve's size while a certificate spoke of another."""
    make_binary_frame(n=1500, seed=4, sep=1.2).to_parquet(tmp_path / "d.parquet")
    code, out, err = dmo("train", tmp_path / "d.parquet", "--problem", "fpor", "--target", "0.6", "-o", tmp_path / "m")
    assert code == 0, err
    assert "outlook: precision >= 0.6 in the population with probability about" in out
    code, out, err = dmo("threshold", tmp_path / "m", "--problem", "fpor", "--target", "0.65", "-o", tmp_path / "n")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("outlook:"))
    assert "in the population" in line and "next" not in line
    code, out, _ = dmo("threshold", tmp_path / "m", "--problem", "fpor", "--target", "0.65", "-o", tmp_path / "n",
                       "--json")  # fmt: skip
    assert json.loads(out)["operating_point"]["new_rows"] is None
