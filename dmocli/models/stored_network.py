"""A model file's network scored in numpy: a linear layer, boosted trees and an ensemble's combination of members.

Loading torch costs seconds, more than `dmo info`, `dmo threshold` or a linear model's `dmo predict` take otherwise,
and a CI job calls them several times. So a loaded linear or gbdt model scores here, and only an mlp (or a caller
asking for the torch module: training, `--explain`) builds torch layers (models/networks.py).

Both paths give the same bits because the torch modules call the definitions of this module when they score
(models/networks.py: `logits_of` of a linear layer, `FoldEnsemble` outside autograd). A linear layer's logit is
the bias plus each input's product, added in the inputs' order in float64 and rounded once to float32: a function
of the row alone. torch's float32 matmul was not one (MKL summed in an order that changed with the batch: scored
one row at a time, 93 of 200 rows differed in the last bit from the same rows scored together), so neither
`predict`'s batch size nor the library could keep a row's output exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.models.ubjson_check import check_ubjson

if TYPE_CHECKING:
    import xgboost

INSTALL_HINT = (
    'the gbdt model family needs XGBoost: pip install "dmocli[gbdt]" (CPU) or "dmocli[gbdt-gpu]" (CUDA builds)'
)
MEMBER_MAP = "member_map"  # an ensemble's (slope, intercept) probability map (FoldEnsemble)


def import_xgboost() -> Any:
    """xgboost, or one line naming the extra to install (it is an optional dependency)."""
    try:
        import xgboost
    except ImportError:
        raise DmoError(INSTALL_HINT) from None
    return xgboost


def linear_logits(features: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Logits (n, k) float32 of rows (n, d) under weight (k, d) and bias (k,): the bias, then each input's
    product added in order, in float64, rounded once. networks.logits_of does the same operations in torch."""
    weight = np.asarray(weight, dtype=np.float64)
    rows = np.asarray(features, dtype=np.float64)
    total = np.repeat(np.asarray(bias, dtype=np.float64).reshape(1, -1), len(rows), axis=0)
    for j in range(weight.shape[1]):
        total += rows[:, j : j + 1] * weight[:, j]
    return total.astype(np.float32)


def combine_members(logits: list[np.ndarray], member_map: np.ndarray | None) -> np.ndarray:
    """An ensemble's logits (n, k) float32 from its members' (each (n, k) float32), in float64: the members' mean,
    or with a probability map (slope, intercept) the logit of the members' mean probability
    sigmoid(slope * logit + intercept), as log(mean p) - log(mean (1 - p)) (FoldEnsemble says why)."""
    stacked = np.stack([np.asarray(part, dtype=np.float64) for part in logits])
    if member_map is None:
        total = stacked[0].copy()
        for part in stacked[1:]:
            total += part
        return (total / len(stacked)).astype(np.float32)
    slope, intercept = (float(value) for value in np.asarray(member_map, dtype=np.float64))
    mapped = slope * stacked + intercept
    log_p = -np.logaddexp(0.0, -mapped)  # log sigmoid(mapped), without overflow
    log_q = -np.logaddexp(0.0, mapped)  # log (1 - sigmoid(mapped))
    return (np.logaddexp.reduce(log_p, axis=0) - np.logaddexp.reduce(log_q, axis=0)).astype(np.float32)


class TreeBooster:
    """A booster's UBJSON bytes (the model file's uint8 tensor) and the XGBoost booster parsed from them on first
    use: what models/trees.BoostedTrees wraps for torch, and what a loaded gbdt model scores with."""

    def __init__(self, raw: np.ndarray | bytes, n_outputs: int, *, booster: xgboost.Booster | None = None):
        self.raw = np.frombuffer(bytes(raw), dtype=np.uint8) if isinstance(raw, (bytes, bytearray)) else raw
        self.n_outputs = n_outputs
        self.predict_device = "cpu"
        self._booster = booster

    def xgb_booster(self) -> xgboost.Booster:
        """The booster, parsed from its bytes on first use (bad bytes: one line, not a crash at predict time)."""
        if self._booster is None:
            xgb = import_xgboost()
            if self.raw.size == 0:
                raise DmoError("the model file holds no trees; retrain the model")
            raw = np.ascontiguousarray(self.raw, dtype=np.uint8).tobytes()
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

    def margins(self, features: np.ndarray) -> np.ndarray:
        """The booster's margins (n, n_outputs) float32 of encoded rows: the model's logits."""
        margins = self.xgb_booster().inplace_predict(features, predict_type="margin") if len(features) else []
        return np.asarray(margins, dtype=np.float32).reshape(len(features), self.n_outputs)


@dataclass
class LinearLayer:
    """One linear network (a single nn.Linear) as stored: weight (k, d) and bias (k,), float32."""

    weight: np.ndarray
    bias: np.ndarray

    def margins(self, features: np.ndarray) -> np.ndarray:
        return linear_logits(features, self.weight, self.bias)


@dataclass
class StoredNetwork:
    """A loaded model's network as its file stores it: the state dict (what `DmoModel.save` writes back, and what
    `DmoModel.module` builds torch layers from), and for linear and gbdt models the members that score in numpy.

    `members` and `member_map` read as FoldEnsemble's do (a single network is its own one member), so code that
    looks at a model's members or its probability map (file checks, `dmo info`, `--adapt`) takes either."""

    architecture: Architecture
    state: dict[str, np.ndarray]
    device: Any = "cpu"  # where `DmoModel.module` puts the torch layers

    def __post_init__(self) -> None:
        self.member_map = self.state.get(MEMBER_MAP)
        self._members: list[Any] | None = None

    @property
    def numpy_scored(self) -> bool:
        """Whether it scores without torch: a linear or gbdt network, or an ensemble of them."""
        return self.architecture.kind in ("linear", "gbdt")

    @property
    def members(self) -> list[Any]:
        """The member networks (TreeBooster or LinearLayer), built from the state once."""
        if self._members is None:
            count = self.architecture.members
            prefixes = [""] if count == 1 else [f"members.{index}." for index in range(count)]
            self._members = [self._member(prefix) for prefix in prefixes]
        return self._members

    def _member(self, prefix: str) -> TreeBooster | LinearLayer:
        if self.architecture.kind == "gbdt":
            return TreeBooster(self.state[f"{prefix}booster"], self.architecture.n_outputs)
        if self.architecture.kind == "linear":
            return LinearLayer(self.state[f"{prefix}0.weight"], self.state[f"{prefix}0.bias"])
        raise ValueError(f"a {self.architecture.kind} network is scored by torch, not from its stored tensors")

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Logits of encoded rows, (n,) for one output or (n, k), float32, as networks.logits_of gives them."""
        parts = [member.margins(features) for member in self.members]
        out = parts[0] if len(parts) == 1 else combine_members(parts, self.member_map)
        return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 else out


def linear_tensors(arch: Architecture) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Name -> (dtype, shape) of the tensors a linear network of `arch` saves, as torch's state dict names them."""
    shapes = {"0.weight": (arch.n_outputs, arch.n_inputs), "0.bias": (arch.n_outputs,)}
    prefixes = [""] if arch.members == 1 else [f"members.{index}." for index in range(arch.members)]
    return {prefix + name: (np.dtype(np.float32), shape) for prefix in prefixes for name, shape in shapes.items()}
