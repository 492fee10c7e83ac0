"""A bounds check of a booster's UBJSON bytes before XGBoost parses them.

XGBoost's UBJSON reader trusts the lengths and counts it reads: on a truncated or altered model file it can read
past the end of its buffer, which crashed a process now and then (a test worker died on half a booster's bytes)
instead of raising an error `dmo` could report. Walking the bytes once here, every length and count checked
against what is left, turns such a file into one `ValueError` before XGBoost sees it. The check is structural
only (markers, lengths, nesting, nothing after the root value); what the values mean is XGBoost's to check.
"""

from __future__ import annotations

import struct

# Fixed-size value markers and their sizes (UBJSON draft 12, as XGBoost writes it).
FIXED = {"i": 1, "U": 1, "I": 2, "l": 4, "L": 8, "d": 4, "D": 8, "C": 1}
EMPTY = {"Z", "N", "T", "F"}  # null, no-op, true, false: no payload
INTEGERS = {"i": ">b", "U": ">B", "I": ">h", "l": ">i", "L": ">q"}
DEEPEST = 64  # nesting a booster never reaches; deeper input is refused rather than recursed into


def check_ubjson(data: bytes) -> None:
    """Raise ValueError unless `data` is exactly one well-formed UBJSON value whose every length fits."""
    reader = _Reader(memoryview(data))
    reader.value(reader.marker(), depth=0)
    if reader.at != len(data):
        raise ValueError(f"{len(data) - reader.at} bytes after the booster's end")


class _Reader:
    """A position in the bytes, and the reads that check the room left before taking it."""

    def __init__(self, data: memoryview):
        self.data, self.at = data, 0

    def take(self, size: int) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError(f"the booster's bytes end early (byte {self.at} wants {size} more)")
        piece = self.data[self.at : self.at + size]
        self.at += size
        return piece

    def marker(self) -> str:
        return chr(self.take(1)[0])

    def integer(self, marker: str) -> int:
        if marker not in INTEGERS:
            raise ValueError(f"a length or count with marker {marker!r} at byte {self.at}")
        return struct.unpack(INTEGERS[marker], self.take(FIXED[marker]))[0]

    def value(self, marker: str, *, depth: int) -> None:
        if depth > DEEPEST:
            raise ValueError(f"the booster nests deeper than {DEEPEST} levels")
        if marker in FIXED:
            self.take(FIXED[marker])
        elif marker in ("S", "H"):
            self.take(self.integer(self.marker()))
        elif marker in ("[", "{"):
            self.container(closing="]" if marker == "[" else "}", keyed=marker == "{", depth=depth + 1)
        elif marker not in EMPTY:
            raise ValueError(f"unknown marker {marker!r} at byte {self.at - 1}")

    def container(self, *, closing: str, keyed: bool, depth: int) -> None:
        """An array or object: typed and counted (`$T#n`), counted (`#n`), or ended by its closing marker."""
        element_type, count = None, None
        marker = self.marker()
        if marker == "$":
            element_type = self.marker()
            marker = self.marker()
            if marker != "#":
                raise ValueError(f"a typed container without a count at byte {self.at - 1}")
        if marker == "#":
            count = self.integer(self.marker())
            if count < 0:
                raise ValueError(f"a negative count at byte {self.at}")
            if element_type in FIXED and not keyed:  # a packed array: one bounds check for all of it
                self.take(count * FIXED[element_type])
                return
            for _ in range(count):
                self.element(element_type, keyed=keyed, depth=depth)
            return
        while marker != closing:
            self.element(None, keyed=keyed, depth=depth, first=marker)
            marker = self.marker()

    def element(self, element_type: str | None, *, keyed: bool, depth: int, first: str | None = None) -> None:
        """One element (an object's key then value); `first` is a marker already read for it."""
        if keyed:
            self.take(self.integer(first if first is not None else self.marker()))
            first = None
        marker = element_type if element_type is not None else (first if first is not None else self.marker())
        self.value(marker, depth=depth)
