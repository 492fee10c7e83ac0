"""Feature-space views: the strong view perturbs a row around itself (inverted-dropout masking, zero-mean noise)."""

from __future__ import annotations

import torch

from dmocli.solvers.base import SplitData
from dmocli.solvers.semisup.feature_views import FeatureViews


def test_strong_mask_is_inverted_dropout_with_the_row_as_expectation():
    X = torch.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
    views = FeatureViews(
        SplitData(X, torch.tensor([0, 1])),
        weak_noise=0.0,
        strong_noise=0.0,
        strong_mask=0.25,
        mode="noise",
        generator=torch.Generator().manual_seed(0),
    )
    rows = torch.zeros(20000, dtype=torch.long)
    strong = views.strong(rows)
    kept = strong != 0
    assert torch.equal(strong[kept], (X[0] / 0.75).expand_as(strong)[kept])  # kept features scaled by 1/(1-p)
    assert abs(float(kept.float().mean()) - 0.75) < 0.01
    assert torch.allclose(strong.mean(dim=0), X[0], atol=0.05)  # E[A(x)] = x, not pulled toward the mean (0)
    assert torch.equal(views.weak(rows[:3]), X[[0, 0, 0]])  # weak noise 0: the row itself
