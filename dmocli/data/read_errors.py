"""The one-line messages every failed read of a data file ends in, for every reader of the package."""

from __future__ import annotations

import re

import pyarrow as pa

from dmocli.errors import DmoError, first_line

RAGGED_ROW = re.compile(r"CSV parse error: Row #(\d+): Expected (\d+) columns, got (\d+)")


def not_utf8(source: object) -> str:
    return (
        f"cannot read {source}: it holds text that is not UTF-8 (saved as Latin-1 or Windows-1252?); "
        "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


READ_ERRORS = (pa.ArrowInvalid, OSError)  # pyarrow's ArrowIOError is OSError


def read_error(path: object, exc: BaseException, kinds: str = "parquet or CSV") -> DmoError:
    """The one-line message every failed read ends in."""
    if "invalid UTF8" in str(exc):
        return DmoError(not_utf8(path))
    ragged = RAGGED_ROW.search(str(exc))
    if ragged is not None:
        line, expected, got = map(int, ragged.groups())
        fix = (
            "if the first line is not the header, delete the title, comment or `sep=` lines above it; else quote "
            "the values that contain the delimiter"
            if line == 2 and got > expected
            else "quote the values that contain the delimiter, or fix that line"
        )
        return DmoError(
            f"cannot read {path}: line {line} has {got} fields where the header (line 1) has {expected}; {fix}"
        )
    if "Truncated compressed stream" in str(exc) or "unexpected end of" in str(exc).lower():
        return DmoError(f"cannot read {path}: the compressed file ends early (truncated: copy or download it again)")
    return DmoError(f"cannot read {path}: {first_line(exc)} (is it a valid {kinds} file?)")
