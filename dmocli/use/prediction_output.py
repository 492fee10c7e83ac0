"""What `dmo predict` writes and where: the output's kind and its checks (standard output, CSV or parquet, Dask's
parts, the id column), the rows of each batch (the model's logit, probability and decision, or class and
probabilities, the id column and the --explain columns) in one arrow schema fixed before the first batch; the
rows are written by the one scored pass (scoring/scored_pass.py). use/predict.py's predict only strings these together;
the per-batch work is one object a Dask worker receives once, with the model, and `dmocli.predict`'s in-memory
path shares it, writing to a `TablesSink`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dmocli.data import outputs, sources
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.review_band import DECISIONS, decisions
from dmocli.prep.features import LevelCounts
from dmocli.scoring.scored_pass import Scored
from dmocli.use.explained import explain_arrays

INT64_MAX = 2**63 - 1


class Predictions:
    """One scored batch's output rows (scoring/scored_pass.py's RowWriter): the per-batch work of predict, in this
    process or on a Dask worker (sent there once, with the model)."""

    def __init__(
        self,
        model: DmoModel,
        schema: pa.Schema,
        *,
        id_col: str | None,
        per_class_columns: bool,
        data: str,
        explain: int | None = None,
        decision_names: tuple[str, str, str] = DECISIONS,
    ):
        self.model, self.schema, self.id_col = model, schema, id_col
        self.per_class_columns, self.data, self.explain = per_class_columns, data, explain
        self.decision_names = decision_names

    def rows(self, scored: Scored) -> pa.Table:
        arrays: list[Any] = prediction_arrays(
            self.model, scored.logits, per_class_columns=self.per_class_columns, decision_names=self.decision_names
        )
        if self.explain:
            arrays += explain_arrays(self.model, scored.features, self.explain)
        if self.id_col:
            ids = scored.batch.column(self.id_col)
            expected = self.schema.field(self.id_col).type
            if ids.type != expected:  # a CSV column whose later rows widened it
                try:
                    ids = ids.cast(expected)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise DmoError(
                        f"--id-col {self.id_col!r} changes type in {self.data} ({expected} in the first "
                        f"rows, {ids.type} later); give an id column of one type, e.g. text"
                    ) from exc
            arrays = [ids] + arrays
        return pa.Table.from_arrays(arrays, schema=self.schema)


class TablesSink:
    """A sink that keeps the output rows in memory (`dmocli.predict` returning a DataFrame), as a file sink writes
    them."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.tables: list[pa.Table] = []

    def __enter__(self) -> TablesSink:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, table: pa.Table) -> None:
        self.tables.append(table)

    def table(self) -> pa.Table:
        return pa.concat_tables(self.tables) if self.tables else self.schema.empty_table()


def summed_levels(parts: list[dict[str, Any]]) -> LevelCounts:
    """The level counts of every batch (or Dask partition), added up."""
    levels = LevelCounts()
    for counts in parts:
        levels.add(LevelCounts.from_dict(counts["levels"]))
    return levels


def prediction_schema(model: DmoModel, schema: pa.Schema, id_col: str | None, per_class_columns: bool) -> pa.Schema:
    """The prediction columns (after the id column, if any); multi-class probabilities as one list column, or
    (per_class_columns, for CSV, which has no list type) one `probability_<class>` column per class."""
    classes = model.labels.classes
    if model.binary:
        out_schema = pa.schema(
            [
                ("logit", pa.float32()),
                ("probability", pa.float32()),
                ("decision", pa.int8() if model.review_threshold is None else pa.string()),
                ("predicted", _binary_label_type(classes)),
            ]
        )
    else:
        out_schema = pa.schema(
            [
                ("predicted", _label_type(classes)),
                ("probability", pa.float32()),
                ("probabilities", pa.list_(pa.float32(), len(classes))),
            ]
        )
    if id_col in out_schema.names:
        raise DmoError(
            f"--id-col {id_col!r} has the name of an output column ({', '.join(out_schema.names)}); "
            "rename that column in the data"
        )
    if id_col:
        out_schema = pa.schema([schema.field(id_col)] + list(out_schema))
    if per_class_columns and not model.binary:
        out_schema = pa.schema([*list(out_schema)[:-1], *(pa.field(f"probability_{c}", pa.float32()) for c in classes)])
    return out_schema


def _label_type(classes: list[Any]) -> pa.DataType:
    """The arrow type of the predicted class, from the model's class names (all of one kind)."""
    example = classes[0]
    if isinstance(example, bool):
        return pa.bool_()
    if isinstance(example, int):
        return pa.uint64() if max(classes) > INT64_MAX else pa.int64()
    if isinstance(example, float):
        return pa.float64()
    return pa.string()


def _binary_label_type(classes: list[Any]) -> pa.DataType:
    """The label type when both class names share it; string when the negative is a 'not X' name."""
    negative, positive = classes
    return _label_type(classes) if type(negative) is type(positive) else pa.string()


def prediction_arrays(
    model: DmoModel,
    logits: np.ndarray,
    per_class_columns: bool = False,
    *,
    decision_names: tuple[str, str, str] = DECISIONS,
) -> list[pa.Array]:
    """The output columns of a batch; multi-class probabilities as one list column, or (per_class_columns, for
    CSV, which has no list type) one column per class. A model with a review band writes its `decision` as the
    class of decision, named by `decision_names` (positive, review, negative); its `predicted` stays the class at
    the automatic cut (a review row's is the negative class: no one has decided it yet)."""
    if model.binary:
        decision = model.decide(logits)
        classes = model.labels.classes
        label_type = _binary_label_type(classes)
        names = classes if label_type != pa.string() else [str(c) for c in classes]
        predicted = pa.array(np.asarray(names, dtype=object)[decision.astype(np.int64)], type=label_type)
        proba = model.probability(logits)
        return [
            pa.array(logits, pa.float32()),
            pa.array(proba.astype(np.float32)),
            pa.array(decision, pa.int8()) if model.review_threshold is None else _banded(model, logits, decision_names),
            predicted,
        ]
    # The predicted class is the model's decision (the arg-max of the logits plus its class offsets, if any); its
    # probability (and every class's) is the calibrated one, whose own arg-max may differ.
    best = model.decide(logits)
    proba = model.class_probabilities(logits)
    classes = model.labels.classes
    predicted = pa.array(np.asarray(classes, dtype=object)[best], type=_label_type(classes))
    proba = proba.astype(np.float32)
    head = [predicted, pa.array(proba[np.arange(len(best)), best])]
    if per_class_columns:
        return head + [pa.array(proba[:, k]) for k in range(len(classes))]
    return head + [pa.FixedSizeListArray.from_arrays(pa.array(proba.ravel()), len(classes))]


def _banded(model: DmoModel, logits: np.ndarray, names: tuple[str, str, str]) -> pa.Array:
    """Each row's class of decision under the model's review band, by name."""
    indices = decisions(logits, model.threshold, model.review_threshold)
    return pa.array(np.asarray(names, dtype=object)[indices], pa.string())


def check_decision_names(model: DmoModel, names: str | None) -> tuple[str, str, str]:
    """--decision-names POS,REVIEW,NEG as three distinct names, given only for a model with a review band (one
    without writes its decision as 0 or 1); the default names where none is given."""
    if names is None:
        return DECISIONS
    if model.review_threshold is None:
        raise DmoError(
            "--decision-names names a review band's three decisions; this model has no band (its decision is 0 or "
            "1): leave it out, or give the model one with dmo threshold MODEL --review-budget R"
        )
    parts = tuple(part.strip() for part in names.split(","))
    if len(parts) != 3 or not all(parts) or len(set(parts)) != 3:
        raise DmoError(
            f"--decision-names {names!r} must be three distinct names, POSITIVE,REVIEW,NEGATIVE "
            "(e.g. block,review,pass)"
        )
    return parts  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class PredictionTarget:
    """Where the predictions go: standard output (`-o -`, CSV) or a file, and whether as CSV (no list column, so a
    multi-class model's probabilities one column per class)."""

    to_stdout: bool
    as_csv: bool


def prediction_target(output: str | Path, *, engine: EngineChoice, strict: bool) -> PredictionTarget:
    """The output's kind, refusing the combinations that cannot work before anything is read: --strict with
    standard output (the rows are out before drift is judged), and CSV from Dask (it writes parquet parts)."""
    to_stdout = sources.is_stdin(output)  # `-o -`: CSV on standard output
    if strict and to_stdout:
        raise DmoError(
            "--strict judges drift after the last row, when standard output has them all; write the predictions "
            "to a file (-o FILE), or drop --strict"
        )
    as_csv = to_stdout or outputs.is_csv_path(output)  # or a .csv / .csv.gz / .tsv file
    if as_csv and engine.is_dask:
        named = "- (standard output)" if to_stdout else output
        raise DmoError(
            f"--engine dask writes a directory of parquet part files; -o {named} needs --engine local "
            "(or give a directory name)"
        )
    return PredictionTarget(to_stdout=to_stdout, as_csv=as_csv)


def check_prediction_paths(
    output: str | Path, target: PredictionTarget, *, model_path: str | Path, data: sources.Source, engine: EngineChoice
) -> None:
    """The output path checks: Dask's directory of parts, or one file of a known suffix that overwrites neither
    MODEL nor DATA (standard output needs none)."""
    if engine.is_dask:
        outputs.check_parts_output(output, {"MODEL": model_path, "DATA": data})
        return
    outputs.refuse_foreign_suffix(output, "the predictions", csv=True)
    if not target.to_stdout:
        outputs.check_outputs({"-o": output}, {"MODEL": model_path, "DATA": data})


def check_id_col(id_col: str | None, schema: pa.Schema, *, data: sources.Source, as_csv: bool) -> None:
    """--id-col names a column of DATA, of a type the output can hold (CSV has no nested types)."""
    if id_col is None:
        return
    if id_col not in schema.names:
        raise DmoError(f"--id-col {id_col!r} is not a column of {sources.describe(data)}")
    if as_csv and pa.types.is_nested(schema.field(id_col).type):
        raise DmoError(
            f"--id-col {id_col!r} holds {schema.field(id_col).type}, which CSV cannot hold; write the "
            "predictions as parquet (-o NAME.parquet)"
        )
