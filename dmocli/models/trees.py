"""Gradient-boosted trees (XGBoost) behind the same torch module interface as the linear and MLP networks.

Training scores every model family through `logits_of(network, X)` and
saves it through `state_dict()`; an adapter keeps cross-fitting, threshold
adjustment, reports and the model file unchanged for trees. The booster is
held as its UBJSON bytes in a uint8 buffer, the library's own
non-executable format: the model file stays one `.safetensors` file and
loading it never unpickles. The booster itself (parsing, margins, size) is
models/stored_network.TreeBooster, which a loaded model scores with
without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch
from torch import nn

from dmocli.models.stored_network import TreeBooster

if TYPE_CHECKING:
    import xgboost


class BoostedTrees(nn.Module):
    """An XGBoost booster as a module: forward(X (n, d) float32) -> margins (n, K), the logits of the model.

    Attributes
    ----------
    booster : torch.Tensor of shape (n_bytes,), uint8
        The booster in XGBoost's UBJSON format (a buffer, so state_dict and load_state_dict carry it).
    n_outputs : int
        1 for a binary model (the positive class's logit), K for a K-class softmax model.
    """

    def __init__(self, n_outputs: int = 1, device: str = "cpu"):
        super().__init__()
        self.n_outputs = n_outputs
        self.predict_device = device
        self.register_buffer("booster", torch.zeros(0, dtype=torch.uint8))
        self._trees: TreeBooster | None = None  # the booster parsed from `booster` (models/stored_network.py)

    @classmethod
    def from_booster(cls, booster: xgboost.Booster, n_outputs: int) -> "BoostedTrees":
        module = cls(n_outputs)
        module.booster = torch.frombuffer(bytearray(booster.save_raw(raw_format="ubj")), dtype=torch.uint8).clone()
        module._trees = TreeBooster(module.booster.numpy(), n_outputs, booster=booster)
        return module

    def trees(self) -> TreeBooster:
        """The torch-free booster of these bytes, the one a loaded model scores with."""
        if self._trees is None:
            self._trees = TreeBooster(self.booster.cpu().numpy(), self.n_outputs)
            self._trees.predict_device = self.predict_device
        return self._trees

    def xgb_booster(self) -> xgboost.Booster:
        """The booster, parsed from its bytes on first use (bad bytes: one line, not a crash at predict time)."""
        return self.trees().xgb_booster()

    def size(self) -> tuple[int, int]:
        """(trees, nodes) of the booster: what `dmo info` gives as a tree model's size (one dump line per node)."""
        return self.trees().size()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        margins = self.trees().margins(features.detach().cpu().numpy())
        return torch.from_numpy(margins).to(features.device)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> None:
        """Take the stored bytes whatever their length (a torch buffer load would demand today's length)."""
        if set(state_dict) != {"booster"}:
            raise KeyError(f"a gbdt model file holds one tensor 'booster', not {sorted(state_dict)}")
        self.booster = torch.as_tensor(np.asarray(state_dict["booster"]), dtype=torch.uint8).flatten().clone()
        self._trees = None
