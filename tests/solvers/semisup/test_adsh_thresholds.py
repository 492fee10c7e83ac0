"""Adsh's threshold update and FixMatch's selection rule, checked against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dmocli.solvers.semisup.adsh import adsh_thresholds
from dmocli.solvers.semisup.consistency import pseudo_label_quality, selection_mask, unlabeled_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _shuffled(groups: dict[int, list[float]], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    conf = np.array([c for k in groups for c in groups[k]])
    pred = np.array([k for k in groups for _ in groups[k]])
    order = np.random.default_rng(seed).permutation(conf.size)
    return conf[order], pred[order]


def test_hand_computed_update_with_ties_empty_class_and_majority_not_first():
    # Majority class (most labeled rows) is class 2. tau1 = 0.96: 4 of its 6 rows reach it, rho = 4/6.
    # class 0: 3 rows -> position ceil(4*3/6) = 2 -> 0.7, tied with position 3, so 3 rows are kept.
    # class 1: no predicted rows -> keeps its previous threshold 0.88.
    # class 2: position ceil(4*6/6) = 4 -> 0.96.
    # class 3: 4 rows -> position ceil(4*4/6) = 3 -> 0.4.
    groups = {2: [0.99, 0.97, 0.97, 0.96, 0.90, 0.80], 0: [0.9, 0.7, 0.7], 3: [0.6, 0.55, 0.4, 0.3]}
    conf, pred = _shuffled(groups)
    previous = np.array([0.95, 0.88, 0.95, 0.95])
    new, rho = adsh_thresholds(conf, pred, previous=previous, majority=2, tau1=0.96)
    np.testing.assert_array_equal(new, [0.7, 0.88, 0.96, 0.4])
    assert rho == pytest.approx(4 / 6)
    assert previous.tolist() == [0.95, 0.88, 0.95, 0.95]  # not modified in place
    mask = selection_mask(torch.tensor(conf), torch.tensor(pred), torch.tensor(new)).numpy()
    assert np.bincount(pred[mask], minlength=4).tolist() == [3, 0, 4, 3]


def test_taking_class_zero_as_majority_gives_different_thresholds():
    groups = {2: [0.99, 0.97, 0.97, 0.96, 0.90, 0.80], 0: [0.9, 0.7, 0.7], 3: [0.6, 0.55, 0.4, 0.3]}
    conf, pred = _shuffled(groups)
    new, rho = adsh_thresholds(conf, pred, previous=np.full(4, 0.95), majority=0, tau1=0.96)
    # class 0 has no row >= 0.96: rho = 0, every predicted class is switched off, empty class 1 unchanged
    assert rho == 0.0
    np.testing.assert_array_equal(new, [1.0, 0.95, 1.0, 1.0])


def test_cut_position_is_exact_integer_arithmetic():
    # rho = 3/10; 0.3 * 10 = 3.0000000000000004 in floating point, whose ceiling would be 4.
    conf, pred = _shuffled({0: [0.99, 0.98, 0.97] + [0.5] * 7, 1: [0.9 - 0.05 * i for i in range(10)]})
    new, rho = adsh_thresholds(conf, pred, previous=np.full(2, 0.95), majority=0, tau1=0.95)
    assert rho == pytest.approx(0.3)
    assert new[0] == 0.97
    assert new[1] == pytest.approx(0.8)  # third largest of class 1, not the fourth (0.75)


def test_rho_zero_selects_nothing_even_with_saturated_confidence():
    conf, pred = _shuffled({0: [0.5, 0.4], 1: [1.0, 1.0, 0.99]})
    new, rho = adsh_thresholds(conf, pred, previous=np.array([0.95, 0.95, 0.7]), majority=0, tau1=0.95)
    assert rho == 0.0
    np.testing.assert_array_equal(new, [1.0, 1.0, 0.7])
    assert not selection_mask(torch.tensor(conf), torch.tensor(pred), torch.tensor(new)).any()


def test_majority_class_without_predictions_keeps_all_thresholds():
    conf, pred = _shuffled({1: [0.99, 0.6], 2: [0.7]})
    previous = np.array([0.95, 0.9, 0.8])
    new, rho = adsh_thresholds(conf, pred, previous=previous, majority=0, tau1=0.95)
    assert rho is None
    np.testing.assert_array_equal(new, previous)


@pytest.mark.parametrize("tau1", [0.0, 1e-12])
def test_tau1_near_zero_selects_every_row(tau1):
    rng = np.random.default_rng(3)
    conf = rng.uniform(0.1, 1.0, 500)
    pred = rng.integers(0, 5, 500)
    new, rho = adsh_thresholds(conf, pred, previous=np.full(5, 0.95), majority=3, tau1=tau1)
    assert rho == 1.0
    for k in range(5):
        assert new[k] == conf[pred == k].min()
    assert selection_mask(torch.tensor(conf), torch.tensor(pred), torch.tensor(new)).all()


def test_unlabeled_loss_thresholds_one_means_no_contribution():
    torch.manual_seed(0)
    weak = torch.randn(32, 4) * 50  # many rows saturate: softmax confidence exactly 1.0
    weak[0] = torch.tensor([200.0, 0.0, 0.0, 0.0])
    strong = torch.randn(32, 4, requires_grad=True)
    loss, mask = unlabeled_loss(weak, strong, torch.ones(4))
    assert torch.softmax(weak, 1).max(1).values.eq(1.0).any()
    assert not mask.any()
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert torch.count_nonzero(strong.grad) == 0


def test_unlabeled_loss_threshold_zero_means_every_row_contributes():
    torch.manual_seed(1)
    weak, strong = torch.randn(32, 4), torch.randn(32, 4)
    loss, mask = unlabeled_loss(weak, strong, torch.zeros(4))
    assert mask.all()
    expected = torch.nn.functional.cross_entropy(strong, weak.argmax(1))
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)


def test_single_logit_is_two_class_distribution():
    z = torch.tensor([3.0, -2.0, 0.5])
    loss, mask = unlabeled_loss(z, z.clone(), torch.tensor([0.9, 0.9]))
    # confidences sigmoid(3)=0.953, sigmoid(2)=0.881, sigmoid(0.5)=0.62: only the first passes 0.9
    assert mask.tolist() == [True, False, False]
    assert float(loss) == pytest.approx(float(torch.nn.functional.softplus(torch.tensor(-3.0))) / 3, rel=1e-6)


def test_pseudo_label_quality_hand_computed():
    pseudo = np.array([0, 0, 1, 1, 2, 0])
    selected = np.array([True, True, True, False, True, True])
    truth = np.array([0, 1, 1, 1, -1, 0])  # row 4: truth unknown, ignored
    q = pseudo_label_quality(pseudo, selected, truth, 3)
    assert q["selected"] == [3, 1, 0]
    assert q["true"] == [2, 3, 0]
    assert q["precision"] == pytest.approx([2 / 3, 1.0, 0.0])
    assert q["recall"] == pytest.approx([1.0, 1 / 3, 0.0])
