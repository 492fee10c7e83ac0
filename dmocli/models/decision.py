"""A model's decision as one immutable value: what it flags, for which problem, and what the file says of it.

Training settles it once; `dmo threshold` (a re-fit on DATA, a re-target on the held-out curve, a multi-class
model's class offsets, `--adapt`/`--prior`) builds a new one and writes `model.with_decision(new)`, a new model
sharing the network and preprocessing: no command changes a loaded model in place, so a model a caller holds (the
Python API, `DmoClassifier.model_`) decides as it did after any command ran on it.

The model file is written from it (models/modelfile.py): the threshold or class offsets and their problem in the
header, the held-out curve as tensors and `info.heldout`, and `info` whole, in its own order, since the file's
bytes follow that order and each command keeps or replaces entries of it (pipelines/saving.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem


@dataclass(frozen=True, kw_only=True)
class Certificate:
    """What the model file says its `--confidence` certificate is about: the level (None: no certificate), the new
    sample's size (None: the population value), and whether the threshold kept met it (False: kept by
    --allow-infeasible; None where no search certified anything)."""

    confidence: float | None
    new_rows: int | None
    certified: bool | None

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> Certificate:
        """The certificate `info` records: its `new_rows` only where there is a confidence and it is a sample size
        (a model file checked on load holds a whole number there, or nothing)."""
        confidence = info.get("confidence")
        rows = info.get("new_rows") if confidence is not None else None
        sample = rows if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 else None
        return cls(confidence=confidence, new_rows=sample, certified=info.get("certified"))


@dataclass(frozen=True, kw_only=True, eq=False)
class Decision:
    """The operating point of a model: a binary model's threshold on the logit and its problem (and the lower cut
    of its review band, where `--review-budget` asked for one: operating_point/review_band.py), or a multi-class
    model's class offsets and their problem (None: the arg-max); the held-out curve a binary threshold was searched
    on (None where the file keeps none); and the model file's `info` as this decision left it (training's entries,
    the certificate, where the threshold was fitted, the summary at it, the probability map, an adaptation).

    Frozen, and `info` a read-only view and `class_offsets` a read-only array: a command that moves the operating
    point builds another Decision (`dataclasses.replace`) rather than changing this one. Not compared with `==`
    (an array field has no one truth value)."""

    threshold: float | None = None  # on the logit scale: the decision is logit >= threshold (binary models)
    # a review band's lower cut (binary models; None: no band): review_threshold <= logit < threshold goes to review
    review_threshold: float | None = None
    problem: Problem | None = None  # a binary model's problem (None: multi-class)
    class_offsets: np.ndarray | None = None  # added to the logits before the arg-max (a multi-class operating point)
    class_problem: ClassProblem | None = None  # ... and the problem they were searched for
    heldout: HeldOutCurve | None = None  # the held-out curve the threshold was searched on (binary models)
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))
        if self.class_offsets is not None:
            offsets = np.array(self.class_offsets)  # a copy: the caller's array stays writable, this one is not
            offsets.setflags(write=False)
            object.__setattr__(self, "class_offsets", offsets)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled and deep-copied with `info` as a plain dict (a read-only view does not pickle), so a fitted
        DmoClassifier holding a model still does."""
        values = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        return (_restored, ({**values, "info": dict(self.info)},))

    @property
    def certificate(self) -> Certificate:
        """The `--confidence` certificate `info` records (what `dmo threshold` certifies again by default)."""
        return Certificate.from_info(self.info)


def _restored(values: dict[str, Any]) -> Decision:
    """A pickled Decision rebuilt (Decision.__reduce__)."""
    return Decision(**values)
