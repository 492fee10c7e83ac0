"""The report's typed parts (dmocli/pipelines/report_parts.py): every key a part writes is one the report schema
declares for its command, with a value the schema admits; a key written twice is refused; and the model file's
`info` after `dmo threshold` is rebuilt by one function for binary and multi-class models, which the tests check
against the threshold report's own figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_binary_frame, make_gaussian_classes
from jsonschema import Draft202012Validator

import dmocli
from dmocli.models.modelfile import load_model
from dmocli.operating_point.calibration import fit_platt
from dmocli.operating_point.class_offsets import ClassProblem
from dmocli.operating_point.problems import Problem
from dmocli.pipelines.cross_fit import CrossFitted, cv_report
from dmocli.pipelines.multiclass import multiclass_cv_report, settle_classes
from dmocli.pipelines.report_parts import (
    BinaryCvSection,
    CalibrationSection,
    SplitsSection,
    TrainingRunSection,
    assemble,
)
from dmocli.pipelines.saving import retargeted_info
from dmocli.pipelines.thresholding import Asked, FitDetails, settle_threshold
from dmocli.report import model_summary

SCHEMA = dmocli.report_schema()


def declared_keys(name: str) -> dict[str, Any]:
    """The properties definition `name` declares, with those of the definitions its allOf refers to."""
    definition = SCHEMA["$defs"][name]
    keys = dict(definition.get("properties", {}))
    for ref in definition.get("allOf", []):
        if "$ref" in ref:
            keys = {**declared_keys(ref["$ref"].rsplit("/", 1)[-1]), **keys}
    return keys


def schema_problems(command: str, section: dict[str, Any]) -> list[str]:
    """What the schema of `command`'s report says against the keys of `section`: keys it does not declare, and
    values its declaration refuses."""
    declared = declared_keys(command)
    found = [f"{key}: not a key of the {command} report" for key in section if key not in declared]
    for key, value in section.items():
        if key in declared:
            validator = Draft202012Validator({"$defs": SCHEMA["$defs"], **declared[key]})
            found += [f"{key}/{'/'.join(map(str, e.path))}: {e.message[:120]}" for e in validator.iter_errors(value)]
    return found


def binary_scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.2).astype(np.int64)
    return rng.normal(size=n) + 1.5 * y, y


def test_the_binary_train_parts_write_schema_keys_with_values_it_admits() -> None:
    (train, y_train), (val, y_val), (oof, y_oof) = (
        binary_scores(n, seed) for n, seed in ((400, 0), (300, 1), (400, 2))
    )
    problem = Problem("frop", 0.8)
    settled = settle_threshold(
        {"train": train, "val": val, "cv": oof},
        {"train": y_train, "val": y_val, "cv": y_oof},
        # --new-rows 130 (without it, the population: null)
        Asked(problem=problem, confidence=0.9, new_rows=130, allow_infeasible=True),
        FitDetails(own=0.0, adjust=True, held_out_rows=130),  # a solver's own threshold: the splits at it too
    )
    folds = np.arange(y_oof.size) % 3
    crossed = CrossFitted(logits=oof, y=y_oof, folds=folds, seconds=0.5, traces=[])
    point = settled.operating_point.point
    cv = BinaryCvSection(
        folds=cv_report(crossed, problem, 0.9, point.new_rows), transfer="rank", pooled_val=False, oof_threshold=0.1
    )
    run = TrainingRunSection(solver_trace={"epochs": 3}, fit_seconds=1.0, path_fields={"prepass_seconds": 0.2})
    report = assemble("train", *settled.parts(), cv, run, solver="wce")
    assert {"operating_point", "feasible", "before_adjustment", "threshold", "splits", "calibration", "cv"} <= set(
        report
    )
    assert report["operating_point"]["split"] == "cv" and report["operating_point"]["new_rows"] == 130
    assert set(report["splits"]) == {"train", "val", "cv"} and set(report["before_adjustment"]) == {"train", "val"}
    assert report["threshold"] == settled.threshold and report["cv"]["per_fold"][0]["fold"] == 0
    assert schema_problems("train", report) == []


def test_the_multiclass_train_parts_write_schema_keys_with_values_it_admits() -> None:
    frame = make_gaussian_classes(600, seed=3, d=3, sep=1.0)
    rng = np.random.default_rng(4)
    logits = frame[["x0", "x1", "x2"]].to_numpy(np.float64) * np.array([1.0, 0.0, -1.0]) + rng.normal(size=(600, 3))
    y = frame["label"].to_numpy()
    problem = ClassProblem("frop", (0.5, None, 0.5))
    settled = settle_classes(
        {"train": logits[:300], "val": logits[300:]}, {"train": y[:300], "val": y[300:]}, [0, 1, 2], problem=problem
    )
    crossed = CrossFitted(logits=logits, y=y, folds=np.arange(600) % 4, seconds=0.5, traces=[])
    cv = multiclass_cv_report(crossed, [0, 1, 2], pooled_val=True)
    report = assemble("train", *settled.parts(), cv, solver="wce", **settled.problem_fields())
    assert report["problem"] == "frop" and report["target"] == 0.5 and report["threshold"] is None
    assert report["class_operating_point"]["split"] == "val" and report["cv"]["folds"] == 4
    assert schema_problems("train", report) == []


def test_a_part_that_writes_a_key_already_written_is_refused() -> None:
    with pytest.raises(ValueError, match="SplitsSection writes report keys already written: splits, threshold"):
        assemble("train", SplitsSection(threshold=0.5, splits={}), threshold=0.1, splits={})
    with pytest.raises(ValueError, match="CalibrationSection .* calibration"):
        calibration = fit_platt(*binary_scores(200, 5), "val")
        assemble("train", CalibrationSection(calibration=calibration), CalibrationSection(calibration=calibration))


def test_no_calibration_writes_no_key() -> None:
    assert CalibrationSection(calibration=None).to_dict() == {}
    assert "calibration" not in assemble("train", CalibrationSection(calibration=None))


STORED = {
    "seed": 0,
    "confidence": 0.9,
    "new_rows": 100,
    "certified": True,
    "params": {},
    "summary": {"val": {"precision": 0.5}},
    "calibration": {"kind": "stored"},
    "rows": 10,
}
SPLITS = {"data": {"precision": 0.7, "recall": 0.6, "f_beta": 0.65, "n": 5}}


def test_retargeted_info_replaces_the_certificate_and_keeps_the_rest() -> None:
    calibration = fit_platt(*binary_scores(300, 6), "DATA")
    info = retargeted_info(
        STORED,
        confidence=0.95,
        new_rows=None,  # the population value: no new_rows kept
        certified=False,
        fitted_on="DATA",
        splits=SPLITS,
        calibration=calibration,
        calibration_refitted=False,
    )
    assert info["confidence"] == 0.95 and "new_rows" not in info and info["certified"] is False
    assert info["summary"] == model_summary(SPLITS) and info["threshold_fitted_on"] == "DATA"
    assert info["calibration"] == calibration.to_dict() and info["rows"] == 10 and info["seed"] == 0
    keys = list(info)
    assert keys[keys.index("calibration") + 1] == "rows"  # the map keeps its place among training's entries
    unsure = retargeted_info(
        STORED,
        confidence=None,
        new_rows=None,
        certified=True,
        fitted_on="DATA",
        splits=SPLITS,
        calibration=None,
        calibration_refitted=False,
    )
    assert "certified" not in unsure  # no certificate without a confidence
    assert unsure["calibration"] == {"kind": "stored"}  # none refitted: the stored map stays


def test_a_refitted_map_replaces_the_stored_one_even_when_none_was_fitted() -> None:
    info = retargeted_info(
        STORED,
        confidence=None,
        new_rows=None,
        certified=None,
        fitted_on="DATA",
        splits=SPLITS,
        calibration=None,
        calibration_refitted=True,
    )
    assert "calibration" not in info and "new_rows" not in info and "certified" not in info
    calibration = fit_platt(*binary_scores(300, 7), "DATA")
    refitted = retargeted_info(
        STORED,
        confidence=None,
        new_rows=None,
        certified=None,
        fitted_on="DATA",
        splits=SPLITS,
        calibration=calibration,
        calibration_refitted=True,
    )
    assert list(refitted)[-1] == "calibration" and refitted["calibration"] == calibration.to_dict()


@pytest.mark.usefixtures("one_torch_thread")
def test_threshold_writes_the_model_info_its_report_shows_for_binary_and_multiclass(dmo, tmp_path: Path) -> None:
    """`dmo threshold` of a binary and of a multi-class model: the written model's info summarizes the report's
    splits, names where the decision was fitted and holds the certificate of the report's operating point."""
    paths = {name: tmp_path / f"{name}.parquet" for name in ("train", "val", "mc", "mc_val")}
    make_binary_frame(n=500, seed=0).to_parquet(paths["train"])
    make_binary_frame(n=400, seed=1).to_parquet(paths["val"])
    make_gaussian_classes(500, seed=2, d=4, sep=1.0).to_parquet(paths["mc"])
    make_gaussian_classes(400, seed=3, d=4, sep=1.0).to_parquet(paths["mc_val"])
    common = ("--seed", "0")
    trained = {}
    for name, data, extra in (("binary", "train", ()), ("multi", "mc", ("--problem", "multiclass"))):
        trained[name] = tmp_path / f"{name}.safetensors"
        code, _, err = dmo("train", paths[data], *common, *extra, "-o", trained[name])
        assert code == 0, err
    cases = {
        "binary": (trained["binary"], paths["val"], "--problem", "frop", "--target", "0.7", "--confidence", "0.9"),
        "multi": (trained["multi"], paths["mc_val"], "--problem", "frop", "--target", "0.5", "--allow-infeasible"),
    }
    for name, args in cases.items():
        out = tmp_path / f"{name}-moved.safetensors"
        code, stdout, err = dmo("threshold", *args, "-o", out, "--json")
        assert code == 0, err
        report = json.loads(stdout)
        info = load_model(out).info
        assert info["summary"] == model_summary(report["splits"]), name
        assert info["threshold_fitted_on"] == report["data"] == str(args[1])
        assert info["confidence"] == report["confidence"]
        assert info.get("certified") == (report["feasible"] if report["confidence"] is not None else None)
        assert ("new_rows" in info) == (report.get("operating_point", {}).get("new_rows") is not None)
        assert info["calibration"] == (report.get("calibration") or info["calibration"])
        assert schema_problems("threshold", report) == []
