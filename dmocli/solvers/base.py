"""What a solver receives and returns, so every solver plugs into the same train pipeline.

A solver turns prepared tensors into a network (and optionally its own
threshold); reading data, preprocessing, threshold adjustment, reports and
the model file are the pipeline's job, shared by all solvers.
"""

from __future__ import annotations

import abc
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable

import numpy as np

from dmocli.errors import DmoError
from dmocli.models.architecture import Architecture
from dmocli.operating_point.problems import Problem
from dmocli.options import AUTO_CANDIDATES, check_value, refuse

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

    def take(self, rows: torch.Tensor) -> "SplitData":
        """The rows `rows` (indices or a boolean mask), with every per-row extra array."""
        import torch

        extra = {
            k: v[rows] for k, v in self.extra.items() if isinstance(v, torch.Tensor) and v.shape[:1] == self.y.shape
        }
        return SplitData(self.X[rows], self.y[rows], extra)

    def labeled(self) -> "SplitData":
        """The labeled rows; itself when every row is (no copy of a large X)."""
        mask = self.y >= 0
        return self if bool(mask.all()) else self.take(mask)


@dataclass
class FitContext:
    """Everything a solver needs besides the data."""

    problem: Problem | None  # None for multi-class training
    architecture: Architecture
    device: torch.device | None  # None for the numpy streaming solvers
    seed: int
    params: SolverParams  # the solver's own Params dataclass, validated
    verbose: bool = False
    group: ProcessGroup | None = None  # under torchrun: the train split is this process's share of the rows
    class_names: list[Any] | None = None  # the label's classes by code (binary: [negative, positive]), for messages
    feature_types: list[str] | None = None  # gbdt: "q" numeric or "c" categorical (a level's index) per feature


@dataclass
class FitResult:
    network: torch.nn.Module
    trace: dict[str, Any] = field(default_factory=dict)
    threshold: float | None = None  # the solver's own decision threshold on the logit scale, if it learns one
    warnings: list[str] = field(default_factory=list)  # for the report's warnings (and stderr), e.g. a fallback


class SolverParams:
    """Base of every solver's `Params` dataclass: its fields are the solver's `--param` keys, each declaring its
    help text and its checks (`choices`, `min`, `max`, `below`, `positive`) in the field metadata, and where it
    applies when that is narrower than the solver: `models` (the --model kinds it applies to) and `torchrun`
    (False: not under torchrun). pipelines/train.py refuses a value changed from its default outside its scope."""


class Solver:
    """What every solver declares: its name and summary, its `Params`, and what it can train on.

    Subclass InMemorySolver or StreamingSolver, not this class: the pipeline chooses the path by that type. The
    capability flags below are read by the train pipeline before any data is read or fitted.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    multiclass: ClassVar[bool] = False  # trains K-class softmax models (--problem multiclass)
    uses_unlabeled: ClassVar[bool] = False  # learns from rows whose label is missing (semi-supervised)
    uses_offsets: ClassVar[bool] = False  # adds SplitData.extra["offsets"] (a `dmo subsample` file) to its logits
    problems: ClassVar[tuple[str, ...]] = ("fpor", "frop", "ofbs")
    adjust_by_default: ClassVar[bool] = True  # exact threshold adjustment unless --no-adjust
    distributed: ClassVar[bool] = False  # fit() reduces over FitContext.group: trains under torchrun
    models: ClassVar[tuple[str, ...]] = ("linear", "mlp")  # the --model kinds it trains (--engine local)
    dask_models: ClassVar[tuple[str, ...]] = ()  # the --model kinds it trains on Dask workers (--engine dask)

    @dataclass
    class Params(SolverParams):
        pass

    @classmethod
    def engines(cls) -> dict[str, tuple[str, ...]]:
        """The --model kinds it trains on each --engine: what `dmo solvers` lists and the train check accepts."""
        return {"local": cls.models, **({"dask": cls.dask_models} if cls.dask_models else {})}

    @property
    def streaming(self) -> bool:
        """Trained by fit_stream over record batches (dmocli/pipelines/streaming.py), not fit on tensors."""
        return isinstance(self, StreamingSolver)

    @property
    def selects_model(self) -> bool:
        """Whether `--model auto` trains with it. Auto is a choice between kinds the solver already declares
        (AUTO_CANDIDATES), each cross-fitted in memory, not a kind of its own: derived here from `models` and
        `streaming`, so the listing and the train check cannot drift from the declarations."""
        return not self.streaming and set(AUTO_CANDIDATES) <= set(self.models)

    def parse_params(self, raw: dict[str, str]) -> Any:
        """Build Params from --param key=value strings: each converted to its field's type and checked against
        its declared choices and range, every problem reported in one message."""
        fields = {f.name: f for f in dataclasses.fields(self.Params)}
        types = typing.get_type_hints(self.Params)
        values: dict[str, Any] = {}
        problems: list[str] = []
        for key, text in raw.items():
            name = key.replace("-", "_")
            if name not in fields:
                known = ", ".join(sorted(field.replace("_", "-") for field in fields)) or "none"
                problems.append(f"--param {key} is not a parameter of solver {self.name} (known: {known})")
                continue
            shown = name.replace("_", "-")  # as `dmo solvers` lists it, however it was typed
            try:
                values[name] = _convert(text, types[name], shown)
            except DmoError as exc:
                problems.append(str(exc))
                continue
            label = (
                f"--param {shown}={values[name]!r}"
                if isinstance(values[name], str)
                else f"--param {shown}={values[name]}"
            )
            problem = check_value(label, values[name], fields[name].metadata)
            if problem is not None:
                problems.append(problem)
        refuse(problems)
        return self.Params(**values)

    def check_params(self, params: SolverParams, model: str) -> None:
        """Refuse parameters that cannot apply to `model` (linear | mlp | gbdt), before any data is read."""


class InMemorySolver(Solver, abc.ABC):
    """A solver that trains on the whole training split held as tensors on one device (or on this process's
    share of the rows under torchrun, when `distributed`)."""

    @abc.abstractmethod
    def fit(self, train: SplitData, val: SplitData | None, ctx: FitContext) -> FitResult:
        """Train on `train` (selecting or stopping on `val` where the solver does); return the network."""

    def refit_params(self, params: Any, fold_traces: list[dict[str, Any]]) -> Any:
        """The final model's parameters after cross-fitting (`--cv`), from the fold fits' traces. A fold that
        stopped early on rows it held out tells how long a fit of this size should run; the final fit on all rows
        has none to hold out, so a solver that stops early runs it for the folds' median length instead. Default:
        the parameters as given."""
        return params


Batches = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]  # a fresh pass of (X float32, y 0/1) per call
Progress = Callable[[int, float], None]  # (rows seen, online F so far)


@dataclass
class Stream:
    """What a streaming solver reads: a fresh pass of (X, y) batches per call of `batches`, and what is known of it."""

    batches: Batches
    n: int | None  # labeled rows per pass when known; None: a pipe, read once, whose length is unknown
    n_features: int
    epochs: int = 1
    progress: Progress | None = None  # called with (rows seen, online F so far) as the passes go


@dataclass
class StreamFitResult:
    """A streaming solver's model: numpy weights under the linear network's state-dict names, its own
    threshold (logit scale), the trace, and the online (progressive) evaluation of every pass."""

    weights: dict[str, np.ndarray]
    threshold: float
    trace: dict[str, Any] = field(default_factory=dict)
    online: dict[str, Any] = field(default_factory=dict)


class StreamingSolver(Solver, abc.ABC):
    """A solver that learns from record batches in one or a few passes, in O(features + batch) memory."""

    adjust_by_default: ClassVar[bool] = False  # keep the threshold learned online; --adjust asks for TA
    problems: ClassVar[tuple[str, ...]] = ("ofbs",)
    models: ClassVar[tuple[str, ...]] = ("linear",)  # numpy weights of a logistic model

    @abc.abstractmethod
    def fit_stream(self, stream: Stream, ctx: FitContext) -> StreamFitResult:
        """Learn from `stream.epochs` passes over `stream.batches()`."""


def _convert(text: str, annotation: Any, key: str) -> Any:
    """`text` as the field's type (bool, int, float or str, each optionally None)."""
    optional = type(None) in typing.get_args(annotation)
    kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)] if optional else [annotation]
    kind = kinds[0]
    if optional and text.lower() in {"none", "default"}:
        return None  # the field's default rule (e.g. wce's l2 = 1/rows), named explicitly
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(text)
            return lowered in {"true", "1", "yes"}
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError as exc:
        default = " (or none, for the default)" if optional else ""
        wanted = "true or false" if kind is bool else "an integer" if kind is int else "a number"
        raise DmoError(f"--param {key}={text!r}: expected {wanted}{default}") from exc
    return text


def offset_logits(logits: torch.Tensor, offsets: torch.Tensor | None) -> torch.Tensor:
    """Training-time LUS correction: add log a(x, k) to every class logit (docs/algorithms.md#lus).

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
