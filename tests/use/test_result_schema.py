"""The typed results of `dmo info`, `dmo evaluate`, `dmo predict` and `dmo monitor` (dmocli/use/results/) and the
report schema (dmocli/schema/report.schema.json, docs/report-schema.md) say the same shape, field by field: every
field of a result record (and of each record nested in it) is a property of its schema definition and the other way
round, a field the record always writes is required there and one it leaves out when None is not, and their types
agree. Then a real result of each command, on a model trained here, validates against the schema, and its
`to_dict` is what the command prints with --json, its `lines` what it prints without.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import pytest
from conftest import make_binary_frame

import dmocli
from dmocli import TrainOptions, report_schema, train
from dmocli.report import ReportRecord
from dmocli.use.evaluate import evaluation
from dmocli.use.model_info import model_info
from dmocli.use.monitor import monitor
from dmocli.use.predict import predict
from dmocli.use.results.evaluation import EvaluateResult
from dmocli.use.results.info import InfoResult
from dmocli.use.results.monitor import MonitorResult
from dmocli.use.results.prediction import PredictResult

SCHEMA = report_schema()

# Where the schema is looser than the record, on purpose: the key, and why.
LOOSER = {
    ("evaluate", "wall_seconds"): "None only on the report a refused gate carries until it is timed after its error "
    "keys (pipelines/saving.py:refuse_with_report); every report written has it, as the schema requires",
    ("monitor", "wall_seconds"): "None only until the run is timed, last; every report written has it",
}
STAMPS = {"wall_seconds", "written_at"}  # a run's time and when its report was written: never equal run to run
FAILURE_KEYS = {"message", "error"}  # a failed run's keys (report.failure), added to its report, never a result's
PYTHON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def properties(schema: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """A definition's properties and required keys, those of the definitions its `allOf` shares included."""
    schema = resolve(schema)
    props, required = dict(schema.get("properties", {})), set(schema.get("required", []))
    for shared in schema.get("allOf", []):
        more, needed = properties(shared)
        props, required = {**more, **props}, required | needed
    return props, required


def record_fields(record: type) -> dict[str, tuple[bool, Any]]:
    """A record's report keys: each field's (always written, type), an inlined record's fields in its place."""
    hints = typing.get_type_hints(record)
    keys: dict[str, tuple[bool, Any]] = {}
    for field in dataclasses.fields(record):
        how = field.metadata.get("report")
        if how == "inlined":
            inner = record_fields(
                next(t for t in typing.get_args(hints[field.name]) or [hints[field.name]] if t is not type(None))
            )
            always = field.default is dataclasses.MISSING
            keys.update({name: (written and always, kind) for name, (written, kind) in inner.items()})
        else:
            keys[field.name] = (how != "omitted", hints[field.name])
    return keys


def json_types(annotation: Any) -> set[str] | None:
    """The JSON types a Python annotation writes (None: any)."""
    if annotation is Any:
        return None
    if annotation is type(None):
        return {"null"}
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [json_types(arg) for arg in typing.get_args(annotation)]
        return None if None in members else set().union(*members)
    if dataclasses.is_dataclass(annotation):
        return {"object"}
    return {PYTHON_TYPES[origin or annotation]}


def schema_types(schema: dict[str, Any]) -> set[str] | None:
    """The JSON types a schema admits (None: any)."""
    schema = resolve(schema)
    if "type" in schema:
        return {schema["type"]} if isinstance(schema["type"], str) else set(schema["type"])
    if "enum" in schema:
        return {"null" if v is None else PYTHON_TYPES[type(v)] for v in schema["enum"]}
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        found = [schema_types(branch) for branch in branches]
        return None if None in found else set().union(*found)
    return {"object"} if "properties" in schema else None


def records_in(annotation: Any) -> list[type]:
    """The record types an annotation holds: itself, a union's members, a list's items, a dict's values."""
    if dataclasses.is_dataclass(annotation):
        return [annotation]
    return [record for arg in typing.get_args(annotation) for record in records_in(arg)]


def branch_for(record: type, schema: dict[str, Any]) -> dict[str, Any]:
    """The part of a property's schema that describes `record`: an item, a value, the anyOf branch with its keys."""
    schema = resolve(schema)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema = resolve(schema[key])
    branches = [resolve(b) for b in schema.get("anyOf") or schema.get("oneOf") or [schema]]
    objects = [b for b in branches if schema_types(b) != {"null"}]
    matching = [b for b in objects if set(properties(b)[0]) == set(record_fields(record))]
    return matching[0] if matching else objects[0]


def disagreements(record: type, schema: dict[str, Any], where: str) -> list[str]:
    """Every way `record` and `schema` differ, its nested records' included."""
    props, required = properties(schema)
    fields = record_fields(record)
    missing = props.keys() - fields.keys() - (FAILURE_KEYS if "." not in where else set())
    found = [f"{where}: {name} in the schema, not in {record.__name__}" for name in missing]
    found += [f"{where}: {name} of {record.__name__} not in the schema" for name in fields.keys() - props.keys()]
    for name in fields.keys() & props.keys():
        written, annotation = fields[name]
        if issubclass(record, ReportRecord) and written != (name in required) and (where, name) not in LOOSER:
            found.append(
                f"{where}.{name}: {'always written' if written else 'left out when None'} by the record, "
                f"{'required' if name in required else 'optional'} in the schema"
            )
        ours, theirs = json_types(annotation), schema_types(props[name])
        ours = ours if ours is None or written else ours - {"null"}  # a key left out when None is never null
        if ours is not None and theirs is not None and not _agree(ours, theirs):
            found.append(f"{where}.{name}: {sorted(ours)} in {record.__name__}, {sorted(theirs)} in the schema")
        for inner in records_in(annotation):
            found += disagreements(inner, branch_for(inner, props[name]), f"{where}.{name}")
    return found


def _agree(ours: set[str], theirs: set[str]) -> bool:
    """The same types; a number may also be null in the schema (a NaN figure is written as null)."""
    return ours == theirs or ("number" in ours and ours | {"null"} == theirs)


@pytest.mark.parametrize(
    ("record", "definition"),
    [(InfoResult, "info"), (EvaluateResult, "evaluate"), (MonitorResult, "monitor"), (PredictResult, "predict")],
)
def test_result_types_and_schema_agree_field_by_field(record: type, definition: str) -> None:
    assert disagreements(record, SCHEMA["$defs"][definition], definition) == []


def test_the_agreement_check_finds_a_difference() -> None:
    """The check itself fails where the two differ: a key the record lacks, a type it writes otherwise."""
    changed = json.loads(json.dumps(SCHEMA["$defs"]["binary_split"]))
    changed["properties"]["brand_new"] = {"type": "integer"}
    changed["properties"]["tp"] = {"type": "string"}
    from dmocli.report import BinarySplit

    found = disagreements(BinarySplit, changed, "binary_split")
    assert any("brand_new" in problem for problem in found) and any(".tp:" in problem for problem in found)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    make_binary_frame(n=1200, d=3, pos_frac=0.2, seed=1).to_parquet(root / "train.parquet")
    holdout = make_binary_frame(n=600, d=3, pos_frac=0.2, seed=2)
    holdout.to_parquet(root / "holdout.parquet")
    holdout.assign(label=0).to_parquet(root / "no_positives.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.7, seed=0, val_frac=0.3), output=root / "m.st")
    return root


def test_real_results_validate_and_are_what_the_commands_print(trained: Path, dmo) -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    model, holdout = trained / "m.st", trained / "holdout.parquet"
    info = model_info(model, features=True)
    result = evaluation(model, holdout, gate=True)
    for report in (info.to_dict(), result.to_dict()):
        assert [error.message for error in validator.iter_errors(report)] == []
    assert result.gate is not None and result.to_dict()["gate"]["passed"] is result.gate.passed
    code, out, _ = dmo("evaluate", model, holdout, "--gate", "--json")
    printed = json.loads(out)
    assert {k: v for k, v in printed.items() if k not in STAMPS} == {
        k: v for k, v in json.loads(json.dumps(result.to_dict())).items() if k not in STAMPS
    }
    code, out, _ = dmo("evaluate", model, holdout, "--gate")
    assert out.splitlines() == result.lines() and code == 0
    code, out, _ = dmo("info", model)
    assert out.splitlines() == model_info(model).lines()
    assert json.loads(dmo("info", model, "--json")[1]) == json.loads(json.dumps(model_info(model).to_dict()))
    assert isinstance(pd.DataFrame(info.to_dict()["importance"]["columns"]), pd.DataFrame)


def test_a_monitor_result_validates_and_is_what_the_command_prints(trained: Path, dmo) -> None:
    """Chunked, labeled rows (every optional section written: realized, drift, chunks): the result validates, its
    `to_dict` is the --json report and its `lines` the summary."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    model, new = trained / "m.st", trained / "chunked.parquet"
    pd.read_parquet(trained / "holdout.parquet").assign(week=lambda f: f.index % 3).to_parquet(new)
    result = monitor(model, new, chunk_col="week")
    report = result.to_dict()
    assert [error.message for error in validator.iter_errors(report)] == []
    assert report["realized"]["rows"] == 600 and len(report["chunks"]) == 3 and report["drift"]
    assert report["reference_rate"] == {"source": "training", "rate": result.training_rate, "interval": ANY_PAIR}
    code, out, _ = dmo("monitor", model, new, "--chunk-col", "week", "--json")
    printed = json.loads(out)
    assert {k: v for k, v in printed.items() if k not in STAMPS} == {
        k: v for k, v in json.loads(json.dumps(report)).items() if k not in STAMPS
    }
    code, out, _ = dmo("monitor", model, new, "--chunk-col", "week")
    assert out.splitlines() == result.lines() and code == 0


def test_a_predict_result_validates_and_is_what_the_command_prints(trained: Path, dmo) -> None:
    """Rows with an unseen level (so the drift fields and a warning are written): the result validates, its
    `to_dict` is the --json report and dmocli.predict's, its `lines` the summary (on stderr, after the warnings,
    where the predictions take standard output)."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    rows = make_binary_frame(n=600, d=2, pos_frac=0.3, seed=3).assign(colour=["red", "blue"] * 300)
    rows.to_parquet(trained / "coloured.parquet")
    model, new, output = trained / "coloured.st", trained / "new_colours.parquet", trained / "p.csv"
    train(trained / "coloured.parquet", TrainOptions(seed=0), output=model)
    rows.drop(columns="label").assign(colour=["red", "green"] * 300).to_parquet(new)
    result = predict(model, new, output)
    report = result.to_dict()
    assert [error.message for error in validator.iter_errors(report)] == []
    assert result.rows == 600 and result.levels.unseen_levels == {"colour": 300} and len(result.warnings) == 1
    assert result.lines() == [f"wrote 600 predictions to {output}"]
    assert _untimed(dmocli.predict(model, new, output)) == _untimed(report)
    code, out, err = dmo("predict", model, new, "-o", output, "--json")
    assert code == 0 and _untimed(json.loads(out)) == _untimed(report)
    assert err.splitlines() == [f"dmo: warning: {result.warnings[0]}"]
    code, out, err = dmo("predict", model, new, "-o", output)
    assert out.splitlines() == result.lines() and code == 0
    code, out, err = dmo("predict", model, new, "-o", "-")
    assert err.splitlines() == [f"dmo: warning: {result.warnings[0]}", "wrote 600 predictions to standard output"]
    assert code == 0 and len(out.splitlines()) == 601  # the header and a row each


def _untimed(report: dict[str, Any]) -> dict[str, Any]:
    """A report as JSON reads it back, without its run time and time of writing."""
    return {key: value for key, value in json.loads(json.dumps(report)).items() if key not in STAMPS}


class _Pair:
    """Equal to any [low, high] interval within [0, 1]."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, list) and len(other) == 2 and 0 <= other[0] <= other[1] <= 1


ANY_PAIR = _Pair()
