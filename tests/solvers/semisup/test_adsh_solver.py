"""The fixmatch/adsh training loop on generated long-tailed data (in-process, small and fast)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dmocli.errors import DmoError
from dmocli.models.networks import Architecture
from dmocli.solvers import get_solver
from dmocli.solvers.base import FitContext, SplitData

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def long_tailed(seed: int = 0, counts=(30, 200, 60, 12), labeled_frac: float = 0.15, d: int = 6):
    """Gaussian blobs, one per class, with class 1 the head; returns X, y (-1 = unlabeled) and the truth."""
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(len(counts)), counts)
    centres = rng.normal(scale=2.2, size=(len(counts), d))
    X = (centres[truth] + rng.normal(size=(truth.size, d))).astype(np.float32)
    labeled = rng.random(truth.size) < labeled_frac
    for k in range(len(counts)):  # every class keeps at least one labeled row
        labeled[np.flatnonzero(truth == k)[0]] = True
    y = np.where(labeled, truth, -1)
    return torch.from_numpy(X), torch.from_numpy(y), torch.from_numpy(np.where(labeled, -1, truth))


def fit(name: str, X, y, truth=None, model: str = "linear", seed: int = 0, **params):
    solver = get_solver(name)
    p = solver.parse_params(
        {k: str(v) for k, v in {"epochs": 4, "steps_per_epoch": 10, "fallback": "false", **params}.items()}
    )
    ctx = FitContext(
        None, Architecture(model, X.shape[1], int(y.max()) + 1, width=16, depth=1), torch.device("cpu"), seed, p
    )
    extra = {"unlabeled_truth": truth} if truth is not None else {}
    return solver.fit(SplitData(X, y, extra), None, ctx)


def weights(result) -> list[torch.Tensor]:
    return [t.detach().clone() for t in result.network.state_dict().values()]


def test_thresholds_at_one_equal_no_unlabeled_loss():
    """tau = 1.0 selects no unlabeled row: the run is bit-identical to lambda_u = 0."""
    X, y, _ = long_tailed()
    off = fit("fixmatch", X, y, tau=1.0)
    zero = fit("fixmatch", X, y, lambda_u=0.0)
    assert off.trace["unlabeled_used_fraction"] == [0.0] * 4
    assert sum(map(sum, off.trace["pseudo_labels"])) == 0
    for a, b in zip(weights(off), weights(zero)):
        assert torch.equal(a, b)
    on = fit("fixmatch", X, y, tau=0.0)
    assert on.trace["unlabeled_used_fraction"] == [1.0] * 4
    assert any(not torch.equal(a, b) for a, b in zip(weights(on), weights(zero)))


def test_adsh_tau1_zero_uses_every_row_in_the_first_epoch_and_selects_all_after_updates():
    X, y, _ = long_tailed()
    result = fit("adsh", X, y, tau1=0.0, epochs=2)
    assert result.trace["unlabeled_used_fraction"][0] == 1.0
    n_unlabeled = int((y < 0).sum())
    assert [sum(c) for c in result.trace["pseudo_labels"]] == [n_unlabeled, n_unlabeled]
    assert [u["rho"] for u in result.trace["updates"]] == [1.0, 1.0]


def test_majority_class_comes_from_labeled_counts():
    X, y, _ = long_tailed()
    result = fit("adsh", X, y, epochs=1)
    counts = np.bincount(y[y >= 0].numpy())
    assert result.trace["majority_class"] == 1 == int(np.argmax(counts))
    assert result.trace["labeled_counts"] == counts.tolist()
    assert len(result.trace["thresholds"]) == 2 and len(result.trace["thresholds"][0]) == 4


def test_same_seed_same_model_and_trace():
    X, y, _ = long_tailed()
    a, b = fit("adsh", X, y, model="mlp"), fit("adsh", X, y, model="mlp")
    assert a.trace == b.trace
    assert all(torch.equal(u, v) for u, v in zip(weights(a), weights(b)))


def test_saved_network_is_the_ema_of_the_weights():
    """With ema = 0 the EMA copy is the live network; with the default it lags, so the two runs differ."""
    X, y, _ = long_tailed()
    plain, averaged = fit("fixmatch", X, y, ema=0.0), fit("fixmatch", X, y)
    assert not plain.network.training and not averaged.network.training
    assert any(not torch.equal(a, b) for a, b in zip(weights(plain), weights(averaged)))
    assert all(not p.requires_grad for p in averaged.network.parameters())


def test_adsh_keeps_more_correct_minority_pseudo_labels_than_fixmatch():
    """The paper's claim (Fig. 1): a fixed 0.95 loses most tail pseudo-labels; Adsh keeps a similar share per class."""
    for seed in (0, 1, 2):
        X, y, truth = long_tailed(seed=seed)
        paper = {"warm_start": False, "balanced": False, "strong_noise": 0.5, "strong_mask": 0.3}
        runs = {  # the paper's loop: random start, plain CE, (the former) heavy strong views
            name: fit(name, X, y, truth=truth, epochs=8, steps_per_epoch=15, **paper) for name in ("fixmatch", "adsh")
        }
        quality = {name: r.trace["pseudo_label_quality"][-1] for name, r in runs.items()}
        tail = 3  # the rarest class
        assert quality["adsh"]["recall"][tail] > quality["fixmatch"]["recall"][tail]
        assert quality["adsh"]["precision"][tail] > 0.9


def test_bad_parameters_are_refused():
    X, y, _ = long_tailed()
    with pytest.raises(DmoError, match="tau1"):
        fit("adsh", X, y, tau1=1.5)
    with pytest.raises(DmoError, match="strong-mask"):
        fit("fixmatch", X, y, strong_mask=1.0)
    with pytest.raises(DmoError, match="views=columns"):
        fit("fixmatch", X, y, views="columns")


def test_validation_split_is_scored_each_epoch_with_the_ema_network():
    X, y, truth = long_tailed()
    val = SplitData(X[truth >= 0], truth[truth >= 0])
    solver = get_solver("adsh")
    p = solver.parse_params({"epochs": "3", "steps_per_epoch": "5", "fallback": "false"})
    result = solver.fit(
        SplitData(X, y), val, FitContext(None, Architecture("linear", X.shape[1], 4), torch.device("cpu"), 0, p)
    )
    scores = result.trace["val_balanced_accuracy"]
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    predicted = result.network(val.X).argmax(1).numpy()
    recalls = [np.mean(predicted[val.y.numpy() == k] == k) for k in range(4)]
    assert scores[-1] == pytest.approx(np.mean(recalls))


def test_balanced_loss_is_plain_cross_entropy_when_labeled_classes_are_equal():
    """Inverse-frequency weights are exactly 1 for equal labeled counts, so balanced=true changes nothing there;
    on the long-tailed labels it does change the model."""
    X, y, _ = long_tailed()
    labeled = torch.nonzero(y >= 0).flatten()
    keep = torch.cat([labeled[y[labeled] == k][:2] for k in range(4)])  # two labeled rows per class
    y_equal = torch.full_like(y, -1)
    y_equal[keep] = y[keep]
    plain, balanced = fit("adsh", X, y_equal, balanced=False), fit("adsh", X, y_equal)
    assert balanced.trace["labeled_loss"] == "class-weighted CE" and plain.trace["labeled_loss"] == "CE"
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(weights(plain), weights(balanced)))
    skewed = fit("adsh", X, y)
    plain_skewed = fit("adsh", X, y, balanced=False)
    assert any(not torch.allclose(a, b, atol=1e-3) for a, b in zip(weights(plain_skewed), weights(skewed)))
