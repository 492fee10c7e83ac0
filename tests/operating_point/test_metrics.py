"""Metrics cross-checked against scikit-learn, with property-based random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn import metrics as skm

from dmocli.operating_point.metrics import average_precision, binary_scores, multiclass_scores, roc_auc

labels_and_scores = (
    st.integers(min_value=2, max_value=200)
    .flatmap(
        lambda n: st.tuples(
            arrays(np.int64, n, elements=st.integers(0, 1)),
            # few distinct values so that ties are common
            arrays(np.float32, n, elements=st.sampled_from([-2.0, -0.5, 0.0, 0.25, 0.5, 1.0, 3.0])),
        )
    )
    .filter(lambda t: 0 < t[0].sum() < t[0].size)
)


@settings(max_examples=150, deadline=None)
@given(labels_and_scores, st.floats(0.25, 4.0))
def test_binary_scores_match_sklearn(data, beta):
    y, scores = data
    pred = scores >= 0.25
    ours = binary_scores(y, pred, beta)
    assert np.isclose(ours["precision"], skm.precision_score(y, pred, zero_division=0))
    assert np.isclose(ours["recall"], skm.recall_score(y, pred, zero_division=0))
    assert np.isclose(ours["f_beta"], skm.fbeta_score(y, pred, beta=beta, zero_division=0))
    tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[0, 1]).ravel()
    assert (ours["tp"], ours["fp"], ours["tn"], ours["fn"]) == (tp, fp, tn, fn)


@settings(max_examples=150, deadline=None)
@given(labels_and_scores)
def test_ranking_metrics_match_sklearn(data):
    y, scores = data
    assert np.isclose(average_precision(y, scores), skm.average_precision_score(y, scores))
    assert np.isclose(roc_auc(y, scores), skm.roc_auc_score(y, scores))


@settings(max_examples=50, deadline=None)
@given(labels_and_scores)
def test_float64_and_float32_paths_agree(data):
    y, scores = data
    assert np.isclose(average_precision(y, scores), average_precision(y, scores.astype(np.float64)))
    assert np.isclose(roc_auc(y, scores), roc_auc(y, scores.astype(np.float64)))


def test_negative_zero_and_extreme_float32_scores_sort_correctly():
    scores = np.array([-np.float32(3.4e38), -0.0, 0.0, 1e-45, -1e-45, 3.4e38, 7.0, -7.0], dtype=np.float32)
    y = np.array([0, 1, 0, 1, 0, 1, 1, 0])
    assert np.isclose(roc_auc(y, scores), skm.roc_auc_score(y, scores))
    assert np.isclose(average_precision(y, scores), skm.average_precision_score(y, scores))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 6).flatmap(
        lambda k: st.tuples(
            st.just(k),
            arrays(np.int64, 60, elements=st.integers(0, k - 1)),
            arrays(np.int64, 60, elements=st.integers(0, k - 1)),
        )
    )
)
def test_multiclass_scores_match_sklearn(data):
    k, y, pred = data
    ours = multiclass_scores(y, pred, k)
    present = np.unique(y)
    assert np.isclose(ours["accuracy"], skm.accuracy_score(y, pred))
    assert np.isclose(ours["macro_f1"], skm.f1_score(y, pred, labels=present, average="macro", zero_division=0))
    assert np.isclose(
        ours["balanced_accuracy"], np.mean(skm.recall_score(y, pred, labels=present, average=None, zero_division=0))
    )
    per_class_p = skm.precision_score(y, pred, labels=list(range(k)), average=None, zero_division=0)
    assert np.allclose(ours["per_class"]["precision"], per_class_p)


def test_log_loss_matches_sklearn():
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(4), size=50)
    y = rng.integers(0, 4, size=50)
    ours = multiclass_scores(y, proba.argmax(1), 4, proba)
    assert np.isclose(ours["log_loss"], skm.log_loss(y, proba, labels=[0, 1, 2, 3]))
