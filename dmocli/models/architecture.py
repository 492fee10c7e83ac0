"""What a network looks like, as a small JSON-able record, kept apart from torch.

The model file stores it and networks.build_network turns it into torch
layers; code that only writes weights (the numpy streaming solvers) uses it
without importing torch, which costs seconds of start-up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dmocli.errors import DmoError

MAX_PARAMETERS = 500_000_000  # 2 GB of float32 weights, about 8 GB with gradients and Adam's moments
MAX_DEPTH = 1000


@dataclass
class Architecture:
    """linear: one affine layer; mlp: `depth` hidden layers of `width` units (Linear, BatchNorm, ReLU); gbdt:
    gradient-boosted trees (their settings are the solver's `--param`s, kept in the model file's info).
    `members` > 1: that many networks of this shape whose logits are averaged (`--cv-transfer ensemble` keeps
    the K fold models so); `parameters` counts one of them."""

    kind: str
    n_inputs: int
    n_outputs: int
    width: int = 100
    depth: int = 2
    batchnorm: bool = True
    members: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("linear", "mlp", "gbdt"):
            raise DmoError(f"--model {self.kind!r} is not known (use linear, mlp or gbdt)")
        if self.width < 1 or self.depth < 1:
            raise DmoError("--width and --depth must be at least 1")
        if not isinstance(self.members, int) or self.members < 1:
            raise DmoError(f"an ensemble of {self.members!r} members is not a network (it needs at least 1)")
        if self.kind == "mlp" and (self.depth > MAX_DEPTH or self.parameters > MAX_PARAMETERS):
            raise DmoError(
                f"--width {self.width} --depth {self.depth} make a network of {self.parameters:,} weights; "
                f"the limit is {MAX_PARAMETERS:,} weights and {MAX_DEPTH} layers (a tabular MLP needs far fewer)"
            )

    @property
    def parameters(self) -> int:
        """Weights and biases of the network (BatchNorm's scale and shift included)."""
        if self.kind != "mlp":  # gbdt: its size is the trees', not known before training
            return (self.n_inputs + 1) * self.n_outputs
        hidden = (self.n_inputs + 1) * self.width + (self.depth - 1) * (self.width + 1) * self.width
        return hidden + self.depth * 2 * self.width * self.batchnorm + (self.width + 1) * self.n_outputs

    def to_dict(self) -> dict:
        """The record the model file and the report keep; only the MLP has hidden layers, so the others leave
        width, depth and batchnorm out, and a single network leaves `members` out (from_dict fills their defaults
        back in, so files written before ensembles load as before)."""
        record = asdict(self)
        if self.members == 1:
            del record["members"]
        if self.kind != "mlp":
            for unused in ("width", "depth", "batchnorm"):
                del record[unused]
        return record

    @classmethod
    def from_dict(cls, data: dict) -> "Architecture":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def linear_state(weight: np.ndarray, bias: float | np.ndarray) -> dict[str, np.ndarray]:
    """The state dict build_network gives a linear architecture ("0.weight" (n_outputs, n_inputs), "0.bias"),
    from numpy arrays: what a torch-free solver saves so the model file loads like any other."""
    weight = np.asarray(weight, dtype=np.float32)
    weight = weight.reshape(1, -1) if weight.ndim == 1 else weight
    return {
        "0.weight": np.ascontiguousarray(weight),
        "0.bias": np.asarray(bias, dtype=np.float32).reshape(weight.shape[0]),
    }
