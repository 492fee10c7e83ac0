"""Pipeline inputs only semi-supervised solvers use: extra view columns and the unlabeled rows' true labels.

Both become per-row arrays in `Prepared.extra`, so they follow the rows
through train/validation splitting like the features do:
- "view_weak" / "view_strong": list columns `<embedding>_weak` and
  `<embedding>_strong`, or `<embedding>_weak_0` / `<embedding>_strong_0` as
  `dmo extract --views` writes them (augmented views of a feature file),
  encoded with the embedding's fitted standardization;
- "unlabeled_truth": the true class code of each unlabeled row (-1 for
  labeled rows and unknown truths), used for reporting only, never training.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa

from dmocli.data import reading
from dmocli.errors import DmoError
from dmocli.prep.dataset import features_of
from dmocli.prep.features import Preprocessor
from dmocli.prep.labels import LabelSpec

VIEW_KINDS = ("weak", "strong")


def view_columns(table: pa.Table, pre: Preprocessor) -> dict[str, np.ndarray]:
    """Standardized weak/strong view matrices present in `table` (none for non-embedding data).

    `<embedding>_<kind>` is used if present, else the first extracted view
    `<embedding>_<kind>_0`.
    """
    if not pre.embedding:
        return {}
    out = {}
    for kind in VIEW_KINDS:
        for name in (f"{pre.embedding}_{kind}", f"{pre.embedding}_{kind}_0"):
            if name in table.schema.names:
                out[f"view_{kind}"], _ = features_of(table, dataclasses.replace(pre, embedding=name))
                break
    return out


def read_unlabeled_truth(path: str | Path, labels: LabelSpec, label_type: pa.DataType, y: np.ndarray) -> np.ndarray:
    """Codes of the true labels of DATA's unlabeled rows, aligned with `y` (-1 where not applicable).

    The file (parquet or CSV) has the label column under DATA's name, with
    either one row per unlabeled row of DATA in DATA's order, or one row per
    row of DATA (e.g. the fully labeled original); then only the rows that
    are unlabeled in DATA are read. A null truth means unknown.
    """
    table = reading.read_table(path)
    if labels.column not in table.schema.names:
        raise DmoError(
            f"--unlabeled-truth {path} has no label column '{labels.column}' (name it like DATA's label column)"
        )
    if pa.types.is_dictionary(label_type):
        label_type = label_type.value_type
    try:
        column = table.column(labels.column).cast(label_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DmoError(
            f"--unlabeled-truth {path}: label column '{labels.column}' cannot be read as {label_type} "
            "like DATA's labels"
        ) from exc
    codes = labels.encode(column)
    unlabeled = y < 0
    truth = np.full(y.size, -1, dtype=np.int64)
    if table.num_rows == y.size:
        truth[unlabeled] = codes[unlabeled]
    elif table.num_rows == int(unlabeled.sum()):
        truth[unlabeled] = codes
    else:
        raise DmoError(
            f"--unlabeled-truth {path} has {table.num_rows} rows; give one row per unlabeled row of DATA "
            f"({int(unlabeled.sum())}, in DATA's order) or one per row of DATA ({y.size})"
        )
    return truth
