"""ERO and the smoothed baselines, checked against independent computations (docs/algorithms.md#ero)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_binary_frame, run_dmo

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.models.networks import build_network
from dmocli.operating_point.problems import Problem
from dmocli.solvers.base import SplitData
from dmocli.solvers.ero.penalty import RowAdam
from dmocli.solvers.ero.settings import preset
from dmocli.solvers.ero.warm_start import bce_warm_start
from dmocli.solvers.relaxation import h, metric_terms, soft_counts, violations

torch.set_num_threads(1)  # tiny tensors: one thread is faster, and the test machine is shared


def _untimed(history: list[dict]) -> list[dict]:
    """An ERO trace's history without its wall-clock seconds, the one part two identical runs need not share."""
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


# ---------------------------------------------------------------- h(s, z) and the violations


def test_h_and_violations_match_the_definitions_on_a_grid():
    s_grid, z_grid = np.meshgrid(np.linspace(0, 1, 41), np.linspace(-0.5, 0.5, 41))
    s_np, z_np = s_grid.ravel(), z_grid.ravel()
    s, z = torch.tensor(s_np), torch.tensor(z_np)
    clip = np.clip(s_np + z_np, 0.0, 1.0)
    assert np.allclose(h(s, z).numpy(), clip - s_np)
    assert np.allclose(h(s, z).numpy(), np.maximum(z_np, -s_np) - np.maximum(s_np + z_np - 1.0, 0.0))
    pos = torch.ones_like(s, dtype=torch.bool)
    assert np.allclose(violations(s, z, pos).numpy(), np.maximum(0.0, s_np - clip))
    assert np.allclose(violations(s, z, ~pos).numpy(), np.maximum(0.0, clip - s_np))
    # The one-sided identities behind the reformulation, away from the singular z = 0.
    pred = (z_np > 0).astype(float)
    off = np.abs(z_np) > 1e-9
    assert np.array_equal((s_np <= clip + 1e-12)[off], (s_np <= pred)[off])
    assert np.array_equal((s_np >= clip - 1e-12)[off], (s_np >= pred)[off])


@pytest.mark.parametrize("kind,target,beta", [("fpor", 0.7, 1.0), ("frop", 0.6, 1.0), ("ofbs", None, 2.0)])
def test_binary_s_equal_to_predictions_has_no_violation_and_exact_metrics(kind, target, beta):
    rng = np.random.default_rng(1)
    y = torch.tensor(rng.random(300) < 0.2)
    z = torch.tensor(rng.uniform(-0.5, 0.5, 300))
    s = (z > 0).double()
    assert float(violations(s, z, y).max()) <= 1e-12  # zero up to rounding of max(z, -s) - max(s + z - 1, 0)
    problem = Problem(kind, target, beta)
    tp, fp = soft_counts(s, y)
    objective, gap = metric_terms(problem, tp, fp, float(y.sum()))
    hard_tp, hard_fp, n_pos = int((y & (z > 0)).sum()), int((~y & (z > 0)).sum()), int(y.sum())
    assert float(objective) == pytest.approx(problem.objective(hard_tp, hard_fp, n_pos))
    if kind != "ofbs":
        assert float(-gap + target) == pytest.approx(problem.constrained_metric(hard_tp, hard_fp, n_pos))


def test_row_adam_moves_only_the_rows_of_its_batch_and_stays_in_unit_interval():
    s = torch.full((10,), 0.5)
    adam = RowAdam(10, torch.device("cpu"))
    rows = torch.tensor([1, 4, 7])
    adam.step(s, rows, torch.tensor([5.0, -5.0, 1.0]), lr=0.9)
    untouched = torch.ones(10, dtype=torch.bool)
    untouched[rows] = False
    assert torch.equal(s[untouched], torch.full((7,), 0.5))
    assert s[1] == 0.0 and s[4] == 1.0 and 0.0 <= float(s[7]) < 0.5
    assert float(adam.t[untouched].abs().sum()) == 0.0


# ---------------------------------------------------------------- the solver against enumeration


def _one_d_frame(n: int = 160, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.25).astype(np.int64)
    x = rng.normal(size=n) + 1.6 * y
    return pd.DataFrame({"x": x.astype(np.float32), "label": y})


def _enumerated_optimum(frame: pd.DataFrame, problem: Problem) -> float:
    """Best objective of any 1-D linear classifier (any cut on x or on -x), by brute force."""
    x, y = frame["x"].to_numpy(np.float64), frame["label"].to_numpy()
    n_pos = int(y.sum())
    best = -np.inf
    for sign in (1.0, -1.0):
        v = sign * x
        for cut in np.concatenate(([np.inf], np.unique(v))):
            pred = v >= cut
            tp, fp = int((pred & (y == 1)).sum()), int((pred & (y == 0)).sum())
            if problem.feasible(tp, fp, n_pos) is not False and tp > 0:
                best = max(best, float(problem.objective(tp, fp, n_pos)))
    return best


def _fit(
    tmp_path: Path,
    frame: pd.DataFrame,
    problem: str,
    target: float | None,
    params: dict[str, str],
    solver: str = "ero",
    model: str = "linear",
) -> dict:
    data = tmp_path / f"{solver}-{problem}.parquet"
    frame.to_parquet(data)
    opts = TrainOptions(
        problem=problem,
        target=target,
        solver=solver,
        model=model,
        width=16,
        depth=2,
        device="cpu",
        seed=0,
        params=params,
        allow_infeasible=True,
        cv=0,  # these checks compare the training rows' operating point with the enumerated optimum
    )
    _, report = train(data, opts, output=tmp_path / f"{solver}-{problem}.safetensors")
    return report


@pytest.mark.parametrize(
    "problem,target,params",
    [
        ("fpor", 0.75, {}),
        ("frop", 0.8, {}),
        # the penalty machinery alone: s from uniform noise, no bias projection
        (
            "frop",
            0.8,
            {
                "init": "random",
                "bias_projection": "false",
                "warm_start": "bce",
                "warm_steps": "200",
                "outer": "15",
                "outer_patience": "0",
            },
        ),
    ],
    ids=["fpor", "frop", "frop-random-s"],
)
def test_ero_reaches_the_enumerated_optimum_on_one_dimensional_data(tmp_path, problem, target, params):
    frame = _one_d_frame()
    optimum = _enumerated_optimum(frame, Problem(problem, target))
    report = _fit(tmp_path, frame, problem, target, params)
    own = report["before_adjustment"]["train"]
    assert own["feasible"] is True
    objective = own["recall"] if problem == "fpor" else own["precision"]
    assert objective >= optimum - 0.03
    assert objective <= optimum + 1e-9  # nothing beats the enumeration: a sanity check of the check


def test_ero_meets_precision_target_before_threshold_adjustment(tmp_path):
    frame = make_binary_frame(n=1500, d=5, pos_frac=0.1, seed=5, sep=2.0)
    report = _fit(tmp_path, frame, "fpor", 0.8, {})
    own = report["before_adjustment"]["train"]
    assert own["precision"] >= 0.8 and own["recall"] > 0.3
    trace = report["solver_trace"]
    assert trace["train_before_ta"]["feasible"] is True
    assert trace["outer_iterations"] >= 1 and trace["penalty_parameters"]["mu0"] >= 100.0


def test_ero_minibatch_mode_is_deterministic_and_feasible(tmp_path):
    frame = make_binary_frame(n=900, d=4, pos_frac=0.2, seed=2, sep=2.5)
    params = {"mode": "minibatch", "batch_size": "128", "outer": "4"}
    first = _fit(tmp_path, frame, "frop", 0.8, params)
    second = _fit(tmp_path, frame, "frop", 0.8, params)
    assert first["solver_trace"]["mode"] == "minibatch" and first["solver_trace"]["batch_size"] == 128
    assert first["before_adjustment"]["train"]["recall"] >= 0.8
    assert first["before_adjustment"]["train"]["tp"] == second["before_adjustment"]["train"]["tp"]
    assert _untimed(first["solver_trace"]["history"]) == _untimed(second["solver_trace"]["history"])


def test_minibatch_warm_start_shorter_than_an_epoch_keeps_what_it_learned():
    """A warm-start budget below one epoch (large data in mini-batch mode) must not restore the untrained weights."""
    frame = make_binary_frame(n=4000, d=4, pos_frac=0.1, seed=5, sep=2.5)
    X = torch.tensor(frame.drop(columns="label").to_numpy(), dtype=torch.float32)
    y = torch.tensor(frame["label"].to_numpy())
    torch.manual_seed(0)
    network = build_network(Architecture("linear", 4, 1))

    def balanced_loss() -> float:
        weight = torch.where(y == 1, 0.5 / 0.1, 0.5 / 0.9)
        with torch.no_grad():
            return float(
                torch.nn.functional.binary_cross_entropy_with_logits(network(X).squeeze(-1), y.float(), weight=weight)
            )

    untrained = balanced_loss()
    cfg = replace(preset("fast", "linear"), warm_steps=5)  # 5 steps of 256 rows: a third of an epoch
    assert bce_warm_start(network, SplitData(X, y), cfg=cfg, batch=256, generator=torch.Generator().manual_seed(0)) == 5
    assert balanced_loss() < 0.9 * untrained


def test_warm_start_parameters_it_would_ignore_are_refused(tmp_path):
    frame = make_binary_frame(n=300, d=3, pos_frac=0.2, seed=4, sep=2.5)
    for model, params, message in (
        ("linear", {"warm_steps": "10"}, "add --param warm-start=bce"),
        ("linear", {"warm_monitor": "val"}, "MLP's wce warm start only"),
        ("mlp", {"warm_monitor": "val"}, "give --val"),
    ):
        with pytest.raises(DmoError, match=message):
            _fit(tmp_path, frame, "ofbs", None, params, model=model)
    _fit(tmp_path, frame, "ofbs", None, {"warm_start": "bce", "warm_steps": "10", "outer": "1"})  # read: accepted


def test_ero_mlp_and_folding_select_on_a_held_out_fold(tmp_path):
    frame = make_binary_frame(n=600, d=4, pos_frac=0.2, seed=4, sep=2.5)
    report = _fit(
        tmp_path, frame, "ofbs", None, {"folding": "4", "fold": "1", "outer": "2", "warm_epochs": "20"}, model="mlp"
    )
    assert report["solver_trace"]["monitored_split"] == "fold1of4"
    assert report["before_adjustment"]["train"]["f1"] > 0.5


def _fit_with_val(tmp_path: Path, frame: pd.DataFrame, val: pd.DataFrame, params: dict[str, str], name: str) -> dict:
    data, val_path = tmp_path / f"{name}-train.parquet", tmp_path / f"{name}-val.parquet"
    frame.to_parquet(data)
    val.to_parquet(val_path)
    opts = TrainOptions(
        problem="frop",
        target=0.8,
        solver="ero",
        model="mlp",
        width=32,
        depth=2,
        val=val_path,
        device="cpu",
        seed=0,
        params=params,
        allow_infeasible=True,
    )
    return train(data, opts, output=tmp_path / f"{name}.safetensors")[1]


def test_mlp_warm_start_early_stops_on_the_validation_loss_when_a_split_is_given(tmp_path):
    """fast's MLP warm start watches --val when there is one: on a split of shuffled labels its loss only
    rises, so it stops sooner than the same warm start watching the training loss (no split given)."""
    frame = make_binary_frame(n=600, d=4, pos_frac=0.2, seed=4, sep=2.5)
    noise = make_binary_frame(n=300, d=4, pos_frac=0.2, seed=9, sep=2.5)
    noise["label"] = noise["label"].sample(frac=1.0, random_state=0).to_numpy()
    params = {"outer": "1", "warm_epochs": "40"}
    with_val = _fit_with_val(tmp_path, frame, noise, params, "with-val")["solver_trace"]
    frame.to_parquet(tmp_path / "no-val.parquet")
    opts = TrainOptions(
        problem="frop",
        target=0.8,
        solver="ero",
        model="mlp",
        width=32,
        depth=2,
        device="cpu",
        seed=0,
        params=params,
        allow_infeasible=True,
        cv_transfer="apply",  # the warm start of the one fit on all rows (the default keeps the folds' fits)
    )
    without = train(tmp_path / "no-val.parquet", opts, output=tmp_path / "no-val.safetensors")[1]["solver_trace"]
    assert (with_val["warm_start_monitor"], without["warm_start_monitor"]) == ("val", "train")
    assert with_val["warm_start_steps"] < without["warm_start_steps"]


def test_thorough_keeps_the_best_train_iterate_not_the_best_validation_one(tmp_path):
    # Overlapping classes: a train precision of 1 at recall 0.8 needs memorization, so iterates differ on train.
    frame = make_binary_frame(n=500, d=6, pos_frac=0.2, seed=7, sep=1.2)
    val = make_binary_frame(n=300, d=6, pos_frac=0.2, seed=8, sep=1.2)
    # Every outer iteration runs (outer-patience=0): the outer-loop stop reads the selection, and would cut the
    # two runs' iterates at different points.
    thorough = _fit_with_val(tmp_path, frame, val, {"protocol": "thorough", "outer_patience": "0"}, "thorough")
    on_val = _fit_with_val(
        tmp_path, frame, val, {"protocol": "thorough", "outer_patience": "0", "selection": "best"}, "on-val"
    )
    trace = thorough["solver_trace"]
    assert trace["selected_on"] == "train" and trace["monitored_split"] == "val"
    # Independent of the selection code: the best feasible train objective over the recorded iterates.
    recorded = [trace["warm_start_train_objective"]] + [
        h["train_objective"] for h in trace["history"] if h["train_feasible"]
    ]
    own = thorough["before_adjustment"]["train"]
    assert own["recall"] >= 0.8 and own["precision"] == pytest.approx(max(recorded))
    # The same iterates judged on validation keep a different one (else this test would check nothing).
    assert _untimed(on_val["solver_trace"]["history"]) == _untimed(trace["history"])
    assert on_val["solver_trace"]["selected_outer"] != trace["selected_outer"]


def test_thorough_stops_once_the_kept_iterate_is_unbeatable_on_train(tmp_path):
    frame = make_binary_frame(n=400, d=4, pos_frac=0.2, seed=9, sep=8.0)  # separable: precision 1 at recall 1
    val = make_binary_frame(n=200, d=4, pos_frac=0.2, seed=10, sep=8.0)
    report = _fit_with_val(tmp_path, frame, val, {"protocol": "thorough"}, "separable")
    assert report["before_adjustment"]["train"]["precision"] == 1.0
    assert report["solver_trace"]["outer_iterations"] == 1


def test_train_selection_refuses_an_unused_held_out_fold(tmp_path):
    with pytest.raises(DmoError, match="folding"):
        _fit(
            tmp_path,
            make_binary_frame(n=200, seed=1),
            "frop",
            0.8,
            {"protocol": "thorough", "folding": "3"},
            model="mlp",
        )


def test_more_folds_than_rows_of_a_class_are_refused(tmp_path):
    frame = make_binary_frame(n=200, seed=1)
    frame = pd.concat([frame[frame.label == 0], frame[frame.label == 1].head(2)])  # 2 positives: folds 0 and 1 only
    with pytest.raises(
        DmoError, match="more folds than the 2 training rows of the smaller class.*--folding 2 or fewer"
    ):
        _fit(tmp_path, frame, "frop", 0.8, {"folding": "4", "fold": "2", "outer": "1"})


def test_within_noise_selection_keeps_the_best_train_iterate_the_monitored_split_cannot_tell_apart():
    from dmocli.solvers.selection import Evaluation, WithinNoiseIterate

    network = torch.nn.Linear(1, 1)
    keeper = WithinNoiseIterate(network, Problem("frop", 0.8))

    def offer(step: int, tp: int, fp: int, train_objective: float, train_feasible: bool = True) -> None:
        with torch.no_grad():
            network.bias.fill_(float(step))  # the iterate's identity, to see which weights come back
        precision = tp / (tp + fp)
        keeper.offer(Evaluation(tp, fp, 100, precision, tp / 100, tp >= 80), step, train_feasible, train_objective)

    offer(0, 90, 8, 0.94)  # monitored precision .918: the strict arg-max; SE = sqrt(.918 * .082 / 98) = .028
    offer(1, 85, 9, 0.96)  # .904: within one SE of .918
    offer(2, 88, 11, 0.99)  # .889: more than one SE below, however good on train
    offer(3, 82, 7, 0.99, train_feasible=False)  # .921 but train-infeasible: another class
    offer(4, 79, 2, 0.995)  # recall .79 on the monitored split: infeasible there
    keeper.restore()
    assert keeper.best_step == 1 and float(network.bias.detach()) == 1.0
    # the plain BestIterate would have kept step 0; ties on train go to the later iterate
    offer(5, 90, 8, 0.96)
    keeper.restore()
    assert keeper.best_step == 5


# ---------------------------------------------------------------- baselines


def test_sigmoid_f1_gets_close_to_the_enumerated_f1(tmp_path):
    frame = _one_d_frame()
    optimum = _enumerated_optimum(frame, Problem("ofbs"))
    report = _fit(tmp_path, frame, "ofbs", None, {}, solver="sigmoid-f1")
    assert report["before_adjustment"]["train"]["f1"] >= optimum - 0.05
    assert report["splits"]["train"]["f1"] == pytest.approx(optimum, abs=1e-9)  # TA on train: the exact 1-D optimum


@pytest.mark.parametrize("problem,target", [("fpor", 0.75), ("frop", 0.8), ("ofbs", None)])
def test_lagrangian_ranks_in_the_right_direction_and_records_its_multiplier(tmp_path, problem, target):
    frame = _one_d_frame()
    optimum = _enumerated_optimum(frame, Problem(problem, target))
    report = _fit(tmp_path, frame, problem, target, {}, solver="lagrangian")
    metric = {"fpor": "recall", "frop": "precision", "ofbs": "f1"}[problem]
    assert report["splits"]["train"][metric] == pytest.approx(optimum, abs=1e-9)  # after TA on train
    assert "before_adjustment" in report and report["solver_trace"]["final_multiplier"] >= 0.0


# ---------------------------------------------------------------- the command line


@pytest.fixture(autouse=True)
def _one_thread_subprocesses(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_cli_ero_report_has_trace_and_before_adjustment(tmp_path):
    data, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    make_binary_frame(n=700, seed=7, sep=2.0).to_parquet(data)
    make_binary_frame(n=300, seed=8, sep=2.0).to_parquet(val)
    report = tmp_path / "r.json"
    run_dmo(
        "train",
        data,
        "--val",
        val,
        "--problem",
        "frop",
        "--target",
        "0.8",
        "--solver",
        "ero",
        "--param",
        "outer=2",
        "--device",
        "cpu",
        "-o",
        tmp_path / "m.safetensors",
        "--report",
        report,
        check=True,
    )
    content = json.loads(report.read_text())
    trace = content["solver_trace"]
    for key in ("outer_iterations", "final_constraint_violations", "penalty_parameters", "train_before_ta", "seconds"):
        assert key in trace
    assert trace["monitored_split"] == "val"
    assert content["before_adjustment"]["train"]["threshold"] == 0.0


def test_cli_rejects_bad_ero_params_and_sigmoid_f1_on_fpor(tmp_path):
    data = tmp_path / "train.parquet"
    make_binary_frame(n=200).to_parquet(data)
    bad = run_dmo(
        "train",
        data,
        "--problem",
        "frop",
        "--target",
        "0.8",
        "--solver",
        "ero",
        "--param",
        "protocol=slow",
        "-o",
        tmp_path / "m.safetensors",
    )
    assert bad.returncode == 2 and "protocol" in bad.stderr and "Traceback" not in bad.stderr
    wrong = run_dmo(
        "train",
        data,
        "--problem",
        "fpor",
        "--target",
        "0.8",
        "--solver",
        "sigmoid-f1",
        "-o",
        tmp_path / "m.safetensors",
    )
    assert wrong.returncode == 2 and "sigmoid-f1" in wrong.stderr
    assert not (tmp_path / "m.safetensors").exists()


def test_cli_folding_option_selects_on_a_held_out_fold_and_is_checked(tmp_path):
    data, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    make_binary_frame(n=600, seed=9, sep=2.0).to_parquet(data)
    make_binary_frame(n=100, seed=10, sep=2.0).to_parquet(val)
    report, model = tmp_path / "option.json", tmp_path / "m.safetensors"
    run_dmo(
        "train",
        data,
        "--solver",
        "ero",
        "--folding",
        "3",
        "--param",
        "outer=2",
        "--problem",
        "frop",
        "--target",
        "0.8",
        "--device",
        "cpu",
        "-o",
        model,
        "--report",
        report,
        check=True,
    )
    option = json.loads(report.read_text())["solver_trace"]
    assert option["monitored_split"] == "fold0of3"
    opts = TrainOptions(problem="frop", target=0.8, solver="ero", device="cpu", params={"folding": "3", "outer": "2"})
    _, by_param = train(data, opts, output=tmp_path / "p.safetensors")
    assert _untimed(option["history"]) == _untimed(
        by_param["solver_trace"]["history"]
    )  # the option is the parameter, nothing else
    model.unlink()
    bad = run_dmo(
        "train",
        data,
        "--solver",
        "ero",
        "--folding",
        "3",
        "--val",
        val,
        "--problem",
        "frop",
        "--target",
        "0.8",
        "-o",
        model,
    )
    assert bad.returncode == 2 and "--val" in bad.stderr and "Traceback" not in bad.stderr and not model.exists()
    for solver, folding, needle in (("wce", 3, "--folding"), ("ero", 1, "at least 2")):
        with pytest.raises(DmoError, match=needle):
            train(data, TrainOptions(problem="frop", target=0.8, solver=solver, folding=folding), output=model)
