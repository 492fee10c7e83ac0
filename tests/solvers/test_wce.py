"""wce: the linear model is the exact optimum of its convex loss; checked against scikit-learn's solver of the
same objective (class-balanced logistic regression with C = 1)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from conftest import make_binary_frame, make_gaussian_classes
from sklearn.linear_model import LogisticRegression

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.solvers.base import FitContext, SplitData
from dmocli.solvers.wce import WeightedCrossEntropy


def _fit(X: np.ndarray, y: np.ndarray, n_outputs: int, model: str = "linear", seed: int = 0, **params: str):
    solver = WeightedCrossEntropy()
    ctx = FitContext(
        None,
        Architecture(model, X.shape[1], n_outputs, width=8, depth=1),
        torch.device("cpu"),
        seed,
        solver.parse_params(params),
    )
    return solver.fit(SplitData(torch.tensor(X), torch.tensor(y)), None, ctx)


def _standardized(frame, label: str = "label") -> tuple[np.ndarray, np.ndarray]:
    X = frame.drop(columns=[label]).to_numpy(np.float64)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), frame[label].to_numpy(np.int64)


def test_binary_linear_fit_is_sklearns_balanced_logistic_regression():
    X, y = _standardized(make_binary_frame(3_000, d=6, pos_frac=0.08, seed=1, sep=1.0))
    result = _fit(X, y, 1)
    layer = result.network[0]
    reference = LogisticRegression(C=1.0, class_weight="balanced", tol=1e-10, max_iter=10_000).fit(
        X.astype(np.float64), y
    )
    np.testing.assert_allclose(layer.weight.detach().numpy()[0], reference.coef_[0], atol=2e-4)
    np.testing.assert_allclose(layer.bias.item(), reference.intercept_[0], atol=2e-4)
    assert result.trace["optimizer"] == "lbfgs" and result.trace["l2"] == pytest.approx(1 / 3_000)
    # convex, started from zero: the seed changes nothing
    assert torch.equal(_fit(X, y, 1, seed=7).network[0].weight, layer.weight)


def test_multiclass_linear_fit_is_sklearns_multinomial_fit():
    X, y = _standardized(make_gaussian_classes(4_000, seed=2, d=5))
    layer = _fit(X, y, 3).network[0]
    reference = LogisticRegression(C=1.0, class_weight="balanced", tol=1e-10, max_iter=10_000).fit(
        X.astype(np.float64), y
    )
    # softmax is shift-invariant: the L2 penalty picks the centred solution in both
    np.testing.assert_allclose(layer.weight.detach().numpy(), reference.coef_, atol=2e-4)
    np.testing.assert_allclose(
        layer.bias.detach().numpy() - layer.bias.detach().numpy().mean(),
        reference.intercept_ - reference.intercept_.mean(),
        atol=2e-4,
    )


def test_adam_remains_available_and_lbfgs_is_refused_for_the_mlp():
    X, y = _standardized(make_binary_frame(800, d=4, seed=3))
    exact = _fit(X, y, 1)
    adam = _fit(X, y, 1, optimizer="adam", batch_size="64", max_epochs="60")
    assert adam.trace["optimizer"] == "adam" and adam.trace["epochs"] <= 60
    # the same loss, reached less exactly: Adam's weights point the same way
    cosine = torch.nn.functional.cosine_similarity(adam.network[0].weight, exact.network[0].weight).item()
    assert cosine > 0.95
    with pytest.raises(DmoError, match="optimizer=lbfgs fits the linear model"):
        _fit(X, y, 1, model="mlp", optimizer="lbfgs")
    with pytest.raises(DmoError, match="--param lr, batch-size applies to optimizer=adam"):  # refused, not ignored
        train(
            pa.table({"x": [0.0, 1.0, 2.0, 3.0], "label": [0, 1, 0, 1]}),
            TrainOptions(params={"lr": "0.1", "batch-size": "8"}),
        )
    with pytest.raises(DmoError, match="optimizer='newton' is not known"):
        _fit(X, y, 1, optimizer="newton")


def test_deep_batchnorm_mlp_on_a_few_hundred_rows_is_judged_as_trained():
    """890 rows in one 1024-row batch: one Adam step per epoch. Judged in eval mode with BatchNorm's running
    statistics (momentum 0.1, a batch or two seen), the paper's 10 x 100 MLP gave a constant output, early
    stopping read a rising loss and kept epoch 1: a useless model. With the statistics refreshed before each
    judgement, the fit runs on and ranks the training rows well."""
    X, y = _standardized(make_binary_frame(890, d=8, pos_frac=0.036, seed=5, sep=1.0))
    solver = WeightedCrossEntropy()
    ctx = FitContext(
        None,
        Architecture("mlp", 8, 1, width=100, depth=10),
        torch.device("cpu"),
        0,
        solver.parse_params({"max_epochs": "40", "stop_frac": "0"}),  # judged on the training loss
    )
    result = solver.fit(SplitData(torch.tensor(X), torch.tensor(y)), None, ctx)
    with torch.no_grad():
        logits = result.network(torch.tensor(X)).squeeze(-1).numpy()
    assert logits.std() > 0.1  # not a constant
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(y, logits) > 0.9
    assert result.trace["epochs"] == 40  # not stopped after the first epoch's patience (20 epochs)
