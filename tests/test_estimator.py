"""dmocli.DmoClassifier: the scikit-learn face of `dmo train`, checked against the file pipeline and sklearn."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.base import clone
from sklearn.metrics import balanced_accuracy_score, precision_score, recall_score
from sklearn.model_selection import cross_val_score

from conftest import make_binary_frame, make_gaussian_classes
from dmocli import DmoClassifier
from dmocli.errors import DmoError
from dmocli.modelfile import load_model
from dmocli.training import TrainOptions, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_frop_on_arrays_meets_the_target_and_matches_the_file_pipeline(tmp_path):
    frame = make_binary_frame(n=800, d=4, pos_frac=0.15, seed=3)
    frame["label"] = np.where(frame["label"] == 1, "fraud", "ok")
    X, y = frame.drop(columns="label"), frame["label"]
    clf = DmoClassifier(problem="frop", target=0.8, positive="fraud", seed=1).fit(X, y)

    predicted = clf.predict(X)
    assert list(clf.classes_) == ["ok", "fraud"] and set(predicted) == {"fraud", "ok"}
    assert recall_score(y, predicted, pos_label="fraud") >= 0.8  # TA on train makes the target exact there
    assert clf.report_["splits"]["train"]["recall"] == pytest.approx(recall_score(y, predicted, pos_label="fraud"))
    assert clf.report_["splits"]["train"]["precision"] == pytest.approx(precision_score(y, predicted, pos_label="fraud"))

    path = tmp_path / "train.parquet"
    frame.to_parquet(path)
    model, report = train(path, TrainOptions(problem="frop", target=0.8, positive="fraud", seed=1),
                          output=tmp_path / "m.safetensors")
    assert model.threshold == pytest.approx(clf.threshold_, abs=1e-6)
    clf.save(tmp_path / "clf.safetensors")
    reloaded = load_model(tmp_path / "clf.safetensors")
    table_logits, _ = reloaded.logits(pa.Table.from_pandas(X, preserve_index=False))
    assert np.allclose(table_logits.reshape(-1), clf.decision_function(X), atol=1e-6)


def test_multiclass_probabilities_and_numpy_input():
    frame = make_gaussian_classes(3_000, seed=2, d=5, sep=1.0)
    X, y = frame.drop(columns="label").to_numpy(), frame["label"].to_numpy()
    clf = DmoClassifier(solver="wce").fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), 3) and np.allclose(proba.sum(axis=1), 1.0)
    assert list(clf.classes_) == [0, 1, 2]
    assert np.array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    assert balanced_accuracy_score(y, clf.predict(X)) > 0.7  # chance: 1/3 (wce weights the classes)


def test_clone_and_cross_validation_work():
    frame = make_binary_frame(n=600, d=3, pos_frac=0.3, seed=5, sep=2.5)
    X, y = frame.drop(columns="label"), frame["label"]
    clf = DmoClassifier(problem="ofbs", seed=0, params={"patience": 10})
    assert clone(clf).get_params() == clf.get_params()
    scores = cross_val_score(clf, X, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.8


def test_bad_shapes_are_refused():
    with pytest.raises(DmoError, match="one label per row"):
        DmoClassifier().fit(np.zeros((5, 2)), [0, 1, 0])
    with pytest.raises(DmoError, match="2-D"):
        DmoClassifier().fit(np.zeros(5), [0, 1, 0, 1, 0])
    with pytest.raises(DmoError, match="rename it"):
        DmoClassifier().fit(pd.DataFrame({"label": [1.0, 2.0], "x": [0.0, 1.0]}), [0, 1])
