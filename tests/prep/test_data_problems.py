"""A messy training table's problems all at once (issue 23, points 2, 3 and 5): `dmo train` refuses with every
one of them, `dmo check` lists them or says what train would make of the columns, dates get one fate in every
input format, and text columns are named for what they are (ids, free text, amounts, wide categories)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame, run_dmo
from fraud_scenario import FIX, fraud_frame, write_fraud_csv


def test_the_first_train_on_a_messy_parquet_table_names_every_problem_in_one_line(tmp_path):
    """The parquet twin of the fraud CSV (its dates as text, where the CSV reader types them): the same four."""
    fraud_frame(n=1500).to_parquet(tmp_path / "fraud.parquet")
    proc = run_dmo("train", tmp_path / "fraud.parquet", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "4 problems to fix before training" in proc.stderr
    for fix in ("--label-col is_fraud", "--drop transaction_date", "--drop transaction_id", "--impute median"):
        assert fix in proc.stderr
    assert not (tmp_path / "m.safetensors").exists()


def test_check_lists_the_problems_then_gives_a_clean_bill_that_matches_what_train_does(tmp_path):
    data = write_fraud_csv(tmp_path / "fraud.csv", n=1500)
    messy = run_dmo("check", data, "--json")
    report = json.loads(messy.stdout)
    assert messy.returncode == 2 and report["ok"] is False and len(report["problems"]) == 4
    partly = run_dmo("check", data, "--label-col", "is_fraud", "--drop", "transaction_id")
    assert partly.returncode == 2 and "a problem" not in partly.stdout and "2 problems" in partly.stdout
    clean = run_dmo("check", data, *FIX, "--json")
    bill = json.loads(clean.stdout)
    assert clean.returncode == 0 and bill["ok"] and bill["problems"] == []
    assert bill["classes"] == ["no", "yes"] and bill["positive"] == "yes" and sum(bill["class_counts"]) == 1500
    assert bill["columns"]["categorical"] == {"card_type": 4, "merchant_category": 5}
    trained = run_dmo("train", data, *FIX, "-o", tmp_path / "m.safetensors", "--json", check=True)
    assert json.loads(trained.stdout)["n_features"] == bill["n_features"] == 3 + 4 + 5


def test_check_of_a_bad_option_is_one_line_and_exit_2(tmp_path):
    data = write_fraud_csv(tmp_path / "fraud.csv", n=200)
    proc = run_dmo("check", data, *FIX, "--impute", "mean")
    assert proc.returncode == 2 and "--impute" in proc.stderr and "Traceback" not in proc.stderr


def _dated(tmp_path: Path, kind: str) -> Path:
    """A plain binary table with a `when` column of dates as `kind` writes them."""
    frame = make_binary_frame(n=300, seed=3)
    days = pd.Timestamp("2023-03-01") + pd.to_timedelta(np.arange(300) % 200, unit="D")
    if kind == "parquet-date":
        table = pa.Table.from_pandas(frame).append_column("when", pa.array(days.date, pa.date32()))
        pq.write_table(table, tmp_path / "d.parquet")
        return tmp_path / "d.parquet"
    if kind == "parquet-timestamp":
        frame["when"] = days + pd.to_timedelta(np.arange(300) % 24, unit="h")
        frame.to_parquet(tmp_path / "d.parquet")
        return tmp_path / "d.parquet"
    text = {
        "parquet-text": days.strftime("%Y-%m-%d"),
        "csv-iso": days.strftime("%Y-%m-%d"),
        "csv-timestamp": days.strftime("%Y-%m-%d %H:%M:%S"),
        "csv-us": days.strftime("%m/%d/%Y"),
        "csv-dotted": days.strftime("%d.%m.%Y"),
    }[kind]
    frame["when"] = text
    if kind.startswith("parquet"):
        frame.to_parquet(tmp_path / "d.parquet")
        return tmp_path / "d.parquet"
    frame.to_csv(tmp_path / "d.csv", index=False)
    return tmp_path / "d.csv"


@pytest.mark.parametrize(
    "kind", ["parquet-date", "parquet-timestamp", "parquet-text", "csv-iso", "csv-timestamp", "csv-us", "csv-dotted"]
)
def test_a_date_column_is_refused_with_its_fix_in_every_format(tmp_path, kind):
    proc = run_dmo("check", _dated(tmp_path, kind))
    assert proc.returncode == 2 and "when" in proc.stdout and "hold dates or times" in proc.stdout, proc.stdout
    assert "--drop when" in proc.stdout and "Traceback" not in proc.stderr


def test_a_dropped_date_trains_on_the_other_columns_alone(tmp_path):
    data = _dated(tmp_path, "parquet-text")
    refused = run_dmo("train", data, "-o", tmp_path / "m.safetensors")
    assert refused.returncode == 2 and "--drop when" in refused.stderr
    trained = run_dmo("train", data, "--drop", "when", "-o", tmp_path / "m.safetensors", "--json", check=True)
    assert json.loads(trained.stdout)["n_features"] == 4  # f0..f3, never a level per day


def test_a_medium_cardinality_text_column_is_trained_and_named_with_the_features_it_adds(tmp_path):
    frame = make_binary_frame(n=2000, seed=4)
    frame["shop"] = [f"shop{i % 80:02d}" for i in range(2000)]
    frame["color"] = np.where(frame["f1"] > 0, "red", "blue")
    frame.to_csv(tmp_path / "shops.csv", index=False)
    proc = run_dmo("train", tmp_path / "shops.csv", "-o", tmp_path / "m.safetensors", "--json", check=True)
    report = json.loads(proc.stdout)
    assert report["n_features"] == 4 + 80 + 2
    named = [w for w in report["warnings"] if "'shop'" in w]
    assert len(named) == 1 and "80 one-hot features" in named[0] and "'shop'" in proc.stderr
    assert not any("'color'" in w for w in report["warnings"])


def test_amounts_with_currency_signs_are_called_amounts_not_ids(tmp_path):
    frame = make_binary_frame(n=400, seed=5)
    frame["amount"] = [f"${v:,.2f}" for v in np.abs(frame["f0"]) * 900 + 14.43]
    frame.to_csv(tmp_path / "amounts.csv", index=False)
    proc = run_dmo("check", tmp_path / "amounts.csv")
    assert proc.returncode == 2 and "'amount' holds numbers written as text, such as amounts" in proc.stdout
    assert "'$" in proc.stdout and "an id" not in proc.stdout and "free text" not in proc.stdout


def test_free_text_and_ids_are_told_apart(tmp_path):
    rng = np.random.default_rng(6)
    words = ["card", "was", "declined", "at", "the", "store", "customer", "called", "about", "refund"]
    frame = make_binary_frame(n=300, seed=6)
    frame["note"] = [" ".join(rng.choice(words, size=6)) + f" {i}" for i in range(300)]
    frame["account"] = [f"AC{i:06d}" for i in range(300)]
    frame.to_csv(tmp_path / "notes.csv", index=False)
    proc = run_dmo("train", tmp_path / "notes.csv", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 2 and "2 problems" in proc.stderr
    assert "'note' holds free text" in proc.stderr and "dmo extract --kind text" in proc.stderr
    assert "'account' has 300 distinct values in 300 rows: an id" in proc.stderr


def test_a_trailing_comma_is_named_as_a_trailing_delimiter_not_a_pandas_index(tmp_path):
    lines = make_binary_frame(n=100, seed=7).to_csv(index=False).splitlines()
    (tmp_path / "trailing.csv").write_text("".join(line + ",\n" for line in lines))
    proc = run_dmo("train", tmp_path / "trailing.csv", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 2 and "trailing delimiter" in proc.stderr and "pandas" not in proc.stderr
    indexed = tmp_path / "indexed.csv"
    make_binary_frame(n=100, seed=7).to_csv(indexed)  # the row index under an empty header, first
    proc = run_dmo("train", indexed, "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 2 and "index=False" in proc.stderr and "trailing delimiter" not in proc.stderr


def test_a_streaming_solver_also_names_every_problem_of_the_columns_at_once(tmp_path):
    data = write_fraud_csv(tmp_path / "fraud.csv", n=1500)
    proc = run_dmo("train", data, "--solver", "fofo", "--label-col", "is_fraud", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 2 and "3 problems: (1)" in proc.stderr and "Traceback" not in proc.stderr
    for fix in ("--drop transaction_date", "--drop transaction_id", "--impute median"):
        assert fix in proc.stderr
    run_dmo("train", data, "--solver", "fofo", *FIX, "-o", tmp_path / "m.safetensors", check=True)
