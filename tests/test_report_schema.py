"""Every command's `--json` report validates against the JSON Schema shipped in the package
(dmocli/schema/report.schema.json), for binary, multi-class and streaming solvers and on exit 3, and the keys
a CI script reads are the same across commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_binary_frame, make_gaussian_classes, run_dmo
from jsonschema import Draft202012Validator

import dmocli
from dmocli.report import SCHEMA_VERSION

SCHEMA = dmocli.report_schema()
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


def problems(report: dict) -> list[str]:
    return [f"{'/'.join(map(str, error.path))}: {error.message[:200]}" for error in VALIDATOR.iter_errors(report)]


def report_of(*args: str | Path, code: int = 0) -> dict:
    """`dmo ARGS --json`: its exit code checked, its stdout parsed and validated against the schema."""
    proc = run_dmo(*args, "--json")
    assert proc.returncode == code, proc.stderr
    report = json.loads(proc.stdout)
    assert problems(report) == [], (args, problems(report))
    assert report["schema_version"] == SCHEMA_VERSION
    return report


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("schema")
    paths = {name: root / f"{name}.parquet" for name in ("train", "val", "multi")}
    make_binary_frame(n=500, seed=0).assign(label=lambda f: f["label"].map({0: "no", 1: "yes"})).to_parquet(
        paths["train"]
    )
    make_binary_frame(n=300, seed=1).assign(label=lambda f: f["label"].map({0: "no", 1: "yes"})).to_parquet(
        paths["val"]
    )
    make_gaussian_classes(400, seed=2, d=4).to_parquet(paths["multi"])
    return {**paths, "root": root}


@pytest.fixture(scope="module")
def binary(files: dict[str, Path]) -> dict:
    """One binary model (fpor, 5-fold cross-fitted threshold) and its train report, shared by the tests below."""
    model = files["root"] / "wce.st"
    report = report_of("train", files["train"], "--problem", "fpor", "--target", "0.6", "-o", model)
    return {"model": model, "report": report}


def test_the_shipped_schema_is_a_valid_draft_2020_12_schema_of_this_version() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["version"] == SCHEMA_VERSION
    commands = {branch["if"]["properties"]["command"]["const"] for branch in SCHEMA["allOf"]}
    assert commands == {
        "train",
        "threshold",
        "evaluate",
        "predict",
        "subsample",
        "extract",
        "solvers",
        "info",
        "check",
        "monitor",
    }


def test_binary_reports_validate_and_share_their_keys(files: dict[str, Path], binary: dict) -> None:
    root, model, refit, train = files["root"], binary["model"], files["root"] / "refit.st", binary["report"]
    evaluate = report_of("evaluate", model, files["val"])
    threshold = report_of("threshold", model, files["val"], "-o", refit)
    predict = report_of("predict", model, files["val"], "-o", root / "p.parquet")
    info = report_of("info", model)
    for report in (train, evaluate, threshold, info):
        assert (report["label_col"], report["classes"], report["positive"]) == ("label", ["no", "yes"], "yes")
        assert report["problem"] == "fpor" and report["target"] == 0.6
    assert train["model"] == str(model) and train["architecture"]["kind"] == "linear"
    assert evaluate["model"] == predict["model"] == info["model"] == threshold["model"] == str(model)
    assert train["val"] is None and train["val_frac"] == 0 and train["cv"]["folds"] == 5
    assert evaluate["threshold"] == train["threshold"] == info["threshold"]
    assert threshold["problem_source"] == "model" and threshold["output"] == str(refit)


def test_val_frac_is_a_number_not_a_sentence(files: dict[str, Path]) -> None:
    report = report_of("train", files["train"], "--val-frac", "0.3", "-o", files["root"] / "frac.st")
    assert report["val"] is None and report["val_frac"] == 0.3 and "val" in report["splits"]


def test_multiclass_reports_validate(files: dict[str, Path]) -> None:
    model = files["root"] / "multi.st"
    train = report_of("train", files["multi"], "-o", model)
    evaluate = report_of("evaluate", model, files["multi"])
    info = report_of("info", model)
    for report in (train, evaluate, info):
        assert report["problem"] == "multiclass" and report["classes"] == [0, 1, 2] and report["positive"] is None
        assert report["threshold"] is None
    assert train["splits"]["train"]["accuracy"] == evaluate["splits"]["data"]["accuracy"]
    assert train["architecture"]["n_outputs"] == 3


def test_streaming_reports_validate(files: dict[str, Path]) -> None:
    model = files["root"] / "fofo.st"
    train = report_of("train", files["train"], "--solver", "fofo", "--val", files["val"], "-o", model)
    assert train["streaming"] is True and train["online"]["n"] == 500 and train["val"] == str(files["val"])
    info = report_of("info", model)
    assert info["training"]["solver"] == "fofo" and info["training"]["rows"] == 500
    report_of("evaluate", model, files["val"])


def test_check_reports_validate_clean_and_refused(files: dict[str, Path], tmp_path: Path) -> None:
    clean = report_of("check", files["train"])
    assert clean["ok"] and clean["problems"] == [] and clean["n_features"] == 4
    messy = tmp_path / "messy.parquet"
    make_binary_frame(n=200, seed=3).assign(f0=lambda f: f["f0"].where(f.index % 7 > 0)).to_parquet(messy)
    refused = report_of("check", messy, code=2)
    assert not refused["ok"] and any("--impute median" in problem for problem in refused["problems"])
    trees = report_of("check", messy, "--model", "gbdt")  # trees take the missing values as they are
    assert trees["ok"]


def test_subsample_reports_validate(files: dict[str, Path]) -> None:
    lus = report_of("subsample", files["multi"], "--gamma", "3", "-o", files["root"] / "lus.parquet")
    uniform = report_of(
        "subsample",
        files["multi"],
        "--gamma",
        "3",
        "--method",
        "uniform",
        "--match-size",
        "-o",
        files["root"] / "u.parquet",
    )
    assert lus["label_col"] == uniform["label_col"] == "label" and "rates" in uniform and "rates" not in lus


def test_solvers_reports_validate() -> None:
    every = report_of("solvers")
    one = report_of("solvers", "ero")
    assert [s["name"] for s in one["solvers"]] == ["ero"] and every["solvers"][0]["name"] == every["default"]


def test_refused_targets_print_a_report_that_validates(files: dict[str, Path], binary: dict) -> None:
    """Exit 3: the report is printed on stdout all the same, with feasible false, and no model is written."""
    model = files["root"] / "never.st"
    args = ["--problem", "fpor", "--target", "0.995", "--confidence", "0.99"]
    train = report_of("train", files["train"], "--val", files["val"], *args, "-o", model, code=3)
    assert train["feasible"] is False and train["model"] is None and not model.exists()
    assert train["operating_point"]["best_achievable"] < 0.995
    trained = binary["model"]
    refit = report_of("threshold", trained, files["val"], *args, "-o", files["root"] / "no.st", code=3)
    assert refit["feasible"] is False and refit["model"] == str(trained) and refit["problem_source"] == "option"


def test_the_schema_refuses_what_a_ci_script_could_not_rely_on(binary: dict) -> None:
    """The checks above could fail: an object where the schema says a path, an undocumented key, a missing
    schema_version are each refused."""
    report = binary["report"]
    assert problems(report) == []
    assert problems({**report, "model": {"kind": "linear"}})
    assert problems({**report, "undocumented": 1})
    assert problems({k: v for k, v in report.items() if k != "schema_version"})
