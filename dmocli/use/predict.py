"""`dmo predict`: a saved model's predictions for every row of DATA, streamed in record batches.

Predict keeps nothing of the rows it scores (each batch is written as it comes, to a CSV or Parquet file,
standard output, or with Dask a directory of part files), so it reads DATA once and DATA may be `-`: a CSV on
standard input. Drift (unseen levels, emptied columns) is counted over the whole run and warned about after it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dmocli.data import sinks, sources
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.models.modelfile import load_model
from dmocli.prep.columns import refuse_problems
from dmocli.prep.drift import DEFAULT_MAX_UNSEEN, check_max_unseen, drift_problems, drift_warnings
from dmocli.scoring.scored_pass import ScoredTable
from dmocli.use.explained import check_k, explain_count, with_explain_fields
from dmocli.use.model_input import ModelLike, model_name, opened
from dmocli.use.prediction_output import (
    Predictions,
    check_decision_names,
    check_id_col,
    check_prediction_paths,
    prediction_schema,
    prediction_target,
    summed_levels,
)
from dmocli.use.results.common import Envelope, LevelFields
from dmocli.use.results.prediction import PredictResult


def predict(
    model_path: str | Path | ModelLike,
    data: sources.Source,
    output: str | Path,
    id_col: str | None = None,
    *,
    engine: EngineChoice = LOCAL,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    csv_escape: bool = True,
    explain: int | None = None,
    decision_names: str | None = None,
) -> PredictResult:
    """Per row: logit, probability and decision (binary) or class and probabilities (multi-class). With the Dask
    engine, OUTPUT is a directory of part files, one per partition, in the data's order. Drift over the whole
    run (unseen levels, emptied columns) is warned about; `strict` refuses it above `max_unseen`, and the
    output, written under a temporary name until then, never appears. A CSV output's text cells that a
    spreadsheet would run as a formula (`=...`, `+...`, `-...`, `@...`) get a leading `'`, unless `csv_escape`
    is False (for a program that reads the ids back verbatim). `explain` K adds each row's K largest
    contributions (docs/python.md#explanations). A model with a review band writes `decision` as positive,
    review or negative (named by `decision_names`, POS,REVIEW,NEG). Returns the report, typed; `dmocli.predict`
    returns it as a dict, or with no output a DataFrame of the predictions (use/in_memory_predict.py)."""
    if explain is not None:
        check_k(explain)
    started = time.perf_counter()
    data = sources.accept(data)  # the Python API may pass a pandas DataFrame
    engine.check(data)
    check_max_unseen(max_unseen)
    target = prediction_target(output, engine=engine, strict=strict)
    model, model_path = opened(model_path)
    check_prediction_paths(output, target, model_path=model_path, data=data, engine=engine)
    model = model or load_model(model_path)
    names = check_decision_names(model, decision_names)
    table = ScoredTable(model, data, engine=engine)  # the model's columns checked
    schema = table.schema
    check_id_col(id_col, schema, data=data, as_csv=target.as_csv)
    inputs = model.preprocessor.input_columns
    columns = inputs + ([id_col] if id_col and id_col not in inputs else [])
    out_schema = with_explain_fields(
        prediction_schema(model, schema, id_col, per_class_columns=target.as_csv), explain_count(model, explain), id_col
    )
    predictions = Predictions(
        model,
        out_schema,
        id_col=id_col,
        per_class_columns=target.as_csv,
        data=sources.describe(data),
        explain=explain,
        decision_names=names,
    )

    def refuse_drift(parts: list[dict[str, Any]]) -> None:
        if strict:
            refuse_problems(drift_problems(summed_levels(parts), sum(c["rows"] for c in parts), max_unseen))

    sink = None  # Dask writes a directory of parts, one a partition
    if not engine.is_dask:
        sink = (
            sinks.CsvSink(out_schema, None if target.to_stdout else output, escape=csv_escape)
            if target.as_csv
            else sinks.ParquetSink(output, out_schema)
        )
    parts = table.write(predictions, columns=columns, sink=sink, output=output, check=refuse_drift)
    levels = summed_levels(parts)
    rows = sum(c["rows"] for c in parts)
    return PredictResult(
        envelope=Envelope.of("predict"),
        model=model_name(model_path),
        data=sources.describe(data),
        engine=engine.name,
        output="standard output" if target.to_stdout else str(output),
        rows=rows,
        levels=LevelFields.of(levels),
        warnings=drift_warnings(levels, rows, model.preprocessor.impute),
        wall_seconds=time.perf_counter() - started,
    )
