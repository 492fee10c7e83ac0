"""Applying a saved model: evaluate, predict, and re-fit its threshold on new data.

All three stream the data in record batches; evaluate and threshold keep
only one logit and one label per row (what exact metrics need), predict
keeps nothing. So each reads DATA once, and DATA may be `-`: a CSV on
standard input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dmocli import progress
from dmocli.data import outputs, sinks, sources
from dmocli.data.prefetch import prefetched
from dmocli.engines.choice import LOCAL, EngineChoice
from dmocli.errors import DmoError, UnreachableTarget, option_hint
from dmocli.models.modelfile import DmoModel, load_model
from dmocli.operating_point.calibration import fit_platt
from dmocli.operating_point.gate import check_gate_confidence, gate_line, judge_gate
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.options import POPULATION, check_new_rows
from dmocli.pipelines.explained import check_k, explain_arrays, with_explain_fields
from dmocli.pipelines.model_input import ModelLike, model_name, opened
from dmocli.pipelines.multiclass import refit_class_offsets
from dmocli.pipelines.report_parts import OperatingPointSection, SplitsSection
from dmocli.pipelines.saving import finish_threshold, refuse_with_report, retargeted_info, stamp, threshold_envelope
from dmocli.pipelines.scoring import collect_logits, open_data, row_count
from dmocli.pipelines.thresholding import (
    OPTIMISTIC,
    certified_rows,
    fit_threshold,
    judge_reachability,
    problem_fields,
    split_reports,
)
from dmocli.prep.columns import refuse_problems
from dmocli.prep.drift import DEFAULT_MAX_UNSEEN, drift_problems, drift_warnings
from dmocli.prep.features import LevelCounts
from dmocli.prep.row_fingerprint import share_of_sketched_rows
from dmocli.report import (
    empty_prediction_warnings,
    envelope,
    label_fields,
    multiclass_split_report,
    plot_pr_curve,
    unlabeled_warning,
    write_report,
)

INT64_MAX = 2**63 - 1


def evaluate(
    model_path: str | Path | ModelLike,
    data: sources.Source,
    report_path: str | Path | None = None,
    plot_path: str | Path | None = None,
    engine: EngineChoice = LOCAL,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    *,
    gate: bool = False,
    gate_confidence: float | None = None,
) -> dict[str, Any]:
    """The model's metrics on labeled `data` at its stored threshold. Drift (unseen levels, emptied columns) is
    warned about; `strict` refuses it above `max_unseen` before anything is written. `gate` (or a
    `gate_confidence`, which implies it) raises UnreachableTarget, with the report, when the rows show the model's
    target missed (dmocli/operating_point/gate.py), so a CI job fails on a model that no longer holds its target."""
    started = time.perf_counter()
    data = sources.accept(data)  # the Python API may pass a pandas DataFrame
    check_max_unseen(max_unseen)
    check_gate_confidence(gate_confidence)
    model, model_path = opened(model_path)
    outputs.check_outputs({"--report": report_path, "--plot": plot_path}, {"MODEL": model_path, "DATA": data})
    model = model or load_model(model_path)
    logits, y, levels, unlabeled, _ = collect_logits(model, data, engine)
    n_rows = len(y) + unlabeled
    if strict:
        refuse_problems(drift_problems(levels, n_rows, max_unseen))
    split = split_reports(
        {"data": logits},
        {"data": y},
        model.threshold,
        problem=model.problem,
        classes=model.labels.classes,
        calibration=model.calibration,
    )["data"]
    if model.class_offsets is not None:  # a multi-class operating point: the splits at its offsets
        split = multiclass_split_report(
            logits, y, model.labels.classes, calibration=model.calibration, offsets=model.class_offsets
        )
    if model.binary:
        if plot_path is not None:
            if split["n_pos"] == 0:
                raise DmoError(f"{data} has no positive rows; a precision-recall plot needs some")
            plot_pr_curve(
                plot_path,
                logits,
                y,
                threshold=model.threshold,
                problem=model.problem,
                title=f"{Path(sources.describe(data)).name}: {model.problem.describe() if model.problem else ''}",
            )
    else:
        if plot_path is not None:
            raise DmoError("--plot draws a binary precision-recall curve; this model is multi-class")
    problem, described = model.problem, sources.describe(data)
    # The gate's verdict is part of the report; a model with no target to check says so in a warning, and a miss
    # ends the run as a refused target does (exit 3, the full report written and carried by the error).
    verdict = judge_gate(split, problem, gate_confidence) if gate or gate_confidence is not None else None
    unchecked = [gate_line(verdict, described)] if verdict is not None and verdict["passed"] is None else []
    report = envelope(
        "evaluate",
        model=model_name(model_path),
        data=described,
        engine=engine.name,
        solver=model.solver,
        **label_fields(model.labels),
        **problem_fields(problem),
        confidence=model.info.get("confidence"),
        seed=model.info.get("seed"),
        device="cpu",
        **levels.report(),
        threshold=model.threshold,
        unlabeled_rows=unlabeled,
        warnings=drift_warnings(levels, n_rows, model.preprocessor.impute)
        + unlabeled_warning(unlabeled, data)
        + empty_prediction_warnings({"data": split})
        + unchecked,
        splits={"data": split},
        **({"gate": verdict} if verdict is not None else {}),
    )
    if verdict is not None and verdict["passed"] is False:
        refuse_with_report(UnreachableTarget(gate_line(verdict, described)), report, report_path, started)
    stamp(report, started)
    if report_path is not None:
        write_report(report_path, report)
    return report


SPLIT_NAMES = {"cv": "out-of-fold scores", "val": "validation scores", "data": "scores", "train": "training scores"}


def stored_curve(model: DmoModel, model_path: str | Path) -> HeldOutCurve:
    """The held-out curve the model file keeps, or one line saying why there is none and what to give instead."""
    if model.evidence is None:
        raise DmoError(
            f"{model_path} keeps no held-out scores (written before dmocli stored them, or trained with "
            "--cv-transfer rank, whose out-of-fold scores are not on the saved model's scale); give labeled DATA"
        )
    return model.evidence


TRAINING_ROWS_SHARE = 0.5  # DATA this much made of the training rows is refused without --allow-train-rows


def refuse_training_rows(model: DmoModel, hashes: np.ndarray | None, where: str) -> None:
    """DATA that is mostly the rows the model was trained on: its threshold there would be optimistic (the model
    has fitted those rows), with nothing to say so. Said, with the ways out."""
    if model.training_rows is None or hashes is None:
        return
    share, counted = share_of_sketched_rows(model.training_rows, hashes)
    if share >= TRAINING_ROWS_SHARE:
        stored = option_hint("leave DATA out", "data=None")
        allow = option_hint("--allow-train-rows", "allow_train_rows=True")
        raise DmoError(
            f"{where} holds the rows the model was trained on (about {share:.0%} of the {counted} rows its "
            "fingerprint checks), where its precision and recall are optimistic; give rows it has not seen, "
            f"{stored} to re-target on the held-out scores the model keeps, or pass {allow}"
        )


def refit_threshold(
    model_path: str | Path,
    data: sources.Source | None,
    problem: Problem | None,
    output: str | Path,
    confidence: float | None = None,
    allow_infeasible: bool = False,
    report_path: str | Path | None = None,
    engine: EngineChoice = LOCAL,
    new_rows: int | float | str | None = None,
    allow_train_rows: bool = False,
) -> dict[str, Any]:
    """Exact threshold search for `problem` on `data`; writes a new model file with that threshold
    (-o may be MODEL itself: it is read before the new one replaces it, atomically).

    Without data, on the held-out curve the model file keeps (the out-of-fold or validation scores training
    searched on): the same search and certificate as train, so re-targeting needs no new labels and gives the
    threshold `dmo train` gives for that target and seed. Without a problem, the one stored in the model (and its
    --confidence and --new-rows, unless a confidence is given) is searched again: re-fitting on fresh rows is the
    common case, and the model already says what it was trained for."""
    started = time.perf_counter()
    data = None if data is None else sources.accept(data)  # the Python API may pass a pandas DataFrame
    outputs.check_outputs({"-o": output, "--report": report_path}, {"DATA": data} if data is not None else {})
    outputs.refuse_misnamed_model(output)
    outputs.check_distinct({"--report": report_path}, {"MODEL": model_path})
    model = load_model(model_path)
    if not model.binary:
        return refit_class_offsets(
            model,
            model_path=model_path,
            data=data,
            problem=problem,
            output=output,
            confidence=confidence,
            allow_infeasible=allow_infeasible,
            report_path=report_path,
            engine=engine,
            started=started,
        )
    problem_source = "option" if problem is not None else "model"
    if problem is None:
        problem = model.problem or Problem("ofbs")  # a binary model always stores one; ofbs is train's default
        if confidence is None and problem.kind != "ofbs":  # the model's own certificate (no new_rows: population)
            confidence = model.info.get("confidence")
            if confidence is not None and new_rows is None:
                new_rows = model.info.get("new_rows") or POPULATION
    check_new_rows(new_rows, confidence)  # --new-rows alone changes the sample of the model's own certificate
    if data is None:
        curve, unlabeled = stored_curve(model, model_path), 0
        logits, y = curve.rows()
        fitted_on = f"the held-out {SPLIT_NAMES[curve.split]} stored in {model_path}"
    else:
        logits, y, _, unlabeled, hashes = collect_logits(model, data, engine, hashed=model.training_rows is not None)
        fitted_on = sources.describe(data)
        if not allow_train_rows:
            refuse_training_rows(model, hashes, fitted_on)
        curve = HeldOutCurve.from_scores(logits, y, split="data", certified_rows=int(y.size))
    new_rows = certified_rows(new_rows, confidence, curve.certified_rows)  # by default, as train's, or DATA's rows
    point, unreachable = fit_threshold(logits, y, problem, confidence=confidence, where=fitted_on, new_rows=new_rows)
    settled = judge_reachability(point, unreachable, allow_infeasible)
    if curve.split == "train":
        settled.warnings.append(OPTIMISTIC)
    previous = model.threshold
    model.threshold = point.threshold
    model.problem = problem
    model.evidence = curve
    # The probability map is refitted on the same labeled rows as the threshold (the stored curve's rows: the
    # map training fitted on them is kept).
    calibration = model.calibration if data is None else fit_platt(logits, y, fitted_on) or model.calibration
    splits = split_reports(
        {"data": logits},
        {"data": y},
        point.threshold,
        problem=problem,
        classes=model.labels.classes,
        calibration=calibration,
    )
    # The training figures were at the old threshold: the file keeps the ones at its new one.
    model.info = retargeted_info(
        model.info,
        confidence=confidence,
        new_rows=new_rows,
        certified=point.feasible,
        fitted_on=fitted_on,
        splits=splits,
        calibration=calibration,
        calibration_refitted=False,  # the stored map is kept where none is refitted (no DATA, or too few rows)
    )
    report = threshold_envelope(
        model,
        model_path,
        OperatingPointSection(point=point),
        SplitsSection(threshold=point.threshold, splits=splits),
        data=fitted_on,
        engine=engine.name,
        output=output,
        problem_fields=problem.to_dict(),
        problem_source=problem_source,
        confidence=confidence,
        previous_threshold=previous,
        unlabeled_rows=unlabeled,
        warnings=(unlabeled_warning(unlabeled, data) if data is not None else [])
        + settled.warnings
        + empty_prediction_warnings(splits),
    )
    return finish_threshold(
        model, report, output=output, report_path=report_path, started=started, refusal=settled.refusal
    )


class Predictions:
    """One batch's output rows and its counts: the per-batch work of predict, in this process or on a Dask
    worker (sent there once, with the model)."""

    def __init__(
        self,
        model: DmoModel,
        schema: pa.Schema,
        *,
        id_col: str | None,
        per_class_columns: bool,
        data: str,
        explain: int | None = None,
    ):
        self.model, self.schema, self.id_col = model, schema, id_col
        self.per_class_columns, self.data, self.explain = per_class_columns, data, explain

    def process(self, batch: pa.RecordBatch | pa.Table, part: int = 0) -> tuple[pa.Table, dict[str, Any]]:
        features, levels = self.model.preprocessor.transform(batch)
        logits = self.model.logits_of_features(features)
        arrays: list[Any] = _prediction_arrays(self.model, logits, per_class_columns=self.per_class_columns)
        if self.explain:
            arrays += explain_arrays(self.model, features, self.explain)
        if self.id_col:
            ids = batch.column(self.id_col)
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
        counts = {"rows": batch.num_rows, "levels": levels.to_dict()}
        return pa.Table.from_arrays(arrays, schema=self.schema), counts


def predict(
    model_path: str | Path | ModelLike,
    data: sources.Source,
    output: str | Path,
    id_col: str | None = None,
    engine: EngineChoice = LOCAL,
    strict: bool = False,
    max_unseen: float = DEFAULT_MAX_UNSEEN,
    csv_escape: bool = True,
    explain: int | None = None,
) -> dict[str, Any]:
    """Per row: logit, probability and decision (binary) or class and probabilities (multi-class). With the Dask
    engine, OUTPUT is a directory of part files, one per partition, in the data's order. Drift over the whole
    run (unseen levels, emptied columns) is warned about; `strict` refuses it above `max_unseen`, and the
    output, written under a temporary name until then, never appears. A CSV output's text cells that a
    spreadsheet would run as a formula (`=...`, `+...`, `-...`, `@...`) get a leading `'`, unless `csv_escape`
    is False (for a program that reads the ids back verbatim). `explain` K adds each row's K largest
    contributions (docs/python.md#explanations). `dmocli.predict` with no output returns a DataFrame instead
    (pipelines/in_memory_predict.py)."""
    if explain is not None:
        check_k(explain)
    started = time.perf_counter()
    data = sources.accept(data)  # the Python API may pass a pandas DataFrame
    engine.check(data)
    check_max_unseen(max_unseen)
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
    model, model_path = opened(model_path)
    if engine.is_dask:
        outputs.check_parts_output(output, {"MODEL": model_path, "DATA": data})
    else:
        outputs.refuse_foreign_suffix(output, "the predictions", csv=True)
        if not to_stdout:
            outputs.check_outputs({"-o": output}, {"MODEL": model_path, "DATA": data})
    model = model or load_model(model_path)
    schema, batches = open_data(data, model)
    model.preprocessor.check_columns(schema)
    if id_col is not None and id_col not in schema.names:
        raise DmoError(f"--id-col {id_col!r} is not a column of {sources.describe(data)}")
    if id_col is not None and as_csv and pa.types.is_nested(schema.field(id_col).type):
        raise DmoError(
            f"--id-col {id_col!r} holds {schema.field(id_col).type}, which CSV cannot hold; write the "
            "predictions as parquet (-o NAME.parquet)"
        )
    inputs = model.preprocessor.input_columns
    columns = inputs + ([id_col] if id_col and id_col not in inputs else [])
    out_schema = with_explain_fields(_output_schema(model, schema, id_col, per_class_columns=as_csv), explain, id_col)
    predictions = Predictions(
        model, out_schema, id_col=id_col, per_class_columns=as_csv, data=sources.describe(data), explain=explain
    )

    def refuse_drift(parts: list[dict[str, Any]]) -> None:
        if strict:
            refuse_problems(drift_problems(_levels(parts), sum(c["rows"] for c in parts), max_unseen))

    if engine.is_dask:
        with engine.dask(data) as cluster:
            parts = cluster.write(predictions, Path(output), schema=out_schema, columns=columns, check=refuse_drift)
    else:
        parts = []
        sink = (
            sinks.CsvSink(out_schema, None if to_stdout else output, escape=csv_escape)
            if as_csv
            else sinks.ParquetSink(output, out_schema)
        )
        with sink, progress.task("predicting", total=lambda: row_count(data), unit="rows") as bar:
            for batch in progress.advancing(prefetched(batches(columns)), bar):  # read ahead while the model runs
                table, counts = predictions.process(batch)
                sink.write(table)
                parts.append(counts)
            refuse_drift(parts)  # inside the sink: a refusal leaves no output file
    levels = _levels(parts)
    rows = sum(c["rows"] for c in parts)
    return envelope(
        "predict",
        model=model_name(model_path),
        data=sources.describe(data),
        engine=engine.name,
        output="standard output" if to_stdout else str(output),
        rows=rows,
        **levels.report(),
        warnings=drift_warnings(levels, rows, model.preprocessor.impute),
        wall_seconds=time.perf_counter() - started,
    )


def _levels(parts: list[dict[str, Any]]) -> LevelCounts:
    """The level counts of every batch (or Dask partition), added up."""
    levels = LevelCounts()
    for counts in parts:
        levels.add(LevelCounts.from_dict(counts["levels"]))
    return levels


def check_max_unseen(max_unseen: float) -> None:
    if not 0 <= max_unseen < 1:
        raise DmoError(f"--max-unseen {max_unseen:g} is a share of rows: give a number from 0 to below 1 (e.g. 0.01)")


def _output_schema(model: DmoModel, schema: pa.Schema, id_col: str | None, per_class_columns: bool) -> pa.Schema:
    """The prediction columns (after the id column, if any); multi-class probabilities as one list column, or
    (per_class_columns, for CSV, which has no list type) one `probability_<class>` column per class."""
    classes = model.labels.classes
    if model.binary:
        out_schema = pa.schema(
            [
                ("logit", pa.float32()),
                ("probability", pa.float32()),
                ("decision", pa.int8()),
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


def _prediction_arrays(model: DmoModel, logits: np.ndarray, per_class_columns: bool = False) -> list[pa.Array]:
    """The output columns of a batch; multi-class probabilities as one list column, or (per_class_columns, for
    CSV, which has no list type) one column per class."""
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
            pa.array(decision, pa.int8()),
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
