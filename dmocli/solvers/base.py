"""What a solver receives and returns, so every solver plugs into the same train pipeline.

A solver turns prepared tensors into a network (and optionally its own
threshold); reading data, preprocessing, threshold adjustment, reports and
the model file are the pipeline's job, shared by all solvers.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.operating_point.problems import Problem

if TYPE_CHECKING:  # torch is imported where tensors are made: the numpy streaming solvers never pay for it
    import torch

    from dmocli.engines.torch_distributed import ProcessGroup


@dataclass
class SplitData:
    """One split on the solver's device: features X (n, d) float32, labels y (n,) int64 (-1 = unlabeled).

    `extra` holds optional per-row arrays a solver may use: LUS log acceptance
    offsets ("offsets", (n, K)), extra augmented views ("views": name -> (n, d)).
    """

    X: torch.Tensor
    y: torch.Tensor
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    def labeled(self) -> "SplitData":
        """The labeled rows; itself when every row is (no copy of a large X)."""
        import torch

        mask = self.y >= 0
        if bool(mask.all()):
            return self
        return SplitData(self.X[mask], self.y[mask], {k: v[mask] for k, v in self.extra.items() if isinstance(v, torch.Tensor)})


@dataclass
class FitContext:
    """Everything a solver needs besides the data."""

    problem: Problem | None  # None for multi-class training
    architecture: Architecture
    device: torch.device | None  # None for the numpy streaming solvers
    seed: int
    params: Any  # the solver's own Params dataclass, validated
    verbose: bool = False
    group: ProcessGroup | None = None  # under torchrun: the train split is this process's share of the rows
    class_names: list[Any] | None = None  # the label's classes by code (binary: [negative, positive]), for messages


@dataclass
class FitResult:
    network: torch.nn.Module
    trace: dict[str, Any] = field(default_factory=dict)
    threshold: float | None = None  # the solver's own decision threshold on the logit scale, if it learns one


class Solver:
    """Base class: subclasses set name/summary/Params and implement fit()."""

    name: ClassVar[str]
    summary: ClassVar[str]
    binary_only: ClassVar[bool] = True
    multiclass: ClassVar[bool] = False
    uses_unlabeled: ClassVar[bool] = False
    uses_offsets: ClassVar[bool] = False  # adds SplitData.extra["offsets"] (a `dmo subsample` file) to its logits
    problems: ClassVar[tuple[str, ...]] = ("fpor", "frop", "ofbs")
    streaming: ClassVar[bool] = False  # True: trained by fit_stream over record batches (dmocli/streaming.py)
    adjust_by_default: ClassVar[bool] = True  # exact threshold adjustment unless --no-adjust
    distributed: ClassVar[bool] = False  # fit() reduces over FitContext.group: trains under torchrun

    @dataclass
    class Params:
        pass

    def parse_params(self, raw: dict[str, str]) -> Any:
        """Build Params from --param key=value strings, converting to each field's type."""
        fields = {f.name: f for f in dataclasses.fields(self.Params)}
        values: dict[str, Any] = {}
        for key, text in raw.items():
            name = key.replace("-", "_")
            if name not in fields:
                known = ", ".join(sorted(field.replace("_", "-") for field in fields)) or "none"
                raise DmoError(f"--param {key} is not a parameter of solver {self.name} (known: {known})")
            shown = name.replace("_", "-")  # as `dmo solvers` lists it, however it was typed
            values[name] = _convert(text, fields[name].type, shown)
            _check_range(shown, values[name], fields[name].metadata)
        return self.Params(**values)

    def check_params(self, params: Any, model: str) -> None:
        """Refuse parameters that cannot apply to `model` (linear | mlp), before any data is read."""

    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        raise NotImplementedError


def _convert(text: str, annotation: Any, key: str) -> Any:
    kind = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    optional = "None" in kind
    if optional and text.lower() in {"none", "default"}:
        return None  # the field's default rule (e.g. wce's l2 = 1/rows), named explicitly
    kind = kind.replace(" | None", "")
    try:
        if "bool" in kind:
            lowered = text.lower()
            if lowered not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(text)
            return lowered in {"true", "1", "yes"}
        if "int" in kind and "float" not in kind:
            return int(text)
        if "float" in kind:
            return float(text)
    except ValueError as exc:
        default = " (or none, for the default)" if optional else ""
        wanted = "true or false" if "bool" in kind else "an integer" if "float" not in kind else "a number"
        raise DmoError(f"--param {key}={text!r}: expected {wanted}{default}") from exc
    return text


def _check_range(key: str, value: Any, metadata: Mapping[str, Any]) -> None:
    """A value no solver can use (a NaN learning rate, zero rows per batch) is refused here, by name, rather
    than failing inside torch or training silently on NaN weights. Fields say their range in metadata."""
    if isinstance(value, float) and not math.isfinite(value):
        raise DmoError(f"--param {key}={value} must be a finite number")
    if metadata.get("positive") and value is not None and not value > 0:
        raise DmoError(f"--param {key}={value} must be positive")
    if "min" in metadata and value is not None and value < metadata["min"]:
        raise DmoError(f"--param {key}={value} must be at least {metadata['min']}")
    if "max" in metadata and value is not None and value > metadata["max"]:
        raise DmoError(f"--param {key}={value} must be at most {metadata['max']}")
    if "below" in metadata and value is not None and not value < metadata["below"]:
        raise DmoError(f"--param {key}={value} must be below {metadata['below']}")


def param_help(params_cls: type) -> list[tuple[str, str, str]]:
    """(name, default, help) rows for `dmo solvers`."""
    rows = []
    for f in dataclasses.fields(params_cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        rows.append((f.name.replace("_", "-"), repr(default), f.metadata.get("help", "")))
    return rows


def offset_logits(logits: torch.Tensor, offsets: torch.Tensor | None) -> torch.Tensor:
    """Training-time LUS correction: add log a(x, k) to every class logit (ALGORITHMS.md section 4).

    offsets is (n, K); a one-logit binary head gets log a(x, 1) - log a(x, 0),
    the same correction written on the log-odds. Prediction never adds it.
    """
    if offsets is None:
        return logits
    offsets = offsets.to(logits.dtype)
    if logits.shape[-1] == 1 and offsets.shape[1] == 2:
        return logits + (offsets[:, 1] - offsets[:, 0]).unsqueeze(-1)
    return logits + offsets


def inverse_frequency_weights(y: torch.Tensor, n_classes: int, group: ProcessGroup | None = None) -> torch.Tensor:
    """w_k = n / (K n_k): each class contributes equally to a weighted loss. With a torchrun group, n and n_k
    count every process's rows, so each process weighs its share as one process would weigh the whole."""
    import torch

    counts = torch.bincount(y, minlength=n_classes)
    if group is not None:
        counts = group.sum(counts)
    return int(counts.sum()) / (n_classes * counts.to(torch.float32).clamp(min=1))


def seed_everything(seed: int) -> torch.Generator:
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
    return torch.Generator().manual_seed(seed)
