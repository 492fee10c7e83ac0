"""FOFO, OFO and LR on synthetic logistic streams whose true posterior is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dmocli.models.networks import Architecture, build_network
from dmocli.operating_point.problems import Problem
from dmocli.solvers import get_solver
from dmocli.solvers.base import FitContext, Stream
from dmocli.solvers.online.solvers import OnlineLogistic, OnlineScore


def logistic_stream(n: int, d: int, pos: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X ~ N(0, I), P(y=1|x) = sigmoid(w.x + b) with b set so that about `pos` of the rows are positive."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d) * 2.5 / np.sqrt(d)
    X = rng.normal(size=(n, d)).astype(np.float32)
    z = X @ w
    lo, hi = -20.0, 5.0
    for _ in range(50):
        b = (lo + hi) / 2
        lo, hi = (lo, b) if (1 / (1 + np.exp(-(z + b)))).mean() > pos else (b, hi)
    eta = 1 / (1 + np.exp(-(z + b)))
    return X, (rng.random(n) < eta).astype(np.int64), eta


def optimal_threshold(eta: np.ndarray, beta: float = 1.0) -> float:
    """theta* = the root of b^2 pi theta = E[(eta - theta)_+] (Zhao et al. 2013), by bisection on the sample."""
    b2 = beta * beta
    pi = eta.mean()
    lo, hi = 0.0, 1.0 / (1.0 + b2)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if b2 * pi * mid > np.maximum(eta - mid, 0).mean() else (mid, hi)
    return (lo + hi) / 2


def fit(name: str, X: np.ndarray, y: np.ndarray, beta: float = 1.0, epochs: int = 1, **params: str):
    solver = get_solver(name)
    ctx = FitContext(
        Problem("ofbs", beta=beta),
        Architecture("linear", X.shape[1], 1),
        torch.device("cpu"),
        0,
        solver.parse_params(params),
    )

    def batches():
        for i in range(0, len(y), 50_000):
            yield X[i : i + 50_000], y[i : i + 50_000]

    return solver.fit_stream(Stream(batches, len(y), X.shape[1], epochs), ctx)


def test_learned_threshold_approaches_the_true_optimum():
    errors = {}
    for n in (20_000, 400_000):
        errs = []
        for seed in (0, 1):
            X, y, eta = logistic_stream(n, 5, 0.05, seed)
            result = fit("fofo", X, y)
            errs.append(abs(result.online["final_threshold_probability"] - optimal_threshold(eta)))
        errors[n] = float(np.mean(errs))
    assert errors[400_000] < 0.02
    assert errors[400_000] < errors[20_000] / 2


def test_beta_changes_the_optimum_and_fofo_follows():
    X, y, eta = logistic_stream(300_000, 5, 0.2, 3)
    for beta in (0.5, 2.0):
        theta = fit("fofo", X, y, beta=beta).online["final_threshold_probability"]
        assert abs(theta - optimal_threshold(eta, beta)) < 0.03


@pytest.mark.parametrize("pos", [0.01, 0.05])
def test_fofo_online_f1_is_near_ofo_and_clearly_above_lr(pos):
    """The paper: FOFO and OFO far above LR (threshold 0.5) on imbalanced streams. Its further claim, FOFO >= OFO,
    does not hold with the paper's per-row posterior learner on these 100k-row streams: FOFO trails by
    0.01-0.03 (docs/fofo.md), so the test bounds the gap rather than asserting the claim."""
    scores = {"fofo": [], "ofo": [], "lr": []}
    for seed in range(3):
        X, y, _ = logistic_stream(100_000, 10, pos, 10 + seed)
        for name in scores:
            scores[name].append(fit(name, X, y).online["f_beta"])
    mean = {k: float(np.mean(v)) for k, v in scores.items()}
    assert mean["fofo"] >= mean["ofo"] - 0.05
    assert mean["fofo"] > mean["lr"] + 0.05
    assert mean["ofo"] > mean["lr"] + 0.05


def test_model_weights_and_threshold_define_the_final_classifier():
    X, y, eta = logistic_stream(200_000, 5, 0.1, 5)
    result = fit("fofo", X, y)
    weight, bias = result.weights["0.weight"], result.weights["0.bias"]
    assert weight.shape == (1, 5) and bias.shape == (1,)
    logits = X[:1000] @ weight[0] + bias[0]
    theta = result.online["final_threshold_probability"]
    assert result.threshold == pytest.approx(np.log(theta / (1 - theta)))
    # the learned logistic model is close to the generating one (probabilities within a few points)
    assert np.abs(1 / (1 + np.exp(-logits)) - eta[:1000]).mean() < 0.03
    # and the weights load as the torch linear head the model file rebuilds
    network = build_network(Architecture("linear", 5, 1))
    network.load_state_dict({k: torch.as_tensor(v) for k, v in result.weights.items()})
    torch_logits = network(torch.as_tensor(X[:1000])).detach().numpy()[:, 0]
    assert np.allclose(torch_logits, logits, atol=1e-5)


def test_several_passes_restart_the_schedule_and_report_each():
    X, y, _ = logistic_stream(30_000, 5, 0.05, 8)
    result = fit("fofo", X, y, epochs=3)
    assert [p["n"] for p in result.online["passes"]] == [30_000] * 3
    assert result.trace["schedule_restarts"] == 2
    assert result.online["f_beta"] == result.online["passes"][0]["f_beta"]  # headline: the honest first pass
    rows = result.online["curve"]["rows"]
    assert rows == sorted(rows) and rows[-1] == 90_000 and len(rows) <= 2 * 200 * 3


def test_minibatch_eta_never_uses_its_own_label():
    """Flipping the labels from row 300 on changes no eta up to row 300, and changes eta from the end of the
    mini-batch holding row 300 (at most batch_size rows later) on."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4)).astype(np.float32)
    y = (rng.random(1000) < 0.3).astype(np.int64)
    a = OnlineLogistic(4, 8.0, 100, False).process(X, y)
    flipped = y.copy()
    flipped[300:] = 1 - flipped[300:]
    b = OnlineLogistic(4, 8.0, 100, False).process(X, flipped)
    differ = np.flatnonzero(a != b)
    assert differ.size and 300 < differ[0] <= 400
    assert not np.allclose(a[400:], b[400:])


def test_minibatches_grow_from_single_rows_and_any_chunking_gives_the_same_model():
    """The first rows are learned one at a time (the per-row algorithm), later ones in batches of about
    sqrt(rows seen), at most batch_size; a batch straddling odd chunks updates once complete, so the chunking
    changes nothing but float rounding (fit_stream also cuts chunks at batch ends: the weights bit for bit there)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20_000, 6)).astype(np.float32)
    y = (rng.random(20_000) < 0.1).astype(np.int64)
    per_row = OnlineLogistic(6, 2.0, 1, False)
    per_row.process(X[:4], y[:4])
    batched = OnlineLogistic(6, 2.0, 64, False)
    batched.process(X[:4], y[:4])
    np.testing.assert_array_equal(per_row.w, batched.w)  # sizes 1, 1, 1, 1: identical to per-row SGD
    whole = OnlineLogistic(6, 2.0, 64, False)
    eta_whole = whole.process(X, y)
    assert whole.seen == 20_000 - whole._open and 0 < whole._open < 64  # the last batch waits for more rows
    whole.finish_batch()
    assert whole.steps < 500 and whole.seen == 20_000  # mostly batches of 64 (per-row would be 20,000 steps)
    chunked = OnlineLogistic(6, 2.0, 64, False)
    cuts = [0, 3, 1000, 1001, 7777, 15_000, 20_000]
    eta_chunked = np.concatenate([chunked.process(X[a:b], y[a:b]) for a, b in zip(cuts, cuts[1:])])
    np.testing.assert_allclose(eta_chunked, eta_whole, rtol=1e-5)
    chunked.finish_batch()
    np.testing.assert_allclose(chunked.w, whole.w, rtol=1e-4)


def test_online_score_curve_is_bounded_and_exact():
    rng = np.random.default_rng(1)
    pred = rng.random(100_000) < 0.1
    y = (rng.random(100_000) < 0.1).astype(np.int64)
    score = OnlineScore(1.0, expected_rows=None)
    for i in range(0, 100_000, 7_000):
        score.add(pred[i : i + 7_000], y[i : i + 7_000])
    assert len(score.curve_rows) <= 400
    for rows, f in zip(score.curve_rows[::37], score.curve_f[::37]):
        tp = int((pred[:rows] & (y[:rows] == 1)).sum())
        assert f == pytest.approx(2 * tp / (y[:rows].sum() + pred[:rows].sum()))
    assert score.f_beta == pytest.approx(2 * (pred & (y == 1)).sum() / (y.sum() + pred.sum()))


def test_streaming_train_restores_arrow_cpu_count(tmp_path):
    """The streaming passes decode on one arrow thread; a Python caller's arrow pool size comes back unchanged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dmocli import TrainOptions, train

    X, y, _ = logistic_stream(5_000, 3, 0.1, 9)
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "label": y}), path)
    before = pa.cpu_count()
    pa.set_cpu_count(before + 1)
    try:
        train(path, TrainOptions(solver="fofo"), output=tmp_path / "m.safetensors")
        assert pa.cpu_count() == before + 1
    finally:
        pa.set_cpu_count(before)
