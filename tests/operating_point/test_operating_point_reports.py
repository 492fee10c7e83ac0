"""Uncertainty in every report, and refusals a script can read: intervals of precision and recall, exit 3 with the
full JSON report, the rows a certificate would need, and --allow-infeasible's warning."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame, run_dmo
from scipy import stats

from dmocli.operating_point.bounds import clopper_pearson_interval, fewest_certifying_trials
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search
from dmocli.report import SCHEMA_VERSION


@pytest.fixture
def split_files(tmp_path):
    train = tmp_path / "train.parquet"
    val = tmp_path / "val.parquet"
    make_binary_frame(n=800, seed=0).to_parquet(train, index=False)
    make_binary_frame(n=300, seed=1).to_parquet(val, index=False)
    return train, val


def test_intervals_match_scipys_clopper_pearson():
    for k, n in [(0, 10), (3, 10), (10, 10), (47, 60), (1, 1)]:
        expected = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        lower, upper = clopper_pearson_interval(k, n)
        assert math.isclose(lower, expected.low, abs_tol=1e-9) and math.isclose(upper, expected.high, abs_tol=1e-9)
    assert clopper_pearson_interval(0, 0) is None


def test_the_rows_needed_are_the_fewest_whose_bound_reaches_the_target():
    for rate, target, confidence in [(0.9, 0.8, 0.95), (1.0, 0.97, 0.95), (0.85, 0.8, 0.9)]:
        needed = fewest_certifying_trials(rate, target, confidence)
        lower = stats.beta.ppf(1 - confidence, math.floor(rate * needed), needed - math.floor(rate * needed) + 1)
        assert lower >= target - 1e-9
        smaller = needed - 1
        if smaller:
            k = math.floor(rate * smaller)
            assert stats.beta.ppf(1 - confidence, k, smaller - k + 1) < target
    assert fewest_certifying_trials(0.8, 0.8, 0.95) is None


def test_every_binary_split_of_a_train_report_has_intervals_around_its_figures(tmp_path, split_files):
    train, val = split_files
    proc = run_dmo(
        "train",
        train,
        "--val",
        val,
        "--problem",
        "frop",
        "--target",
        "0.7",
        "-o",
        tmp_path / "m.st",
        "--json",
        check=True,
    )
    report = json.loads(proc.stdout)
    for split in report["splits"].values():
        assert split["interval_level"] == 0.95
        for metric in ("precision", "recall"):
            lower, upper = split[f"{metric}_interval"]
            assert lower <= split[metric] <= upper
    point = report["operating_point"]
    assert point["constraint_interval"][0] <= point["recall"] <= point["constraint_interval"][1]
    assert report["feasible"] is True


def test_an_unreachable_target_exits_3_with_the_full_json_report_and_no_model(tmp_path, split_files):
    train, val = split_files
    model, written = tmp_path / "m.st", tmp_path / "r.json"
    proc = run_dmo(
        *(
            f"train {train} --val {val} --problem fpor --target 0.999 --confidence 0.95 -o {model} "
            f"--report {written} --json"
        ).split()
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert "not certified on the val split" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    report = json.loads(proc.stdout)
    assert report["feasible"] is False and report["operating_point"]["best_achievable"] < 0.999
    assert report["splits"]["val"]["precision_interval"] is not None and report["model"] is None
    assert json.loads(written.read_text()) == report
    assert not model.exists()


def test_the_message_says_how_many_rows_a_certificate_would_need(tmp_path, split_files):
    """A val split of fewer than 13 positives cannot certify recall >= 0.7 at 0.99 even with every one found
    (0.7^13 < 0.01 needs 13): the run is refused, and says how many positives would do at the recall seen."""
    train, _ = split_files
    small = tmp_path / "small.parquet"
    frame = make_binary_frame(n=60, seed=5)
    assert 0 < frame.label.sum() < 13
    frame.to_parquet(small, index=False)
    model = tmp_path / "m.st"
    asked = f"--problem frop --target 0.7 --confidence 0.99 -o {model} --json"
    proc = run_dmo(*f"train {train} --val {small} {asked} --new-rows inf".split())  # the population value
    assert proc.returncode == 3
    point = json.loads(proc.stdout)["operating_point"]
    assert point["rows_counted"] == int(frame.label.sum()) and point["rows_needed"] >= 13
    times = point["rows_needed"] / point["rows_counted"]
    needed = f"needs about {point['rows_needed']:,} positives ({times:.1f} times the {point['rows_counted']} counted"
    assert needed in proc.stderr
    # The recall measured on 60 new rows: no rate can promise it, and said so.
    proc = run_dmo(*f"train {train} --val {small} {asked}".replace("--json", "--new-rows 60 --json").split())
    assert proc.returncode == 3 and json.loads(proc.stdout)["operating_point"]["new_rows"] == 60
    assert "measured on 60 new rows (--new-rows 60): at the closest cut" in proc.stderr
    assert "not even a recall of 1 would pass" in proc.stderr and "--new-rows inf" in proc.stderr
    assert "lower --target" not in proc.stderr  # no lower target would pass either: not offered as a fix
    bound = json.loads(proc.stdout)["operating_point"]["best_achievable"]  # the population's: said as such
    assert (
        "(the population's recall) is not certified here either: the highest 0.99 lower bound of the recall at "
        in (proc.stderr)
        and f"any cut is {bound:.4f}" in proc.stderr
    )


def test_allow_infeasible_keeps_the_closest_threshold_with_a_warning(tmp_path, split_files):
    train, val = split_files
    proc = run_dmo(
        *(
            f"train {train} --val {val} --problem fpor --target 0.999 --confidence 0.95 --new-rows 300 "
            f"--allow-infeasible -o {tmp_path / 'm.st'} --json"
        ).split()
    )
    assert proc.returncode == 0 and (tmp_path / "m.st").exists()
    report = json.loads(proc.stdout)
    assert report["feasible"] is False
    assert any("closest threshold is kept (--allow-infeasible)" in w for w in report["warnings"])
    assert "dmo: warning: target precision >= 0.999 is not certified" in proc.stderr

    # The model file says so for good: `dmo info` shows the certificate was not met, and on how many rows.
    info = json.loads(run_dmo("info", tmp_path / "m.st", "--json", check=True).stdout)
    assert info["certified"] is False and info["new_rows"] == 300 and info["schema_version"] == SCHEMA_VERSION
    assert "NOT certified" in run_dmo("info", tmp_path / "m.st", check=True).stdout
    refit = tmp_path / "r.st"
    moved = ("threshold", tmp_path / "m.st", val, "--problem", "fpor", "--target", "0.5", "--no-confidence")
    run_dmo(*moved, "-o", refit, check=True)
    assert json.loads(run_dmo("info", refit, "--json", check=True).stdout)["certified"] is None  # dropped
    run_dmo(*f"threshold {tmp_path / 'm.st'} {val} --problem fpor --target 0.5 --confidence 0.9 -o {refit}".split())
    certified = json.loads(run_dmo("info", refit, "--json", check=True).stdout)
    assert certified["certified"] is True and certified["new_rows"] == 300  # the sample the model was certified on
    assert "NOT certified" not in run_dmo("info", refit, check=True).stdout


def test_threshold_refusal_prints_its_report_too(tmp_path, split_files):
    train, val = split_files
    run_dmo("train", train, "--val", val, "-o", tmp_path / "m.st", check=True)
    proc = run_dmo(
        *(
            f"threshold {tmp_path / 'm.st'} {val} --problem fpor --target 0.999 --confidence 0.95 -o "
            f"{tmp_path / 'n.st'} --json"
        ).split()
    )
    assert proc.returncode == 3 and not (tmp_path / "n.st").exists()
    report = json.loads(proc.stdout)
    assert report["command"] == "threshold" and report["feasible"] is False


def test_frop_search_with_confidence_keeps_the_strictest_certified_cut():
    """Brute force over every cut: the answer is the best precision among cuts whose recall bound reaches the
    target, computed here with scipy's beta quantile."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"s": rng.normal(size=400), "y": (rng.random(400) < 0.2).astype(int)})
    frame.loc[frame.y == 1, "s"] += 1.5
    problem = Problem("frop", 0.6)
    point = search(frame.s.to_numpy(), frame.y.to_numpy(), problem, 0.95)
    n_pos = int(frame.y.sum())
    best = None
    for t in np.unique(frame.s):
        tp = int(((frame.s >= t) & (frame.y == 1)).sum())
        fp = int(((frame.s >= t) & (frame.y == 0)).sum())
        bound = stats.beta.ppf(0.05, tp, n_pos - tp + 1) if tp else 0.0
        if bound >= 0.6 and (best is None or tp / (tp + fp) > best[0]):
            best = (tp / (tp + fp), t)
    assert point.feasible and math.isclose(point.precision, best[0])


def test_a_split_with_no_predicted_positive_is_warned_about_not_reported_as_all_wrong(tmp_path, split_files):
    train, val = split_files
    model = tmp_path / "m.st"
    run_dmo("train", train, "--val", val, "--problem", "frop", "--target", "0.7", "-o", model, check=True)
    shifted = make_binary_frame(n=200, seed=2)
    features = [c for c in shifted.columns if c != "label"]
    shifted[features] -= 20.0  # far on the negative side of every learned direction: nothing scores positive
    far = tmp_path / "far.parquet"
    shifted.to_parquet(far, index=False)
    report = json.loads(run_dmo("evaluate", model, far, "--json", check=True).stdout)
    data = report["splits"]["data"]
    assert data["tp"] + data["fp"] == 0 and data["precision"] == 0.0 and data["precision_interval"] is None
    assert any("no row of the data split is predicted positive" in w for w in report["warnings"])
    normal = json.loads(run_dmo("evaluate", model, val, "--json", check=True).stdout)
    assert not any("predicted positive" in w for w in normal["warnings"])
