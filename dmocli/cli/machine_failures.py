"""Failures of the machine, not of the input: no space left, a file-size limit, memory run out. Each is one line
naming the cause and what to do, and exit status 4 (MACHINE_FAILURE), so a batch job can tell "retry elsewhere"
from "fix the input" (2) and from a bug (1). A closed standard output is not one of them: its reader went away
(ReaderStopped, exit 141)."""

from __future__ import annotations

import errno

MACHINE_FAILURE = 4

_OS_CAUSES = {
    errno.ENOSPC: "no space left on the device; free some space or write the outputs to another disk",
    errno.EDQUOT: "the disk quota is used up; free some space or write the outputs to another disk",
    errno.EFBIG: "an output grew past the file-size limit (ulimit -f); raise the limit or write a smaller output",
}
# Libraries that wrap the OS error in their own exception keep only its text (safetensors: "File too large (os error
# 27)"); torch's allocator says "can't allocate memory".
_OS_TEXTS = {"No space left": errno.ENOSPC, "File too large": errno.EFBIG}
_MEMORY_TEXTS = ("out of memory", "can't allocate memory", "cannot allocate memory")
OUT_OF_MEMORY = (
    "out of memory; use a streaming solver (--solver fofo, ofo or lr read the rows in one pass), "
    "--engine dask for predict and evaluate, or fewer rows (dmo subsample)"
)


def machine_failure(exc: BaseException) -> str | None:
    """What went wrong with the machine in `exc` or any exception it was raised from; None for anything else."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cause = _cause(current)
        if cause is not None:
            return cause
        current = current.__cause__ or current.__context__
    return None


def _cause(exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, MemoryError) or any(words in text.lower() for words in _MEMORY_TEXTS):
        return OUT_OF_MEMORY
    code = exc.errno if isinstance(exc, OSError) and exc.errno in _OS_CAUSES else None
    code = code if code is not None else next((c for words, c in _OS_TEXTS.items() if words in text), None)
    return None if code is None else _OS_CAUSES[code]
