"""Gradient-boosted trees (XGBoost) behind the same torch module interface as the linear and MLP networks.

The pipelines score every model family through `logits_of(network, X)` and
save it through `state_dict()`; an adapter keeps cross-fitting, threshold
adjustment, reports, `evaluate`, `predict` and the model file unchanged for
trees. The booster is held as its UBJSON bytes in a uint8 buffer, the
library's own non-executable format: the model file stays one `.safetensors`
file and loading it never unpickles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch
from torch import nn

from dmocli.errors import DmoError
from dmocli.models.ubjson_check import check_ubjson

if TYPE_CHECKING:
    import xgboost

INSTALL_HINT = (
    'the gbdt model family needs XGBoost: pip install "dmocli[gbdt]" (CPU) or "dmocli[gbdt-gpu]" (CUDA builds)'
)


def import_xgboost() -> Any:
    """xgboost, or one line naming the extra to install (it is an optional dependency)."""
    try:
        import xgboost
    except ImportError:
        raise DmoError(INSTALL_HINT) from None
    return xgboost


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
        self._booster: xgboost.Booster | None = None

    @classmethod
    def from_booster(cls, booster: xgboost.Booster, n_outputs: int) -> "BoostedTrees":
        module = cls(n_outputs)
        module.booster = torch.frombuffer(bytearray(booster.save_raw(raw_format="ubj")), dtype=torch.uint8).clone()
        module._booster = booster
        return module

    def xgb_booster(self) -> xgboost.Booster:
        """The booster, parsed from its bytes on first use (bad bytes: one line, not a crash at predict time)."""
        if self._booster is None:
            xgb = import_xgboost()
            if self.booster.numel() == 0:
                raise DmoError("the model file holds no trees; retrain the model")
            raw = self.booster.cpu().numpy().tobytes()
            try:
                check_ubjson(raw)  # XGBoost's reader trusts the lengths it reads: a bad one could crash it
            except ValueError as exc:
                raise DmoError(f"the model file's trees are corrupt ({exc}); retrain") from exc
            try:
                self._booster = xgb.Booster(model_file=bytearray(raw))
            except xgb.core.XGBoostError as exc:
                raise DmoError(f"the model file's trees are corrupt ({str(exc).splitlines()[0]}); retrain") from exc
            self._booster.set_param({"device": self.predict_device, "nthread": 0})
        return self._booster

    def size(self) -> tuple[int, int]:
        """(trees, nodes) of the booster: what `dmo info` gives as a tree model's size (one dump line per node)."""
        dump = self.xgb_booster().get_dump()
        return len(dump), sum(len(tree.splitlines()) for tree in dump)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        data = features.detach().cpu().numpy()
        margins = self.xgb_booster().inplace_predict(data, predict_type="margin") if len(data) else np.zeros((0,))
        margins = np.asarray(margins, dtype=np.float32).reshape(len(data), self.n_outputs)
        return torch.from_numpy(margins).to(features.device)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> None:
        """Take the stored bytes whatever their length (a torch buffer load would demand today's length)."""
        if set(state_dict) != {"booster"}:
            raise KeyError(f"a gbdt model file holds one tensor 'booster', not {sorted(state_dict)}")
        self.booster = torch.as_tensor(state_dict["booster"], dtype=torch.uint8).flatten().clone()
        self._booster = None
