"""Arrow arrays to numpy, and small arrays from Python values, without pyarrow's own conversion.

pyarrow's Array.to_numpy, pa.array of Python or numpy values, and any
Python-to-arrow scalar (as fill_null needs) load pandas on first use: a
third of a second of start-up. Numeric and boolean columns, which is what
features, labels and codes are, are plain buffers plus a validity bitmap
that numpy reads directly; and arrays can be built from such buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def to_numpy(values: pa.Array | pa.ChunkedArray, fill: float | int | None = None) -> np.ndarray:
    """The values as a numpy array (booleans as numpy bool); nulls become `fill`, which they need.

    Integers with nulls and a NaN fill come back as float64. Types other
    than numeric and boolean (strings, nested) use pyarrow's conversion.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    kind = values.type
    n, offset = len(values), values.offset
    if pa.types.is_boolean(kind):
        data = _bits(values.buffers()[1], offset, n)
    elif (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and not pa.types.is_float16(kind):
        dtype = _numeric_dtype(kind)
        data = (
            np.frombuffer(values.buffers()[1], dtype=dtype, count=n, offset=offset * dtype.itemsize)
            if n
            else np.empty(0, dtype=dtype)
        )
    else:
        return values.to_numpy(zero_copy_only=False)
    if not values.null_count:
        return data
    if fill is None:
        raise ValueError(f"{values.null_count} nulls and no fill value")
    valid = _bits(values.buffers()[0], offset, n)
    out = data.astype(
        np.result_type(data.dtype, np.min_scalar_type(fill))
        if not isinstance(fill, float)
        else np.result_type(data.dtype, np.float32 if data.dtype == np.float32 else np.float64)
    )
    out[~valid] = fill
    return out


def _numeric_dtype(kind: pa.DataType) -> np.dtype:
    """numpy's dtype for an arrow integer or float type, from its width and signedness.

    Not DataType.to_pandas_dtype(): some pyarrow releases (25.x) import pandas there.
    """
    if pa.types.is_floating(kind):
        return np.dtype(f"float{kind.bit_width}")
    return np.dtype(f"{'int' if pa.types.is_signed_integer(kind) else 'uint'}{kind.bit_width}")


def _bits(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Arrow's little-endian bit-packed booleans as a numpy bool array."""
    if n == 0:
        return np.zeros(0, dtype=bool)
    bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), count=offset + n, bitorder="little")
    return bits[offset:].view(bool)


def text_array(values: list[str]) -> pa.Array:
    """A string array of Python strings, built from its offsets and bytes."""
    encoded = [value.encode() for value in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def float_array(values: np.ndarray) -> pa.Array:
    """A float64 array of numpy values, built from their buffer: `pa.array` imports pandas to look at its input,
    which the numpy streaming path does not load (tests/solvers/online/test_fofo_cli.py)."""
    data = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), data.size, [None, pa.py_buffer(data)])


def picked_text(levels: list[str], picked: np.ndarray) -> pa.Array:
    """`levels[picked]` as a string array, null where `picked` is `len(levels)` (no level), without pandas."""
    valid = np.asarray(picked) < len(levels)
    positions = np.where(valid, picked, 0).astype(np.int32)
    buffers = [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(positions)]
    index = pa.Array.from_buffers(pa.int32(), valid.size, buffers, null_count=int(valid.size - np.count_nonzero(valid)))
    return pc.take(text_array(list(levels) or [""]), index)


def repeated(value: Any, kind: pa.DataType, n: int) -> pa.Array:
    """`value` n times as an array of `kind` (int64 or string; None gives nulls): a partition column."""
    if value is None:
        return pa.nulls(n, kind)
    if pa.types.is_integer(kind):
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(np.full(n, value, dtype=_numeric_dtype(kind)))])
    zeros = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.zeros(n, dtype=np.int32))])
    return pc.take(text_array([str(value)]).cast(kind), zeros)
