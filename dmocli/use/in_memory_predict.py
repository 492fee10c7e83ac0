"""`dmocli.predict` from Python: with an output path it is `dmo predict`; without one it returns the predictions as
a pandas DataFrame, so a session scores a DataFrame (or a file) in memory with the same column handling, drift
checks and output columns as the command, and no file in between.

The DataFrame has the columns a CSV file from `dmo predict` has (a multi-class model's `probability_<class>`
columns rather than a list column), in the same types, and a DataFrame input's index.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from dmocli.data import sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import load_model
from dmocli.prep.columns import refuse_problems
from dmocli.prep.drift import DEFAULT_MAX_UNSEEN, check_max_unseen, drift_problems, drift_warnings
from dmocli.scoring.scored_pass import ScoredTable
from dmocli.use.explained import check_k, explain_count, with_explain_fields
from dmocli.use.model_input import ModelLike, opened
from dmocli.use.predict import predict as predict_to_file
from dmocli.use.prediction_output import Predictions, TablesSink, prediction_schema, summed_levels


def predict(
    model: str | Path | ModelLike,
    data: sources.Source | pd.DataFrame,
    output: str | Path | None = None,
    *,
    id_col: str | None = None,
    engine: EngineChoice = LOCAL,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    csv_escape: bool = True,
    explain: int | None = None,
) -> dict[str, Any] | pd.DataFrame:
    """`dmo predict`: writes `output` and returns the report; with no output, returns the predictions
    (predict_frame). `model` is a model file, a DmoModel or a fitted DmoClassifier."""
    if output is not None:
        return predict_to_file(
            model,
            data,
            output,
            id_col,
            engine=engine,
            strict=strict,
            max_unseen=max_unseen,
            csv_escape=csv_escape,
            explain=explain,
        ).to_dict()
    if engine.is_dask:
        raise DmoError("predictions returned in memory are computed here; give an output path for --engine dask")
    return predict_frame(model, data, id_col=id_col, strict=strict, max_unseen=max_unseen, explain=explain)


def predict_frame(
    model: str | Path | ModelLike,
    data: sources.Source | pd.DataFrame,
    *,
    id_col: str | None = None,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    explain: int | None = None,
) -> pd.DataFrame:
    """The predictions of `data`'s rows as a DataFrame (module docstring). Drift (unseen levels, emptied
    columns) is a UserWarning, or with `strict` a DmoError above `max_unseen`, as `dmo predict` says it."""
    if explain is not None:
        check_k(explain)
    index = data.index if isinstance(data, pd.DataFrame) else None
    data = sources.accept(data)
    check_max_unseen(max_unseen)
    held, path = opened(model)
    model = held or load_model(path)
    scored = ScoredTable(model, data)  # the model's columns checked
    schema = scored.schema
    if id_col is not None and id_col not in schema.names:
        raise DmoError(f"id_col {id_col!r} is not a column of {sources.describe(data)}")
    inputs = model.preprocessor.input_columns
    columns = inputs + ([id_col] if id_col and id_col not in inputs else [])
    out_schema = with_explain_fields(
        prediction_schema(model, schema, id_col, per_class_columns=True), explain_count(model, explain), id_col
    )
    predictions = Predictions(
        model, out_schema, id_col=id_col, per_class_columns=True, data=sources.describe(data), explain=explain
    )
    sink = TablesSink(out_schema)
    parts = scored.write(predictions, columns=columns, sink=sink)
    levels = summed_levels(parts)
    rows = sum(counts["rows"] for counts in parts)
    if strict:
        refuse_problems(drift_problems(levels, rows, max_unseen))
    for line in drift_warnings(levels, rows, model.preprocessor.impute):
        warnings.warn(line, UserWarning, stacklevel=2)
    frame = sink.table().to_pandas()
    if index is not None:
        frame.index = index
    return frame
