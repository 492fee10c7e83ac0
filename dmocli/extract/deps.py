"""The optional `extract` dependencies: import them lazily, fail with the install command.

The core install (train/evaluate/predict) must not need transformers or
Pillow, so nothing under dmocli imports them at module level; every use goes
through `require`, which turns a missing package into an exit-2 message.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from dmocli.errors import DmoError

INSTALL_HINT = 'pip install "dmocli[extract]"'


def offline() -> None:
    """Forbid network access by the Hugging Face libraries: models come from disk or the local cache."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


def require(name: str, purpose: str, hint: str = INSTALL_HINT) -> ModuleType:
    """Import `name` or raise a DmoError naming the extra to install."""
    offline()
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a broken install (e.g. a torchvision built for another torch) raises RuntimeError
        missing = getattr(exc, "name", None) or name
        raise DmoError(
            f"dmo extract needs the optional package '{missing}' for {purpose} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else missing}); "
            f"install it with: {hint}"
        ) from exc
