"""Which columns a model leans on, from the model file alone: `dmo info MODEL --features`.

A model file keeps no training rows, so each family's importance is one that needs none. It is given per feature
column (dmocli/models/explain.py's `explained_columns`: a date column's `--dates parts` each by name, as the
training profile keeps them):

- gbdt: XGBoost's total gain (the loss reduction of every split on the column, summed; a categorical column's
  one-hot levels added together; an ensemble's members averaged).
- linear and mlp: the mean absolute contribution (dmocli/models/explain.py: exact for linear, integrated
  gradients for mlp) over REFERENCE_ROWS rows drawn from the training profile the model file keeps (each
  column's quantile bins and level counts, drawn independently of each other, seeded): the typical size of
  the column's push on the logit. A file without a profile (written before dmocli stored one, or an
  embedding model) has no importance, only coefficients.

A linear model also lists its coefficients: per numeric column, per training standard deviation
(`coefficient`) and per unit of the raw column (`per_unit`); per categorical column, each level's (the logit's
change for a row at that level against a row at none). An ensemble lists its members' mean coefficients.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from dmocli.data.arrow_numpy import float_array, picked_text
from dmocli.models.explain import METHODS, column_groups, contributions, explained_columns, linear_weights
from dmocli.models.modelfile import DmoModel

REFERENCE_ROWS = 2000
REFERENCE_SEED = 0
GAIN = "total gain of the column's splits (XGBoost total_gain; one-hot levels added; ensemble members averaged)"
MEAN_CONTRIBUTION = (
    "mean absolute contribution to the logit ({method}) over {rows} rows drawn from the training profile"
)


def feature_importance(model: DmoModel) -> dict[str, Any]:
    """The `importance` section of the info report: the method, and per feature column its importance (null when
    the file has no profile to draw from) and, for linear models, its coefficients; most important first."""
    pre = model.preprocessor
    kind = model.architecture.kind
    if kind == "gbdt":
        importance: np.ndarray | None = _total_gain(model)
        method = GAIN
    else:
        sample = reference_sample(model)
        importance = None if sample is None else _mean_contribution(model, sample)
        method = (
            "none: the model file keeps no training profile to draw reference rows from"
            if sample is None
            else MEAN_CONTRIBUTION.format(method=METHODS[kind], rows=REFERENCE_ROWS)
        )
    kinds = ["embedding"] if pre.embedding else ["numeric"] * len(pre.numeric) + ["categorical"] * len(pre.categorical)
    entries = [
        {"name": name, "kind": kinds[j], "importance": None if importance is None else float(importance[j])}
        for j, name in enumerate(explained_columns(pre))
    ]
    if kind == "linear" and not pre.embedding:
        _add_coefficients(model, entries)
    entries.sort(key=lambda entry: -1.0 if entry["importance"] is None else -entry["importance"])
    return {"method": method, "columns": entries}


def _total_gain(model: DmoModel) -> np.ndarray:
    """Per feature column, the members' mean total gain, one-hot levels added."""
    groups = column_groups(model.preprocessor)
    gain = np.zeros(len(explained_columns(model.preprocessor)))
    members = model.members()
    for member in members:
        scores = member.xgb_booster().get_score(importance_type="total_gain")
        for name, value in scores.items():
            gain[groups[int(name[1:])]] += value / len(members)  # XGBoost names unnamed features f0, f1, ...
    return gain


def _mean_contribution(model: DmoModel, sample: pa.Table) -> np.ndarray:
    features, _ = model.preprocessor.transform(sample)
    return np.abs(contributions(model, features).values).mean(axis=0)


def _add_coefficients(model: DmoModel, entries: list[dict[str, Any]]) -> None:
    """Each entry's coefficients (module docstring); a multi-class model's are lists in class order."""
    weight = np.mean([linear_weights(member)[0] for member in model.members()], axis=0)
    pre = model.preprocessor

    def value(column: int) -> float | list[float]:
        return float(weight[0, column]) if model.binary else weight[:, column].tolist()

    by_name = {entry["name"]: entry for entry in entries}
    for j, name in enumerate(pre.numeric):
        scale = pre.scale[j]
        by_name[name]["coefficient"] = value(j)
        by_name[name]["per_unit"] = float(weight[0, j] / scale) if model.binary else (weight[:, j] / scale).tolist()
    offset = len(pre.numeric)
    for name, levels in pre.categorical.items():
        by_name[name]["levels"] = [{"level": level, "coefficient": value(offset + i)} for i, level in enumerate(levels)]
        offset += len(levels)


def reference_sample(model: DmoModel, rows: int = REFERENCE_ROWS, seed: int = REFERENCE_SEED) -> pa.Table | None:
    """Rows drawn from the training profile, each column on its own: a numeric value uniform within a quantile
    bin picked by its count (the open outer bins at their edge), a categorical level picked by its count (the
    rarer levels the profile pools, and missing, as no level), under the feature columns' names (a date column's
    parts, which the stored derivation passes through as derived already). None without a profile for every
    feature column."""
    profile, pre = model.profile, model.preprocessor
    if profile is None or pre.embedding or not set(explained_columns(pre)) <= {*profile.numeric, *profile.categorical}:
        return None
    rng = np.random.default_rng(seed)
    columns: dict[str, pa.Array] = {}
    for j, name in enumerate(pre.numeric):
        binned = profile.numeric[name]
        edges, counts = np.asarray(binned.edges, dtype=np.float64), np.asarray(binned.counts, dtype=np.float64)
        if not edges.size or counts.sum() == 0:
            columns[name] = float_array(np.full(rows, pre.mean[j]))
            continue
        picked = rng.choice(len(counts), size=rows, p=counts / counts.sum())
        low = edges[np.clip(picked - 1, 0, len(edges) - 1)]
        high = edges[np.clip(picked, 0, len(edges) - 1)]
        columns[name] = float_array(low + rng.random(rows) * (high - low))
    for name in pre.categorical:
        levels = profile.categorical[name]
        cells = np.asarray([*levels.counts, levels.other + levels.unseen + levels.missing], dtype=np.float64)
        if cells.sum() == 0:
            columns[name] = pa.nulls(rows, pa.string())
            continue
        picked = rng.choice(len(cells), size=rows, p=cells / cells.sum())
        columns[name] = picked_text(list(levels.levels), picked)
    return pa.table(columns)
