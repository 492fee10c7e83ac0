"""The `--explain K` columns of predict: per row, the K columns that moved its logit most, and by how much.

Two columns per rank, `explain_<i>_feature` (the feature column's name: a date column's derived part by its own
name, `when.hour`) and `explain_<i>_contribution` (its contribution to the logit, signed: positive pushes towards
the positive or predicted class), i = 1..K, largest absolute contribution first; dmocli/models/explain.py says how
each model family's contributions are made. K is capped at the model's column count (`explain_count`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dmocli.errors import DmoError
from dmocli.models.explain import check_k, contributions, explained_columns, rank_columns, shown_count
from dmocli.models.modelfile import DmoModel

__all__ = ["check_k", "explain_arrays", "explain_count", "explain_names", "with_explain_fields"]


def explain_count(model: DmoModel, k: int | None) -> int | None:
    """The ranks `--explain k` writes for `model`: k, at most its column count (None: no --explain)."""
    return None if not k else shown_count(len(explained_columns(model.preprocessor)), k)


def explain_names(k: int) -> list[str]:
    """The 2K column names, in output order."""
    return [name for i in range(1, k + 1) for name in rank_columns(i)]


def with_explain_fields(schema: pa.Schema, k: int | None, id_col: str | None) -> pa.Schema:
    """The predictions' schema with the explanation columns after the others (unchanged without --explain);
    `k` the ranks written (`explain_count`)."""
    if not k:
        return schema
    names = explain_names(k)
    if id_col in names:
        raise DmoError(f"--id-col {id_col!r} has the name of an --explain output column; rename that column")
    fields = [pa.field(name, pa.string() if name.endswith("_feature") else pa.float32()) for name in names]
    return pa.schema([*schema, *fields])


def explain_arrays(model: DmoModel, features: np.ndarray, k: int) -> list[pa.Array]:
    """The explanation columns of one batch of encoded rows, `explain_count(model, k)` ranks."""
    columns = contributions(model, features).top_columns(k)
    return [
        pa.array(values, pa.string()) if name.endswith("_feature") else pa.array(values.astype(np.float32))
        for name, values in columns.items()
    ]
