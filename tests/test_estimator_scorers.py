"""DmoClassifier with scikit-learn's scorers on text labels (yes/no): `classes_` sorted as sklearn sorts them, the
columns of predict_proba and the sign of decision_function in that order, and a scorer given `pos_label` equal to
the metric computed by hand on each fold (issue 45, trial 5). scoring="precision" means pos_label=1, which no
yes/no estimator has (LogisticRegression gives NaN too): docs/python.md says to name the positive class."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import make_binary_frame
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, make_scorer, precision_score
from sklearn.model_selection import StratifiedKFold, cross_val_score

from dmocli import DmoClassifier

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _yes_no(positive_label: str = "yes"):
    frame = make_binary_frame(n=400, d=3, pos_frac=0.25, seed=5)
    other = "no" if positive_label == "yes" else "yes"
    y = np.where(frame.pop("label") == 1, positive_label, other)
    return frame, y


@pytest.mark.parametrize("positive", ["yes", "no"])
def test_a_precision_scorer_with_pos_label_is_the_hand_computed_precision(positive):
    """Whichever class is positive (the one sorting last, or first), the fold scores equal precision computed by
    hand from the refitted estimator's predictions, and are finite."""
    X, y = _yes_no(positive)
    clf = DmoClassifier(problem="ofbs", cv=0, positive=positive, seed=0)
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
    scores = cross_val_score(clf, X, y, cv=folds, scoring=make_scorer(precision_score, pos_label=positive))
    by_hand = []
    for train, test in folds.split(X, y):
        predicted = clone(clf).fit(X.iloc[train], y[train]).predict(X.iloc[test])
        flagged = predicted == positive
        by_hand.append(np.sum(flagged & (y[test] == positive)) / np.sum(flagged))
    assert np.isfinite(scores).all() and np.allclose(scores, by_hand)


def test_probability_columns_follow_classes_for_a_pos_label_scorer():
    """predict_proba[:, i] is classes_[i]'s probability: sklearn's scorer picks the column by pos_label through
    classes_, and the average precision it gives is the one of the positive class's probability."""
    X, y = _yes_no("no")  # "no" is positive and sorts first
    clf = DmoClassifier(problem="ofbs", cv=0, positive="no", seed=0).fit(X, y)
    assert list(clf.classes_) == ["no", "yes"]
    scorer = make_scorer(average_precision_score, pos_label="no", response_method="predict_proba")
    by_hand = average_precision_score(y == "no", clf.predict_proba(X)[:, 0])
    assert scorer(clf, X, y) == pytest.approx(by_hand)
    assert by_hand > 0.8  # the column of "no" ranks the "no" rows first: the right column


def test_scoring_precision_without_pos_label_fails_for_any_yes_no_estimator_alike():
    """The documented pitfall, as scikit-learn behaves for its own estimators: scoring="precision" (pos_label=1)
    gives NaN with a warning for LogisticRegression and DmoClassifier alike."""
    X, y = _yes_no()
    for estimator in (LogisticRegression(), DmoClassifier(problem="ofbs", cv=0, positive="yes", seed=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = cross_val_score(estimator, X, y, cv=2, scoring="precision")
        assert np.isnan(scores).all()
