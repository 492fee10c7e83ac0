"""What a network looks like, as a small JSON-able record, kept apart from torch.

The model file stores it and networks.build_network turns it into torch
layers; code that only writes weights (the numpy streaming solvers) uses it
without importing torch, which costs seconds of start-up.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .errors import DmoError


@dataclass
class Architecture:
    """linear: one affine layer; mlp: `depth` hidden layers of `width` units (Linear, BatchNorm, ReLU)."""

    kind: str
    n_inputs: int
    n_outputs: int
    width: int = 100
    depth: int = 2
    batchnorm: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("linear", "mlp"):
            raise DmoError(f"--model {self.kind!r} is not known (use linear or mlp)")
        if self.width < 1 or self.depth < 1:
            raise DmoError("--width and --depth must be at least 1")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Architecture":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def linear_state(weight: np.ndarray, bias: float | np.ndarray) -> dict[str, np.ndarray]:
    """The state dict build_network gives a linear architecture ("0.weight" (n_outputs, n_inputs), "0.bias"),
    from numpy arrays: what a torch-free solver saves so the model file loads like any other."""
    weight = np.asarray(weight, dtype=np.float32)
    weight = weight.reshape(1, -1) if weight.ndim == 1 else weight
    return {"0.weight": np.ascontiguousarray(weight),
            "0.bias": np.asarray(bias, dtype=np.float32).reshape(weight.shape[0])}
