"""LUS (docs/algorithms.md#lus): acceptance formulas, `dmo subsample`, offset-corrected training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F
from conftest import make_binary_frame, make_gaussian_classes, run_dmo

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.models.networks import Architecture
from dmocli.pipelines.subsample import SubsampleOptions, subsample
from dmocli.prep.columns import plan_columns
from dmocli.solvers.base import FitContext, SplitData, offset_logits
from dmocli.solvers.subsampling.acceptance import acceptance, case_control_rates
from dmocli.solvers.subsampling.lus import LocalUncertaintySampling, LogisticParams, fit_offset_logistic
from dmocli.use.evaluate import evaluate
from dmocli.use.predict import predict


# ---- the acceptance formula ---------------------------------------------------------------------------------
def test_acceptance_matches_hand_computed_values():
    proba = np.array([[0.9, 0.05, 0.05], [0.3, 0.3, 0.4], [0.5, 0.5, 0.0]])
    # gamma 5: q = 0.9 -> confident class 0.1 / (5 - 2.5) = 0.04, others min(1, 1.8 / 5) = 0.36;
    # q < 0.5 or a tie at 0.5 -> every class 2 * 0.5 / 5 = 0.2
    expected = np.array([[0.04, 0.36, 0.36], [0.2, 0.2, 0.2], [0.2, 0.2, 0.2]])
    np.testing.assert_allclose(acceptance(proba, 5.0), expected, rtol=1e-12)
    # gamma 1.5 < 2: max(q, gamma/2) switches between q and gamma/2
    np.testing.assert_allclose(acceptance(np.array([[0.8, 0.2]]), 1.5), [[0.2 / 0.7, 1.0]], rtol=1e-12)
    np.testing.assert_allclose(acceptance(np.array([[0.6, 0.4]]), 1.5), [[0.4 / 0.75, 0.8]], rtol=1e-12)


def _random_proba(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(k, 0.3), size=n)
    proba[:5] = np.eye(k)[np.arange(5) % k]  # include certain rows (q = 1)
    return proba


def test_gamma_one_accepts_everything():
    for k in (2, 3, 7):
        np.testing.assert_allclose(acceptance(_random_proba(500, k, k), 1.0), 1.0, rtol=1e-9)


def test_two_classes_gamma_two_is_local_case_control():
    proba = _random_proba(1000, 2, 1)
    a = acceptance(proba, 2.0)
    np.testing.assert_allclose(a, np.clip(1.0 - proba, 1e-7, 1.0), atol=2e-7)


def test_acceptance_is_a_probability_and_keeps_at_most_one_over_gamma_in_expectation():
    for seed, (k, gamma) in enumerate([(2, 1.3), (3, 2.0), (5, 7.5), (26, 40.0)]):
        proba = _random_proba(2000, k, seed)
        a = acceptance(proba, gamma)
        assert a.min() >= 0.0 and a.max() <= 1.0
        # Theorem 4.2: with labels drawn from the pilot's own p, E[a(x, y)] <= 1/gamma
        assert (proba * a).sum(axis=1).max() <= 1.0 / gamma + 1e-9


def test_case_control_rates_equalize_classes_and_keep_small_ones_whole():
    np.testing.assert_allclose(case_control_rates(np.array([10, 80, 10]), 30), [1.0, 0.125, 1.0])
    np.testing.assert_allclose(case_control_rates(np.array([5, 100, 100]), 105), [1.0, 0.5, 0.5])
    np.testing.assert_allclose(case_control_rates(np.array([5, 100]), 500), [1.0, 1.0])


def test_binary_offset_is_the_log_odds_form_of_the_softmax_offset():
    rng = np.random.default_rng(0)
    f = torch.tensor(rng.normal(size=(50, 1)))
    off = torch.tensor(np.log(rng.uniform(0.05, 1.0, size=(50, 2))))
    y = torch.tensor(rng.integers(0, 2, 50))
    bce = F.binary_cross_entropy_with_logits(offset_logits(f, off).squeeze(-1), y.double())
    softmax = F.cross_entropy(torch.cat([torch.zeros_like(f), f], 1) + off, y)
    assert float(bce) == pytest.approx(float(softmax), rel=1e-10)


def test_planner_never_uses_offset_columns_as_features():
    schema = pa.schema(
        [("x0", pa.float32()), ("label", pa.int64()), ("log_accept_0", pa.float32()), ("log_accept_1", pa.float32())]
    )
    assert plan_columns(schema, "label").numeric == ["x0"]


# ---- offset-corrected fit is consistent ---------------------------------------------------------------------
def _contrasts(network: torch.nn.Module) -> np.ndarray:
    """Coefficients of classes 0 and 2 relative to the majority class 1 (the identifiable 42 numbers)."""
    W = torch.cat([network[0].weight, network[0].bias[:, None]], 1).detach().double().numpy()
    return np.delete(W - W[1], 1, axis=0).ravel()


def _tensors(frame):
    return torch.tensor(frame.drop(columns="label").to_numpy()), torch.tensor(frame["label"].to_numpy())


def test_lus_estimate_approaches_the_full_data_mle_while_an_uncorrected_fit_stays_biased():
    solver = LocalUncertaintySampling()
    params = solver.parse_params({"gamma": "5", "l2": "0"})
    arch = Architecture("linear", 20, 3)
    errors, biased = {}, {}
    for n in (4_000, 64_000):
        X, y = _tensors(make_gaussian_classes(n, seed=n))
        mle, _ = fit_offset_logistic(X, y, None, arch=arch, seed=0, params=LogisticParams(l2=0.0))
        ctx = FitContext(None, arch, torch.device("cpu"), 0, params)
        sub, info = solver._subsample(SplitData(X, y), ctx, 5.0)
        assert info["realized_fraction"] < 0.2 + 0.01
        corrected, _ = fit_offset_logistic(sub.X, sub.y, sub.extra["offsets"], arch=arch, seed=0, params=params)
        plain, _ = fit_offset_logistic(sub.X, sub.y, None, arch=arch, seed=0, params=params)
        errors[n] = np.linalg.norm(_contrasts(corrected) - _contrasts(mle))
        biased[n] = np.linalg.norm(_contrasts(plain) - _contrasts(mle))
    assert errors[64_000] < 0.5 * errors[4_000]  # ~1/sqrt(n): 16x the rows, 4x closer
    assert biased[64_000] > 5 * errors[64_000]
    assert biased[64_000] > 0.5 * biased[4_000]  # the uncorrected fit does not converge to the MLE


def test_the_pilots_rows_make_the_same_budget_closer_to_the_mle():
    """keep_pilot adds the pilot's uniform rows with offset 0: still consistent, and more rows for the same
    budget (the pilot is paid for either way), so on average closer to the full-data MLE than the paper's fit
    on the accepted rows alone."""
    solver = LocalUncertaintySampling()
    arch = Architecture("linear", 20, 3)
    error = {"true": [], "false": []}
    for seed in range(4):
        X, y = _tensors(make_gaussian_classes(30_000, seed=100 + seed))
        mle, _ = fit_offset_logistic(X, y, None, arch=arch, seed=0, params=LogisticParams(l2=0.0))
        for keep in error:
            params = solver.parse_params({"gamma": "5", "l2": "0", "keep_pilot": keep})
            sub, info = solver._subsample(
                SplitData(X, y), FitContext(None, arch, torch.device("cpu"), seed, params), 5.0
            )
            assert sub.X.shape[0] == info["kept_rows"] + info["pilot_rows_in_fit"]
            fitted, _ = fit_offset_logistic(sub.X, sub.y, sub.extra["offsets"], arch=arch, seed=0, params=params)
            error[keep].append(np.linalg.norm(_contrasts(fitted) - _contrasts(mle)))
        assert info["pilot_rows_in_fit"] == 0 and info["pilot_rows"] > 2_500
    assert np.mean(error["true"]) < 0.85 * np.mean(error["false"])


# ---- the command line and the library ------------------------------------------------------------------------
# Each `dmo` subprocess pays the torch import (seconds on a loaded machine), so the CLI is exercised end to end
# a few times and the finer properties are checked by calling the same library functions in-process.
N_SIM = 12_000


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sim")
    paths = {"train": root / "train.parquet", "test": root / "test.parquet"}
    make_gaussian_classes(N_SIM, seed=11).to_parquet(paths["train"])
    make_gaussian_classes(4_000, seed=12).to_parquet(paths["test"])
    return paths


def _subsample(data: Path, out: Path, **kw) -> dict:
    return subsample(data, out, SubsampleOptions(**{"gamma": 4.0, "batch_rows": 5000, **kw}))


def test_cli_subsample_then_train_then_evaluate(sim, tmp_path):
    sub, rep = tmp_path / "sub.parquet", tmp_path / "sub.json"
    run_dmo("subsample", sim["train"], "--gamma", "4", "-o", sub, "--report", rep, "--batch-rows", "5000", check=True)
    report = json.loads(rep.read_text())
    table = pq.read_table(sub)
    offsets = np.stack([table.column(f"log_accept_{k}").to_numpy() for k in range(3)], axis=1)
    assert report["rows_read"] == N_SIM and report["rows_written"] == table.num_rows
    # the pilot's rows are written too, with acceptance 1 for every class (all-labeled data: every pilot row)
    assert report["rows_written"] == report["rows_kept"] + report["pilot_rows_written"]
    assert report["pilot_rows_written"] == report["pilot_rows"]
    all_zero = (offsets == 0).all(axis=1)
    assert all_zero.sum() >= report["pilot_rows"]
    assert report["pilot_rows"] == pytest.approx(0.1 * N_SIM, rel=0.15)
    # kept fraction <= 1/gamma plus sampling noise; realized close to expected
    assert report["expected_fraction"] <= 0.25 + 0.01
    assert abs(report["realized_fraction"] - report["expected_fraction"]) < 4 * np.sqrt(0.25 / N_SIM)
    assert 0.8 < report["pilot_accuracy"] < 0.95
    # every row carries a(x, k) for all k: in (0, 1], and at most one class (the confident one) differs
    a = np.exp(offsets.astype(np.float64))
    assert (a > 0).all() and (a <= 1 + 1e-6).all()
    assert max(len(np.unique(np.round(row, 5))) for row in a) <= 2
    assert set(table.column_names) >= {"x0", "x19", "label"}

    model = tmp_path / "m.safetensors"
    run_dmo("train", "--solver", "lus", sub, "-o", model, check=True)
    split = evaluate(model, sim["test"])["splits"]["data"]
    assert split["accuracy"] > 0.85  # Bayes accuracy of this simulation is about 0.88
    assert {"balanced_accuracy", "macro_f1", "log_loss", "per_class"} <= set(split)
    result = predict(model, sim["test"], tmp_path / "p.parquet")
    assert result.rows == 4_000
    assert set(pq.read_table(tmp_path / "p.parquet").column("predicted").to_pylist()) <= {0, 1, 2}


def test_no_keep_pilot_writes_the_accepted_rows_only(sim, tmp_path):
    kept = _subsample(sim["train"], tmp_path / "a.parquet")
    alone = _subsample(sim["train"], tmp_path / "b.parquet", keep_pilot=False)
    assert (
        alone["rows_written"]
        == alone["rows_kept"]
        == kept["rows_kept"]
        == pq.read_metadata(tmp_path / "b.parquet").num_rows
    )
    assert alone["pilot_rows_written"] == 0
    with_pilot, accepted = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")
    offsets = np.stack([with_pilot.column(f"log_accept_{k}").to_numpy() for k in range(3)], axis=1)
    # dropping the pilot rows (all offsets 0, acceptance 1) from the default output gives the --no-keep-pilot file
    pilot = (offsets == 0).all(axis=1) & ~np.isin(with_pilot.column("x0").to_numpy(), accepted.column("x0").to_numpy())
    assert pilot.sum() == kept["pilot_rows_written"]
    assert with_pilot.filter(pa.array(~pilot)).equals(accepted)


def test_subsample_is_reproducible_for_a_seed(sim, tmp_path):
    outs = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        _subsample(sim["train"], tmp_path / f"{name}.parquet", seed=seed)
        outs.append(pq.read_table(tmp_path / f"{name}.parquet"))
    assert outs[0].equals(outs[1])
    assert not outs[0].equals(outs[2])


def test_baselines_match_lus_size(sim, tmp_path):
    lus = _subsample(sim["train"], tmp_path / "l.parquet")
    budget = lus["expected_fraction"] + lus["pilot_rows"] / lus["rows_read"]
    for method in ("uniform", "case-control"):
        base = _subsample(sim["train"], tmp_path / f"{method}.parquet", method=method, match_size=True)
        assert base["expected_fraction"] == pytest.approx(budget, rel=1e-6)
        assert base["realized_fraction"] == pytest.approx(budget, abs=4 * np.sqrt(budget / N_SIM))
        kept = np.asarray(base["kept_per_class"], dtype=float)
        counts = np.asarray(base["class_counts"], dtype=float)
        if method == "case-control":  # equal expected count per class (no class is small enough to keep whole)
            assert np.abs(kept - kept.mean()).max() < 4 * np.sqrt(kept.mean())
        else:  # uniform keeps the class proportions
            np.testing.assert_allclose(kept / kept.sum(), counts / counts.sum(), atol=0.03)
    plain = _subsample(sim["train"], tmp_path / "u.parquet", method="uniform", gamma=5.0)
    assert plain["pilot_rows"] == 0 and plain["expected_fraction"] == pytest.approx(0.2)


def test_cli_train_lus_with_gamma_in_one_command(sim, tmp_path):
    model, rep = tmp_path / "m.safetensors", tmp_path / "r.json"
    args = ["--solver", "lus", "--gamma", "3", "--cv-transfer", "apply"]  # the trace of the fit on all rows
    run_dmo("train", *args, sim["train"], "-o", model, "--report", rep, check=True)
    trace = json.loads(rep.read_text())["solver_trace"]
    assert trace["gamma"] == 3.0 and trace["kept_rows"] < N_SIM / 3
    assert trace["fraction_used"] == pytest.approx((trace["pilot_rows"] + trace["kept_rows"]) / N_SIM)


def test_two_class_subsample_trains_a_binary_model_with_log_odds_offsets(tmp_path):
    data, sub = tmp_path / "bin.parquet", tmp_path / "sub.parquet"
    make_binary_frame(n=4000, seed=2, pos_frac=0.2).to_parquet(data)
    _subsample(data, sub, gamma=2.0)
    for solver in ("lus", "wce"):
        _, report = train(sub, TrainOptions(solver=solver, val=data), output=tmp_path / f"{solver}.safetensors")
        assert report["problem"] == "ofbs" and report["splits"]["val"]["f1"] > 0.6
    opts = TrainOptions(solver="lus", gamma=2.0, cv_transfer="apply")
    _, report = train(data, opts, output=tmp_path / "g.safetensors")
    assert report["solver_trace"]["kept_rows"] < 2000


def test_usage_errors(sim, tmp_path):
    sub = tmp_path / "s.parquet"
    proc = run_dmo("subsample", sim["train"], "--gamma", "0.5", "-o", sub)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--gamma" in proc.stderr
    bad = [dict(gamma=None), dict(method="lus", match_size=True), dict(method="stratified"), dict(pilot_frac=1.0)]
    for kw in bad:
        with pytest.raises(DmoError):
            _subsample(sim["train"], sub, **kw)
    assert not sub.exists()
    model = tmp_path / "m.safetensors"
    with pytest.raises(DmoError, match="needs --gamma"):
        train(sim["train"], TrainOptions(solver="lus"), output=model)
    with pytest.raises(DmoError, match="--gamma applies to --solver lus"):
        train(sim["train"], TrainOptions(solver="wce", gamma=2.0), output=model)
    _subsample(sim["train"], sub)
    with pytest.raises(DmoError, match="already has subsample columns"):
        _subsample(sub, tmp_path / "t.parquet")
    with pytest.raises(DmoError, match="already a subsample"):
        train(sub, TrainOptions(solver="lus", gamma=2.0), output=model)
    with pytest.raises(DmoError, match="keep-pilot applies to --gamma"):
        train(sub, TrainOptions(solver="lus", params={"keep_pilot": "false"}), output=model)
    with pytest.raises(DmoError, match="one-vs-rest"):
        train(sub, TrainOptions(solver="lus", problem="ofbs", positive="0"), output=model)
    assert not model.exists()


def test_a_pilot_without_a_class_is_refused_by_name(tmp_path):
    """One positive in 3,000 rows: a 10 % pilot almost surely misses it and would be sure no row is positive."""
    frame = make_binary_frame(n=3000, seed=4)
    frame["label"] = 0
    frame.loc[1234, "label"] = 1
    data = tmp_path / "rare.parquet"
    frame.to_parquet(data)
    with pytest.raises(DmoError, match="holds no row of class 1"):
        _subsample(data, tmp_path / "s.parquet", gamma=2.0)
    with pytest.raises(DmoError, match="drop --match-size"):
        _subsample(data, tmp_path / "s.parquet", gamma=2.0, method="case-control", match_size=True)
    with pytest.raises(DmoError, match="holds no row of class 1.*dmo subsample --method case-control"):
        train(data, TrainOptions(solver="lus", gamma=2.0), output=tmp_path / "m.safetensors")
    assert not (tmp_path / "s.parquet").exists() and not (tmp_path / "m.safetensors").exists()


@pytest.mark.slow  # starts a 2-process Dask cluster (tens of seconds on a busy machine)
def test_dask_engine_on_two_local_workers(tmp_path):
    pytest.importorskip("distributed")
    parts = tmp_path / "parts"
    parts.mkdir()
    frame = make_gaussian_classes(12_000, seed=5)
    for i in range(3):
        frame.iloc[i * 4000 : (i + 1) * 4000].to_parquet(parts / f"p{i}.parquet")
    out, rep = tmp_path / "sub.parquet", tmp_path / "r.json"
    run_dmo(
        "subsample",
        parts,
        "--gamma",
        "4",
        "--engine",
        "dask",
        "--workers",
        "2",
        "-o",
        out,
        "--report",
        rep,
        check=True,
        timeout=600,
    )
    report = json.loads(rep.read_text())
    assert report["engine"] == "dask" and report["rows_read"] == 12_000
    table = pq.read_table(out)  # a directory of parts, one per partition
    assert table.num_rows == report["rows_written"] and len(list(out.glob("part-*.parquet"))) == 3
    assert report["expected_fraction"] <= 0.25 + 0.01 and 0.8 < report["pilot_accuracy"]
    # same partitions, same seed: the local engine with one batch per file draws the very same rows
    local = _subsample(parts, tmp_path / "local.parquet", batch_rows=4000)
    assert local["rows_kept"] == report["rows_kept"] and local["rows_written"] == report["rows_written"]
    run_dmo("train", "--solver", "lus", out, "-o", tmp_path / "m.safetensors", check=True)
    # a re-run replaces its own parts directory (same seed: the same rows)
    run_dmo(
        "subsample",
        parts,
        "--gamma",
        "4",
        "--engine",
        "dask",
        "--workers",
        "2",
        "-o",
        out,
        "--report",
        rep,
        check=True,
        timeout=600,
    )
    assert (
        json.loads(rep.read_text())["rows_kept"] == report["rows_kept"]
        and pq.read_table(out).num_rows == table.num_rows
    )


def test_dask_engine_never_replaces_a_directory_that_is_not_its_output(tmp_path):
    """-o pointing at a folder of other files is refused before any cluster starts, and the folder is kept."""
    data = tmp_path / "d.parquet"
    make_gaussian_classes(2_000, seed=6).to_parquet(data)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    proc = run_dmo("subsample", data, "--gamma", "4", "--engine", "dask", "-o", folder)
    assert proc.returncode == 2 and "notes.txt" in proc.stderr and "Traceback" not in proc.stderr
    assert (folder / "notes.txt").read_text() == "keep me"
    proc = run_dmo(
        "subsample", data, "--gamma", "4", "-o", folder
    )  # the local engine writes one file: never a directory
    assert proc.returncode == 2 and "is a directory" in proc.stderr
