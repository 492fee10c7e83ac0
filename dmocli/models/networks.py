"""Torch heads that map a feature vector to logits: linear and MLP (and boosted trees, models/trees.py).

The architecture (architecture.py) is a small JSON-able dict so the model
file can rebuild the network without pickled code. A loaded linear or gbdt
model scores without torch (models/stored_network.py); `logits_of` of a
linear layer and `FoldEnsemble` outside autograd compute what it computes, so
training's held-out scores, and the library's in-memory model, give the
same bits as `dmo predict` of the saved file.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.models.stored_network import combine_members


def build_network(arch: Architecture) -> nn.Module:
    if arch.members > 1:
        member = dataclasses.replace(arch, members=1)
        return FoldEnsemble([build_network(member) for _ in range(arch.members)])
    if arch.kind == "gbdt":  # an empty booster, filled by load_state_dict (a model file) or by a tree solver
        from dmocli.models.trees import BoostedTrees

        return BoostedTrees(arch.n_outputs)
    if arch.kind == "linear":
        return nn.Sequential(nn.Linear(arch.n_inputs, arch.n_outputs))
    layers: list[nn.Module] = []
    width_in = arch.n_inputs
    for _ in range(arch.depth):
        layers.append(nn.Linear(width_in, arch.width))
        if arch.batchnorm:
            layers.append(nn.BatchNorm1d(arch.width))
        layers.append(nn.ReLU())
        width_in = arch.width
    layers.append(nn.Linear(width_in, arch.n_outputs))
    return nn.Sequential(*layers)


def resolve_device(name: str) -> torch.device:
    """auto: CUDA when present, else CPU; asking for cuda without one is a usage error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DmoError("--device cuda was asked for but no CUDA device is available (use --device auto or cpu)")
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise DmoError(f"--device {name!r} is not known (use auto, cpu or cuda)")
    return torch.device(name)


class FoldEnsemble(nn.Module):
    """The K fold models of `--cv K --cv-transfer ensemble` kept as one model.

    The out-of-fold threshold was searched on these models' own scores, so no refit on all rows moves the score
    scale under it (docs/operating-points.md measures what that refit cost); averaging also lowers the variance of
    one model trained on K-1 folds.

    With a `member_map` (slope, intercept), a binary ensemble averages its members' probabilities
    sigmoid(slope * logit + intercept) and answers the logit of that mean. The map is fitted on the members'
    out-of-fold logits, so each member's probability has the right mean on new rows and so has their average;
    the sigmoid of averaged logits would not (the mean of K disagreeing logits is less extreme than each, and at
    a low positive rate its probability runs low). Without a map (multi-class, or a subsample's logits) the
    logits are averaged.

    Attributes
    ----------
    members : nn.ModuleList of K modules, each mapping X (n, d) to logits (n, n_outputs)
    member_map : tensor (2,) float64, or None
    """

    member_map: torch.Tensor | None

    def __init__(self, members: list[nn.Module], member_map: tuple[float, float] | None = None):
        super().__init__()
        self.members = nn.ModuleList(members)
        mapped = None if member_map is None else torch.tensor(member_map, dtype=torch.float64)
        self.register_buffer("member_map", mapped)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():  # scoring: the numpy definition a loaded model uses, for the same bits
            parts = [_scores(member, features).float().cpu().numpy() for member in self.members]
            member_map = None if self.member_map is None else self.member_map.cpu().numpy()
            return torch.from_numpy(combine_members(parts, member_map)).to(features.device)
        logits = torch.stack([member(features) for member in self.members])  # a gradient through it (--explain)
        if self.member_map is None:
            return logits.mean(dim=0)
        slope, intercept = self.member_map.to(device=logits.device, dtype=logits.dtype)
        mapped = slope * logits + intercept
        # logit(mean sigmoid) = log(mean p) - log(mean (1 - p)), each a logsumexp of log-sigmoids: no overflow
        return torch.logsumexp(F.logsigmoid(mapped), dim=0) - torch.logsumexp(F.logsigmoid(-mapped), dim=0)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> None:
        """Each member takes its own `members.<i>.` keys through its own load_state_dict (boosted trees take
        their stored bytes whatever their length, which a plain buffer load would refuse); `member_map`, when
        the file has one, is the probability map."""
        prefixes = [f"members.{index}." for index in range(len(self.members))]
        known = [key for key in state_dict if key == "member_map" or any(key.startswith(p) for p in prefixes)]
        stray = sorted(set(state_dict) - set(known))
        if stray and strict:
            raise KeyError(f"an ensemble of {len(self.members)} members has no tensors {stray[:3]}")
        for prefix, member in zip(prefixes, self.members):
            own = {key[len(prefix) :]: value for key, value in state_dict.items() if key.startswith(prefix)}
            member.load_state_dict(own, strict=strict)
        if "member_map" in state_dict:
            self.member_map = torch.as_tensor(state_dict["member_map"], dtype=torch.float64).clone()


@torch.inference_mode()
def logits_of(network: nn.Module, features: torch.Tensor, chunk: int = 65536) -> torch.Tensor:
    """Logits in eval mode, in chunks so inference memory stays bounded."""
    was_training = network.training
    network.eval()
    try:  # no rows: still one (empty) pass, so the output keeps its class axis (a Dask partition may be an empty file)
        starts = range(0, features.shape[0], chunk) if features.shape[0] else [0]
        parts = [_scores(network, features[i : i + chunk]) for i in starts]
    finally:
        network.train(was_training)
    out = torch.cat(parts)
    return out.squeeze(-1) if out.ndim == 2 and out.shape[1] == 1 else out


def _scores(network: nn.Module, features: torch.Tensor) -> torch.Tensor:
    """network(features), but a single linear layer's as stored_network.linear_logits computes it: the bias, then
    each input's product added in order in float64 (each operation rounded alone, as numpy does), rounded once
    to float32. The matmul's float32 sums depended on the batch a row was scored in."""
    if not (isinstance(network, nn.Sequential) and len(network) == 1 and isinstance(network[0], nn.Linear)):
        return network(features)
    layer = network[0]
    weight = layer.weight.detach().to(torch.float64)
    rows = features.to(torch.float64)
    total = layer.bias.detach().to(torch.float64).reshape(1, -1).repeat(rows.shape[0], 1)
    for j in range(weight.shape[1]):
        total += rows[:, j : j + 1] * weight[:, j]
    return total.to(torch.float32)
