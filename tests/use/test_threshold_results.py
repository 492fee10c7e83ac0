"""`dmo threshold`'s typed results (dmocli/use/results/threshold.py) and the report schema's `threshold` definition
say the same shape, by tests/use/test_result_schema.py's field-by-field check (kept there; this module adds the
threshold records beside it, so that several typed commands' tests do not share one file's edits). One definition
describes three records, one a way the operating point moves: a key only some records write is optional in the
schema, and each record's keys are among the definition's. Then every path's real result validates, its `to_dict`
is the report the command prints with --json and writes with --report, and its `lines` the summary."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import make_binary_frame, make_gaussian_classes
from test_result_schema import SCHEMA, disagreements, properties, record_fields

from dmocli import TrainOptions, train
from dmocli.command_options import ThresholdOptions
from dmocli.use.results.threshold import AdaptResult, ClassRefitResult, RefitResult
from dmocli.use.threshold import threshold

RECORDS = (RefitResult, ClassRefitResult, AdaptResult)


def test_the_threshold_records_and_the_schema_agree_field_by_field() -> None:
    keys = {record: record_fields(record) for record in RECORDS}
    every = set().union(*keys.values())
    always_all = set.intersection(*({k for k, (written, _) in fields.items() if written} for fields in keys.values()))
    found = []
    for record in RECORDS:
        for problem in disagreements(record, SCHEMA["$defs"]["threshold"], "threshold"):
            head, _, rest = problem.partition(": ")
            name = rest.split(" ")[0] if head == "threshold" else head.removeprefix("threshold.")
            if name == "wall_seconds":
                continue  # None only until the run is timed, last (test_result_schema.LOOSER says the same)
            if problem.endswith(f"not in {record.__name__}") and name in every:
                continue  # another record writes it
            if "always written by the record, optional in the schema" in problem and name not in always_all:
                continue  # only some records write it: optional in the one definition
            found.append(problem)
    assert found == []
    required = properties(SCHEMA["$defs"]["threshold"])[1]  # the envelope's, label's and problem's included
    assert required == always_all | {"wall_seconds"}  # a key every record writes is required, and only those


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("threshold_results")
    make_binary_frame(n=1500, d=3, pos_frac=0.2, seed=1, sep=2.5).to_parquet(root / "train.parquet")
    make_binary_frame(n=800, d=3, pos_frac=0.2, seed=2, sep=2.5).to_parquet(root / "holdout.parquet")
    make_binary_frame(n=800, d=3, pos_frac=0.3, seed=3, sep=2.5).drop(columns="label").to_parquet(root / "new.parquet")
    classes = make_gaussian_classes(1500, seed=0, d=4, sep=1.5)
    classes.iloc[:1000].to_parquet(root / "mc_train.parquet")
    classes.iloc[1000:].to_parquet(root / "mc_holdout.parquet")
    certified = TrainOptions(problem="fpor", target=0.7, confidence=0.9, seed=0, cv=3)
    train(root / "train.parquet", certified, output=root / "binary.st")
    train(root / "mc_train.parquet", TrainOptions(problem="frop", target=0.5, seed=0, val_frac=0.3),
          output=root / "mc.st")  # fmt: skip
    return {"root": root}


PATHS: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "re-target": ("binary.st", None, {"problem": "frop", "target": 0.6}),
    "re-fit, dropped": ("binary.st", "holdout.parquet", {"no_confidence": True, "allow_train_rows": True}),
    "adapt": ("binary.st", None, {"adapt": "new.parquet", "allow_infeasible": True}),
    "prior, dropped": ("binary.st", None, {"prior": 0.3, "no_confidence": True}),
    "multi-class": ("mc.st", "mc_holdout.parquet", {"allow_infeasible": True}),
}


@pytest.mark.parametrize("path", PATHS)
def test_each_path_validates_and_is_what_the_command_prints(models, dmo, path: str) -> None:
    root = models["root"]
    model, data, asked = PATHS[path]
    kind = {"multi-class": ClassRefitResult, "adapt": AdaptResult, "prior, dropped": AdaptResult}.get(path, RefitResult)
    asked = {key: root / value if key == "adapt" else value for key, value in asked.items()}
    result = threshold(root / model, None if data is None else root / data, ThresholdOptions(**asked),
                       output=root / "api.st", report_path=root / "api.json")  # fmt: skip
    assert isinstance(result, kind)
    report = result.to_dict()
    validator = jsonschema.Draft202012Validator(SCHEMA)
    assert [error.message for error in validator.iter_errors(report)] == []
    assert json.loads(json.dumps(report)) == json.loads((root / "api.json").read_text())  # the report, key for key
    assert list(report) == list(json.loads((root / "api.json").read_text()))  # and in its order
    args = [f"--{key.replace('_', '-')}" + ("" if value is True else f"={value}") for key, value in asked.items()]
    cli = [root / model, *([] if data is None else [root / data]), *args, "-o", root / "cli.st"]
    code, out, err = dmo("threshold", *cli, "--json")
    assert code == 0, err
    printed = json.loads(out)
    same = {"output", "wall_seconds"}
    assert {k: v for k, v in printed.items() if k not in same} == {
        k: v for k, v in json.loads(json.dumps(report)).items() if k not in same
    }
    code, out, _ = dmo("threshold", *cli)
    moved = dataclasses.replace(result, fields=dataclasses.replace(result.fields, output=str(root / "cli.st")))
    assert code == 0 and out.splitlines() == moved.lines()
