"""`--confidence C --new-rows N`: the metric *measured on a new sample of N rows* meets the target with probability
at least C. Checked three ways: the exchangeable test's branch and bound against every count evaluated, its tail
against a simulation of exchangeable scores, and a simulation
with known score distributions in which each draw fits the threshold on one sample and measures it on a fresh
sample of N rows; a draw fails when that measured metric is below the target (refusing is safe). The population
certificate alone (no --new-rows) is run beside it, to show that it does not cover the measured value.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import run_dmo
from scipy import stats
from test_confidence_coverage import DRAWS, Gaussian, allowed

from dmocli.errors import DmoError
from dmocli.models.modelfile import load_model
from dmocli.operating_point.new_sample import exchangeable_level, least_successes, passes
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search


def worst_tail(trials: int, successes: int | np.ndarray, fewest: int, target: float, new_rows: int) -> np.ndarray:
    """max over every count m in [fewest, new_rows] of P(K >= successes), K ~ Hyper(trials + m, successes + x_m,
    trials), x_m = ceil(target x m) - 1: the exchangeable test evaluated at every count, no block bound. Each of
    several `successes` gets its own maximum; the tails are one scipy call over the (successes, m) grid."""
    m = np.arange(fewest, new_rows + 1)
    misses = np.ceil(target * m - 1e-9).astype(np.int64) - 1
    k = np.asarray(successes, dtype=np.int64)[..., None]
    return stats.hypergeom.sf(k - 1, trials + m, k + misses, trials).max(axis=-1)


@pytest.mark.parametrize(
    "trials, fewest, target, new_rows", [(40, 5, 0.8, 60), (120, 20, 0.8, 200), (300, 55, 0.8, 400), (90, 30, 0.9, 90)]
)
def test_the_branch_and_bound_decides_as_every_count_would(trials, fewest, target, new_rows):
    level = exchangeable_level(0.95)
    verdicts = passes(trials, np.arange(trials + 1), fewest=fewest, target=target, new_rows=new_rows, level=level)
    successes = np.arange(trials + 1)
    brute = (successes > 0) & (worst_tail(trials, successes, fewest, target, new_rows) <= level)
    assert np.array_equal(verdicts, brute)
    least = least_successes(trials, fewest=fewest, target=target, new_rows=new_rows, level=level)
    assert least == (int(np.argmax(brute)) if brute.any() else None)
    assert brute[least:].all() if least is not None else True  # more successes never fail once some pass


def test_the_tail_is_the_chance_a_recall_cut_at_a_positive_score_misses_on_new_rows():
    """The distribution-free claim behind the test, by simulation: n positives here and m new ones with
    exchangeable scores, the cut at the k-th highest score here; the new sample's recall misses the target as
    often as the hypergeometric tail says (20,000 draws, within 4 standard errors)."""
    n, m, k, target, draws = 30, 12, 27, 0.8, 20_000
    rng = np.random.default_rng(0)
    scores = rng.random((draws, n + m))
    cut = np.sort(scores[:, :n], axis=1)[:, n - k]
    caught = (scores[:, n:] >= cut[:, None]).sum(axis=1)
    missed = float(np.mean(caught < target * m))
    tail = float(worst_tail(n, k, m, target, m))
    assert abs(missed - tail) < 4 * np.sqrt(tail * (1 - tail) / draws)


def test_a_new_sample_that_may_count_no_row_certifies_nothing():
    assert not passes(100, 100, fewest=0, target=0.8, new_rows=100, level=exchangeable_level(0.95)).any()
    assert least_successes(100, fewest=0, target=0.8, new_rows=100, level=exchangeable_level(0.95)) is None


def measured_failures(world, problem: Problem, n: int, new_rows: int | None, sample: int, seed: int):
    """(draws whose fresh sample of `sample` rows misses the target, answered draws)."""
    rng = np.random.default_rng(seed)
    wrong = answered = 0
    for _ in range(DRAWS):
        scores, y = world.draw(n, rng)
        point = search(scores, y, problem, 0.95, new_rows=new_rows)
        if not point.feasible:
            continue
        answered += 1
        fresh, truth = world.draw(sample, rng)
        decided = fresh >= point.threshold
        tp = int((decided & (truth == 1)).sum())
        counted = int(decided.sum()) if problem.kind == "fpor" else int(truth.sum())
        wrong += counted == 0 or tp / counted < problem.target
    return wrong, answered


@pytest.mark.parametrize("kind", ["fpor", "frop"])
def test_the_metric_measured_on_new_rows_meets_the_target_as_certified(kind):
    world, n, sample = Gaussian(prior=0.1, shift=3.5 if kind == "fpor" else 3.0), 3000, 1000
    wrong, answered = measured_failures(world, Problem(kind, 0.8), n, sample, sample, seed=5)
    population_wrong, population_answered = measured_failures(world, Problem(kind, 0.8), n, None, sample, seed=5)
    print(f"{kind}: new-rows {wrong}/{answered}, population certificate {population_wrong}/{population_answered}")
    assert wrong <= allowed(0.95) and answered >= 0.8 * DRAWS
    assert population_wrong > allowed(0.95)  # bounding the population value does not bound the measured one


def test_new_rows_without_confidence_is_refused():
    scores, y = Gaussian(prior=0.2, shift=2.0).draw(200, np.random.default_rng(0))
    with pytest.raises(DmoError, match="--new-rows says which sample --confidence is about"):
        search(scores, y, Problem("frop", 0.8), None, new_rows=100)


def test_the_cli_certifies_for_new_rows_stores_them_and_threshold_reuses_them(tmp_path):
    rng = np.random.default_rng(0)
    y = (rng.random(3000) < 0.1).astype(np.int64)
    X = rng.normal(size=(3000, 3))
    X[:, 0] += 3.0 * y
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=y)
    data = tmp_path / "d.parquet"
    frame.to_parquet(data)
    model = tmp_path / "m.safetensors"
    args = ("--problem", "frop", "--target", "0.8", "--confidence", "0.95")
    proc = run_dmo("train", data, *args, "--new-rows", "500", "-o", model, "--json", check=True)
    point = json.loads(proc.stdout)["operating_point"]
    assert point["new_rows"] == 500 and 0.8 < point["required_rate"] <= point["recall"]
    population = json.loads(
        run_dmo("train", data, *args, "--new-rows", "inf", "-o", tmp_path / "p.st", "--json").stdout
    )
    assert population["operating_point"]["new_rows"] is None
    assert point["recall"] > population["operating_point"]["recall"]  # a sample's scatter asks for more recall

    refit = run_dmo(
        "threshold", model, data, "-o", tmp_path / "r.safetensors", "--json", "--allow-train-rows", check=True
    )
    assert json.loads(refit.stdout)["operating_point"]["new_rows"] == 500  # the model's own guarantee
    again = run_dmo(
        "threshold",
        tmp_path / "p.st",
        data,
        "-o",
        tmp_path / "q.safetensors",
        "--json",
        "--allow-train-rows",
        check=True,
    )
    assert json.loads(again.stdout)["operating_point"]["new_rows"] is None  # ... and the population's

    refused = run_dmo("train", data, "--problem", "frop", "--target", "0.8", "--new-rows", "500", "-o", model)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--new-rows says which sample --confidence is about" in refused.stderr


def test_by_default_the_certificate_is_about_the_population(tmp_path):
    """Without --new-rows, --confidence promises the population's value (issue 45: one fold's rows refused ordinary
    tables), with --cv and with --val alike, and `dmo threshold` keeps what the model was certified on. The train
    output says so in one line."""
    rng = np.random.default_rng(1)
    y = (rng.random(4000) < 0.1).astype(np.int64)
    X = rng.normal(size=(4000, 3))
    X[:, 0] += 3.0 * y
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=y)
    data, val = tmp_path / "d.parquet", tmp_path / "v.parquet"
    frame.iloc[:3000].to_parquet(data)
    frame.iloc[3000:].to_parquet(val)
    args = ("--problem", "frop", "--target", "0.8", "--confidence", "0.95")

    crossed = json.loads(run_dmo("train", data, *args, "-o", tmp_path / "c.st", "--json", check=True).stdout)
    assert crossed["operating_point"]["new_rows"] is None
    assert "measured on" not in crossed["operating_point"]["certificate"]
    validated = json.loads(run_dmo("train", data, *args, "--val", val, "-o", tmp_path / "v.st", "--json").stdout)
    assert validated["operating_point"]["split"] == "val" and validated["operating_point"]["new_rows"] is None

    shown = run_dmo("train", data, *args, "-o", tmp_path / "c.st", check=True).stdout
    assert "certified: recall in the population >= 0.8 with probability 0.95" in shown

    refit = run_dmo("threshold", tmp_path / "v.st", val, *args, "-o", tmp_path / "r.st", "--json", check=True)
    assert json.loads(refit.stdout)["operating_point"]["new_rows"] is None  # the model's own: the population
    sized = run_dmo("train", data, *args, "--new-rows", "700", "-o", tmp_path / "s.st", "--json", check=True)
    assert json.loads(sized.stdout)["operating_point"]["new_rows"] == 700
    refit = run_dmo("threshold", tmp_path / "s.st", val, *args, "-o", tmp_path / "r.st", "--json", check=True)
    assert json.loads(refit.stdout)["operating_point"]["new_rows"] == 700  # the model's own sample, not DATA's

    for bad in ("0", "1.5", "many", "99999999999999999999"):  # the last beyond int64, and beyond MAX_NEW_ROWS
        refused = run_dmo("train", data, *args, "--new-rows", bad, "-o", tmp_path / "x.st")
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1
        assert f"--new-rows {bad!r}" in refused.stderr or f"--new-rows {bad} " in refused.stderr
        assert "inf" in refused.stderr


def test_inf_in_any_spelling_is_the_population_value_and_numpy_counts_are_counts():
    rng = np.random.default_rng(3)
    y = (rng.random(2000) < 0.1).astype(np.int64)
    scores = (rng.normal(size=2000) + 2.5 * y).astype(np.float32)
    problem = Problem("frop", 0.8)
    population = search(scores, y, problem, 0.95)
    for spelled in (math.inf, "inf", " Infinity "):
        point = search(scores, y, problem, 0.95, new_rows=spelled)
        assert point.new_rows is None and point.threshold == population.threshold
    assert search(scores, y, problem, 0.95, new_rows=np.int64(400)).new_rows == 400
    with pytest.raises(DmoError, match="must be a whole number of rows"):
        search(scores, y, problem, 0.95, new_rows="²")


def test_threshold_keeps_a_models_certificate_and_new_rows_alone_changes_its_sample(tmp_path):
    """`dmo threshold MODEL DATA --new-rows inf` re-certifies the model's own --confidence for the population; a
    file whose info says new_rows null (as threshold wrote before the default sample) is a population one; with
    --no-adjust no search runs, and the file still keeps the --new-rows asked."""
    rng = np.random.default_rng(4)
    y = (rng.random(3000) < 0.1).astype(np.int64)
    X = rng.normal(size=(3000, 3))
    X[:, 0] += 3.0 * y
    data = tmp_path / "d.parquet"
    pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=y).to_parquet(data)
    model = tmp_path / "m.safetensors"
    run_dmo("train", data, "--problem", "frop", "--target", "0.8", "--confidence", "0.95", "-o", model, check=True)
    refit = run_dmo(
        "threshold",
        model,
        data,
        "--new-rows",
        "inf",
        "-o",
        tmp_path / "r.st",
        "--json",
        "--allow-train-rows",
        check=True,
    )
    point = json.loads(refit.stdout)["operating_point"]
    assert point["new_rows"] is None and point["constraint_bound"] >= 0.8 and "Clopper-Pearson" in point["certificate"]

    loaded = load_model(model)
    old_info = {**loaded.info, "new_rows": None}
    loaded.with_decision(dataclasses.replace(loaded.decision, info=old_info)).save(tmp_path / "old.safetensors")
    old = run_dmo(
        "threshold",
        tmp_path / "old.safetensors",
        data,
        "-o",
        tmp_path / "o.st",
        "--json",
        "--allow-train-rows",
        check=True,
    )
    assert json.loads(old.stdout)["operating_point"]["new_rows"] is None

    asked = ("--solver", "ero", "--problem", "frop", "--target", "0.8", "--confidence", "0.95", "--new-rows", "500")
    run_dmo("train", data, *asked, "--no-adjust", "--val", data, "-o", tmp_path / "n.st", check=True)
    assert load_model(tmp_path / "n.st").info["new_rows"] == 500
