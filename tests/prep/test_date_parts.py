"""Date parts that do not build drift in (issue 46): plain `--dates parts` makes only the parts that recur (month,
day, weekday, hour, minute), `--dates parts,trend` adds the trend (year, days_since) and the model file names it
as such; a part the same in every training row is dropped with one warning; a model file written before the parts
were chosen (no list of them stored) reads and predicts as it did."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import run_dmo
from safetensors.numpy import save_file

import dmocli
from dmocli.models import modelfile
from dmocli.prep.derive import Derivation

RECURRING = ["month", "day", "weekday", "hour", "minute"]
MARCH_WARNING = (
    "created_at.month is the same in every training row (3): dropped; train on rows spanning more than one month "
    "to use it"
)


def dated_frame(start: str, days: int, *, n: int = 300, seed: int = 0, times: bool = True) -> pd.DataFrame:
    """Rows with a timestamp (or a date) written as text, spread over `days` days from `start`, a numeric column
    and a label that leans on the hour and the weekday."""
    rng = np.random.default_rng(seed)
    seconds = rng.integers(0, days * 86400, n) if times else rng.integers(0, days, n) * 86400
    when = pd.Timestamp(start) + pd.to_timedelta(seconds, "s")
    logit = rng.normal(size=n) + 1.5 * (when.hour < 6) + 0.8 * (when.day_of_week >= 5) - 1
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    written = when.strftime("%Y-%m-%d %H:%M:%S" if times else "%Y-%m-%d")
    return pd.DataFrame({"x": rng.normal(size=n) + label, "created_at": written, "label": label})


def survey(frame: pd.DataFrame, mode: str) -> Derivation:
    table = pa.Table.from_pandas(frame[["created_at"]], preserve_index=False)
    derive, problems = Derivation.survey(
        table.schema, lambda cols: table.select(cols).to_batches(max_chunksize=64), exclude=(), dates_mode=mode,
        parse_numbers=False,
    )  # fmt: skip
    assert problems == []
    return derive


def trained(tmp_path: Path, frame: pd.DataFrame, *flags: str, name: str = "m") -> tuple[Path, dict, str]:
    """The model file, report and standard error of `dmo train` on `frame`, in this process."""
    data, model, report = tmp_path / f"{name}.csv", tmp_path / f"{name}.st", tmp_path / f"{name}.json"
    frame.to_csv(data, index=False)
    proc = run_dmo("train", data, "--cv", "0", "--seed", "0", "-o", model, "--report", report, *flags, check=True)
    return model, json.loads(report.read_text()), proc.stderr


def test_plain_parts_recur_and_parts_trend_adds_the_trend(tmp_path):
    frame = dated_frame("2023-06-01", 400)  # over a year's end: every part varies
    plain, trend = survey(frame, "parts"), survey(frame, "parts,trend")
    assert plain.rules[0].outputs == [f"created_at.{p}" for p in RECURRING] and plain.trends() == []
    assert trend.rules[0].outputs == [f"created_at.{p}" for p in ["year", *RECURRING, "days_since"]]
    assert trend.trends() == ["created_at.year", "created_at.days_since"] and trend.warnings() == []

    model, _, _ = trained(tmp_path, frame, "--dates", "parts", name="plain")
    pre = dmocli.load_model(model).preprocessor
    assert pre.numeric == ["x", *(f"created_at.{p}" for p in RECURRING)] and pre.trend_features() == []
    model, _, _ = trained(tmp_path, frame, "--dates", "parts,trend", name="trend")
    pre = dmocli.load_model(model).preprocessor
    assert pre.trend_features() == ["created_at.year", "created_at.days_since"]
    stored = modelfile.read_metadata(model)["preprocessing"]["derive"]["dates"][0]
    assert stored["parts"] == ["year", *RECURRING, "days_since"] and stored["constant"] == {}


@pytest.mark.parametrize("solver", ["wce", "lr"])  # in memory, and the streaming path
def test_a_part_constant_in_training_is_dropped_with_one_warning(tmp_path, solver):
    frame = dated_frame("2024-03-01", 30)  # March only: the month is 3 in every row
    model, report, stderr = trained(tmp_path, frame, "--dates", "parts", "--solver", solver)
    assert stderr.count(MARCH_WARNING) == 1
    assert report["warnings"].count(MARCH_WARNING) == 1
    pre = dmocli.load_model(model).preprocessor
    assert "created_at.month" not in pre.numeric and "created_at.day" in pre.numeric
    stored = modelfile.read_metadata(model)["preprocessing"]["derive"]["dates"][0]
    assert stored["parts"] == ["day", "weekday", "hour", "minute"] and stored["constant"] == {"month": 3.0}
    # a later month scores without the month: nothing of it reaches the model
    april = dated_frame("2024-04-01", 30, seed=1)
    april.to_csv(tmp_path / "april.csv", index=False)
    run_dmo("predict", model, tmp_path / "april.csv", "-o", tmp_path / "p.parquet", check=True)
    assert len(pd.read_parquet(tmp_path / "p.parquet")) == len(april)


def test_dmo_check_names_the_constant_parts_and_the_trend(tmp_path):
    frame = dated_frame("2024-03-01", 30)
    frame.to_csv(tmp_path / "d.csv", index=False)
    proc = run_dmo("check", tmp_path / "d.csv", "--dates", "parts,trend", "--json")
    found = json.loads(proc.stdout)
    both = (
        "created_at.year and created_at.month are the same in every training row (2024, 3): dropped; train on rows "
        "spanning more than one year and month to use them"
    )
    assert proc.returncode == 0 and both in found["warnings"]
    derived = found["columns"]["derived"]["created_at"]
    assert derived["trend"] == ["created_at.days_since"]
    assert derived["constant"] == {"created_at.year": 2024.0, "created_at.month": 3.0}


def test_a_column_with_every_part_constant_gives_no_feature(tmp_path):
    """Dates of one day, no time: month, day and weekday all dropped; the column is no feature, and a file
    without it, or with a value no date, still scores."""
    frame = dated_frame("2024-03-05", 1, times=False)
    model, report, _ = trained(tmp_path, frame, "--dates", "parts")
    warning = next(w for w in report["warnings"] if w.startswith("created_at."))
    assert (
        warning.startswith("created_at.month, created_at.day and created_at.weekday are the same")
        and "(3, 5, 1)" in warning
        and warning.endswith("spanning more than one month, day of the month and day of the week to use them")
    )
    assert modelfile.read_metadata(model)["feature_columns"] == ["x"]
    frame.drop(columns="created_at").to_csv(tmp_path / "no_date.csv", index=False)
    frame.assign(created_at="soon").to_csv(tmp_path / "not_a_date.csv", index=False)
    for name in ("no_date", "not_a_date"):
        run_dmo("predict", model, tmp_path / f"{name}.csv", "-o", tmp_path / f"{name}.parquet", check=True)
    np.testing.assert_array_equal(
        pd.read_parquet(tmp_path / "no_date.parquet")["logit"],
        pd.read_parquet(tmp_path / "not_a_date.parquet")["logit"],
    )


def _rewritten(source: Path, target: Path, edit) -> Path:
    """`source` with its metadata's date rules edited by `edit`, the tensors as they are."""
    stored = modelfile.read_model_file(source)
    meta = json.loads(json.dumps(stored.metadata))
    for rule in meta["preprocessing"]["derive"]["dates"]:
        edit(rule)
    save_file(dict(stored.tensors), str(target), metadata={modelfile.METADATA_KEY: json.dumps(meta)})
    return target


@pytest.mark.parametrize("kind", ["linear", "gbdt"])
def test_a_model_file_from_before_the_parts_were_chosen_predicts_as_before(tmp_path, kind):
    """Before this change `--dates parts` made year, days_since and every other part, and stored the rule without
    `parts` or `constant`. Such a file (made here by taking the two keys out of a model of those very parts) reads
    every part, the trend named as such, and scores and explains row for row as the file it was made from."""
    if kind == "gbdt":
        pytest.importorskip("xgboost")
    frame = dated_frame("2023-06-01", 400, seed=2)
    model, _, _ = trained(tmp_path, frame, "--dates", "parts,trend", "--model", kind)

    def older(rule: dict) -> None:
        assert rule.pop("parts") == ["year", *RECURRING, "days_since"] and rule.pop("constant") == {}

    old = _rewritten(model, tmp_path / "old.st", older)
    rule = dmocli.load_model(old).preprocessor.derive.rules[0]
    assert rule.parts is None and rule.outputs == [f"created_at.{p}" for p in ["year", *RECURRING, "days_since"]]
    assert dmocli.load_model(old).preprocessor.trend_features() == ["created_at.year", "created_at.days_since"]
    data = tmp_path / "m.csv"
    for path, out in ((model, "new.parquet"), (old, "old.parquet")):
        run_dmo("predict", path, data, "-o", tmp_path / out, "--explain", "3", check=True)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "new.parquet"), pd.read_parquet(tmp_path / "old.parquet"))


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda rule: rule.update(parts=["hour", "month"]), "malformed parts"),  # out of order
        (lambda rule: rule.update(parts=["month", "fortnight"]), "malformed parts"),
        (lambda rule: rule.update(constant={"month": "3"}), "malformed constant parts"),
        (lambda rule: rule.update(constant={"day": 5.0}), "malformed constant parts"),  # a part also kept
    ],
)
def test_malformed_stored_parts_are_refused_on_load(tmp_path, edit, words):
    model, _, _ = trained(tmp_path, dated_frame("2024-03-01", 30), "--dates", "parts")
    bad = _rewritten(model, tmp_path / "bad.st", edit)
    proc = run_dmo("predict", bad, tmp_path / "m.csv", "-o", tmp_path / "p.parquet")
    assert proc.returncode == 2 and "corrupt or inconsistent dmo metadata" in proc.stderr and words in proc.stderr
