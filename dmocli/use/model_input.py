"""The MODEL the apply pipelines take from Python: a model file's path, a loaded `DmoModel`, or a fitted
`DmoClassifier` (anything with a `model_` DmoModel), so a model trained or opened in a session scores and
evaluates without a round trip through a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel

ModelLike = Union[DmoModel, Any]  # a DmoModel, or an object holding one in `model_` (a fitted DmoClassifier)
IN_MEMORY = "<in-memory model>"  # what reports call a model that has no file


def opened(model: str | Path | ModelLike) -> tuple[DmoModel | None, str | Path | None]:
    """(the model, None) for a model object; (None, the path) for a path, which the caller loads after its
    output checks (so a bad -o is refused before the model file is read)."""
    if isinstance(model, (str, Path)):
        return None, model
    if isinstance(model, DmoModel):
        return model, None
    held = getattr(model, "model_", None)
    if isinstance(held, DmoModel):
        return held, None
    raise DmoError(
        f"model must be a model file's path, a DmoModel or a fitted DmoClassifier, not {type(model).__name__}"
    )


def model_name(path: str | Path | None) -> str:
    """The report's `model` field: the file, or IN_MEMORY."""
    return IN_MEMORY if path is None else str(path)
