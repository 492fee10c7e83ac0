"""Small training-loop pieces shared by the gradient-based solvers."""
from __future__ import annotations

import copy
from typing import Iterator

import torch


def minibatches(n: int, batch_size: int, generator: torch.Generator, device: torch.device) -> Iterator[torch.Tensor]:
    """Row indices of one shuffled epoch; a single full batch when batch_size >= n."""
    if batch_size >= n:
        yield torch.arange(n, device=device)
        return
    order = torch.randperm(n, generator=generator).to(device)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


class EarlyStopping:
    """Track the best monitored loss, keep a copy of the best weights, say when patience runs out."""

    def __init__(self, network: torch.nn.Module, patience: int, min_delta: float = 1e-6):
        self.network = network
        self.patience = patience
        self.min_delta = min_delta
        self.best = float("inf")
        self.bad_steps = 0
        self.best_state = copy.deepcopy(network.state_dict())

    def step(self, value: float) -> bool:
        """Record a value; True when training should stop."""
        improved = value < self.best - self.min_delta * max(1.0, abs(self.best)) if self.best < float("inf") else True
        if improved:
            self.best = value
            self.bad_steps = 0
            self.best_state = copy.deepcopy(self.network.state_dict())
            return False
        self.bad_steps += 1
        return self.bad_steps >= self.patience

    def restore(self) -> None:
        self.network.load_state_dict(self.best_state)
