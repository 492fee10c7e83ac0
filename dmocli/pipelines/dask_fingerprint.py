"""The training rows' fingerprint (prep/row_fingerprint.py) of a model trained on Dask workers.

`dmo threshold MODEL DATA` refuses DATA when it holds the rows MODEL was fitted on, by the bottom-k sketch the
model file keeps. With `--engine dask` the encoded rows live on the workers, as partitions of a dask DataFrame:
each partition's sketch is computed where it lies (at most SKETCH_SIZE hashes come back per partition, never the
rows), and the client keeps the bottom-k of their union: the bottom-k of the bottom-k's of the parts is the
bottom-k of all the rows, as the streaming pipeline merges it batch by batch. So the sketch equals the in-memory
one of the same rows, whatever the partitioning.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dmocli.prep.row_fingerprint import row_hashes, sketch


def sketch_of_partitions(frame: Any, *, feature_columns: list[str], label_column: str) -> np.ndarray:
    """The sketch of every row of `frame` (a dask DataFrame of encoded float32 features and label codes), computed
    per partition on the workers and merged here."""
    sketches = frame[[*feature_columns, label_column]].map_partitions(
        _partition_sketch,
        feature_columns=feature_columns,
        label_column=label_column,
        meta=pd.Series([], dtype=np.uint64),
    )
    return sketch(sketches.compute().to_numpy(dtype=np.uint64))


def _partition_sketch(part: pd.DataFrame, *, feature_columns: list[str], label_column: str) -> pd.Series:
    """One partition's sketch, as the in-memory pipeline hashes its rows (features as float32, labels as codes)."""
    features = part[feature_columns].to_numpy(dtype=np.float32, na_value=np.nan)
    return pd.Series(sketch(row_hashes(features, part[label_column].to_numpy(dtype=np.int64))), dtype=np.uint64)
