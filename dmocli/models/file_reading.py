"""Reading a model file: one open, one read, header and tensors from the same bytes.

A deploy that replaces the model file (`mv new live.safetensors`, or `dmo threshold M D -o M`) while `dmo predict`
loads it must give one model or the other, never a mix. Reading the metadata and then the tensors through two opens
of the path mixed them: the threshold and preprocessing of one file with the weights of the next. So the file is
opened once, checked to be a regular file on the same descriptor, read whole, and everything comes from those bytes.
safetensors parses the tensors (it never unpickles); the header's JSON is read by json.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_tensors

from dmocli.errors import DmoError

METADATA_KEY = "dmocli"
HEADER_LENGTH_BYTES = 8  # safetensors: a little-endian u64 with the JSON header's length, then the header


@dataclass(frozen=True)
class StoredModel:
    """What one read of a model file gave.

    Attributes
    ----------
    metadata : dict
        The dmo metadata (the JSON under the header's `__metadata__["dmocli"]`).
    tensors : dict of str to ndarray
        Every tensor of the file, with the dtype and shape it was stored with.
    modified : float
        The file's modification time (seconds since the epoch), from the descriptor that was read.
    """

    metadata: dict[str, Any]
    tensors: dict[str, np.ndarray]
    modified: float


def read_model_file(path: str | Path) -> StoredModel:
    """The metadata and tensors of the model file at `path`, from one read of one descriptor."""
    path = Path(path)
    data, modified = _read_regular_file(path)
    try:
        tensors = load_tensors(data)
    except (SafetensorError, ValueError, TypeError, OverflowError, RuntimeError) as exc:
        raise DmoError(f"{path} is not a readable dmo model file (safetensors): {_first(exc)}") from exc
    return StoredModel(_metadata(path, data), tensors, modified)


def _read_regular_file(path: Path) -> tuple[bytes, float]:
    """The file's bytes and modification time. Only a regular file: a fifo would block the open (or hand over
    whatever a writer sends), a directory or device is no model."""
    try:
        kind = path.stat().st_mode
    except FileNotFoundError:
        raise DmoError(f"model file not found: {path} (train one with `dmo train`)") from None
    except OSError as exc:
        raise DmoError(f"cannot read the model file {path}: {exc.strerror or exc} (check its permissions)") from exc
    if stat.S_ISDIR(kind):
        raise DmoError(f"{path} is a directory, not a model file (give the .safetensors file `dmo train` wrote)")
    if not stat.S_ISREG(kind):
        raise DmoError(f"{path} is not a regular file (a fifo, socket or device); give the .safetensors file itself")
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise DmoError(f"cannot read the model file {path}: {exc.strerror or exc} (check its permissions)") from exc
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):  # replaced by something else between the stat and the open
            raise DmoError(f"{path} is not a regular file; give the .safetensors file itself")
        return handle.read(), status.st_mtime


def _metadata(path: Path, data: bytes) -> dict[str, Any]:
    """The dmo metadata from the file's JSON header (safetensors has already checked the header's framing)."""
    (length,) = struct.unpack("<Q", data[:HEADER_LENGTH_BYTES])
    try:
        header = json.loads(data[HEADER_LENGTH_BYTES : HEADER_LENGTH_BYTES + length])
        raw = (header.get("__metadata__") or {}).get(METADATA_KEY)
        meta = None if raw is None else json.loads(raw)
    except RecursionError:
        raise DmoError(f"{path} has corrupt dmo metadata (nested too deeply to be a model's); retrain") from None
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError) as exc:
        raise DmoError(f"{path} has corrupt dmo metadata ({_first(exc)}); retrain the model") from exc
    if raw is None:
        raise DmoError(f"{path} is a safetensors file but not a dmo model (no '{METADATA_KEY}' metadata)")
    if not isinstance(meta, dict):
        raise DmoError(f"{path} has corrupt dmo metadata (not a JSON object); retrain the model")
    return meta


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
