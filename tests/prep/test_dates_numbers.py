"""--dates parts and --parse-numbers: formats read against hand-computed values, a messy CSV trained without a
preparation script predicting as a model trained on hand-prepared columns, failing rows named (exit 2), the stored
rules applied by predict with no flag, and the streaming and Dask paths."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import run_dmo

from dmocli.models.modelfile import read_metadata
from dmocli.prep import dates, human_numbers
from dmocli.prep.derive import Derivation


def test_date_formats_read_to_hand_computed_instants():
    cells = [
        "2024-01-31",  # ISO
        "2024/02/29 23:59:59",  # leap day, with seconds
        "29/02/2024 1:05 PM",  # numeric, read day first below; 12-hour clock
        "5 Mar 24",  # month name, two-digit year
        "March 5, 2024 08:00",
        "2024-01-31T10:00:00+01:00",  # offset: 09:00 UTC
        "2024-01-31T10:00:00.25Z",
        "31.12.69",  # 69 is 1969 (POSIX)
    ]
    expected = [
        dt.datetime(2024, 1, 31),
        dt.datetime(2024, 2, 29, 23, 59, 59),
        dt.datetime(2024, 2, 29, 13, 5),
        dt.datetime(2024, 3, 5),
        dt.datetime(2024, 3, 5, 8, 0),
        dt.datetime(2024, 1, 31, 9, 0),
        dt.datetime(2024, 1, 31, 10, 0, 0, 250000),
        dt.datetime(1969, 12, 31),
    ]
    micros, ok = dates.instants(dates.read_text(pa.array(cells)), dates.DAY_FIRST)
    epoch = dt.datetime(1970, 1, 1)
    assert ok.all()
    assert micros.tolist() == [(e - epoch) // dt.timedelta(microseconds=1) for e in expected]


def test_impossible_dates_do_not_read():
    cells = ["2023-02-29", "31/04/2024", "2024-13-01", "25:00 2024-01-01", "yesterday", "2024-01-01 24:00"]
    _, ok = dates.instants(dates.read_text(pa.array(cells)), dates.DAY_FIRST)
    assert not ok.any()


def test_parts_of_a_typed_timestamp_equal_those_of_its_text():
    when = [dt.datetime(2024, 1, 31, 9, 30), dt.datetime(2023, 7, 4, 23, 5)]
    typed = dates.typed_instants(pa.array(when, pa.timestamp("ms", tz="UTC")))
    text = dates.instants(dates.read_text(pa.array(["2024-01-31T10:30+01:00", "07/04/2023 11:05 PM"])), "month-first")
    assert typed[0].tolist() == text[0].tolist()
    parts = dates.parts(*text, with_time=True, reference_day=dates.day_number("2023-07-01"))
    # 2024-01-31 is a Wednesday (2), 2023-07-04 a Tuesday (1); 214 days from 2023-07-01 to 2024-01-31
    assert (
        parts["weekday"].tolist() == [2, 1]
        and parts["hour"].tolist() == [9, 23]
        and parts["minute"].tolist() == [30, 5]
    )
    assert parts["days_since"].tolist() == pytest.approx([214 + 9.5 / 24, 3 + (23 * 60 + 5) / 1440])
    assert (
        parts["year"].tolist() == [2024, 2023]
        and parts["month"].tolist() == [1, 7]
        and parts["day"].tolist() == [31, 4]
    )


@pytest.mark.parametrize(
    ("cell", "decimal", "value"),
    [
        ("$1,234.50", ".", 1234.5),
        ("1.234,50 EUR", ",", 1234.5),
        ("12%", ".", 0.12),
        ("12,5 %", ",", 0.125),
        ("(300)", ".", -300.0),
        ("-$5", ".", -5.0),
        ("€ 1 234,5", ",", 1234.5),
        ("1'234.5", ".", 1234.5),
        ("USD 10", ".", 10.0),
    ],
)
def test_numbers_written_for_people(cell, decimal, value):
    values, ok = human_numbers.read_text(pa.array([cell])).values(decimal)
    assert ok[0] and values[0] == pytest.approx(value)


def _survey(column: list, *, dates_mode="parts", parse_numbers=True) -> tuple[Derivation, list[str]]:
    table = pa.table({"c": column})
    return Derivation.survey(
        table.schema,
        lambda cols: table.select(cols).to_batches(max_chunksize=3),
        exclude=(),
        dates_mode=dates_mode,
        parse_numbers=parse_numbers,
    )


def test_the_decimal_mark_and_the_day_order_are_decided_by_the_whole_column():
    derive, problems = _survey(["1.234,50", "7", "12"])  # the comma shows in the first cell only
    assert problems == [] and derive.rules[0].decimal == ","
    derive, problems = _survey(["1,234", "2,500"])  # only thousands: a decimal point
    assert problems == [] and derive.rules[0].decimal == "."
    derive, problems = _survey(["01/02/2024", "03/04/2024", "13/04/2024"])  # 13 is a day: day first, all rows
    assert problems == [] and derive.rules[0].order == dates.DAY_FIRST
    assert derive.apply(pa.table({"c": ["01/02/2024"]})).column("c.month").to_pylist() == [2.0]


def test_undecidable_and_mixed_columns_are_refused_with_their_rows():
    _, problems = _survey(["01/02/2024", "03/04/2024"])
    assert len(problems) == 1 and "no date tells whether the day or the month" in problems[0]
    assert "data rows 1 '01/02/2024', 2 '03/04/2024'" in problems[0]
    _, problems = _survey(["13/01/2024", "01/13/2024", "2024-01-01"])
    assert "day first (data row 1 '13/01/2024') and month first (data row 2 '01/13/2024')" in problems[0]
    _, problems = _survey(["1.500", "2.250"])
    assert "whether '.' is a decimal point or a thousands separator" in problems[0]
    _, problems = _survey(["$1,234.50", "12,5", "3"])
    assert "decimal point (data row 1 '$1,234.50') and a decimal comma (data row 2 '12,5')" in problems[0]
    _, problems = _survey(["$5", "6 EUR", "7"])
    assert "several currencies" in problems[0] and "USD (data row 1 '$5')" in problems[0]


def messy_frame(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same rows twice: as a user's export (dates in four formats, amounts with currency and thousands, all in
    2023) and prepared by hand, the columns `--dates parts,trend` derives (same names, same order; the year, the
    same in every row, is dropped) computed with pandas."""
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 365 * 24 * 60, n), unit="min")
    amount = np.round(rng.lognormal(5, 1.2, n), 2)
    x = rng.normal(size=n)
    logit = 1.5 * (when.hour < 6) + 0.01 * (amount - 150) + x + 0.8 * (when.day_of_week >= 5) - 1
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    formats = ["%Y-%m-%d %H:%M", "%d/%m/%Y %H:%M", "%d %b %Y %H:%M", "%Y-%m-%dT%H:%M:00Z"]
    written = [t.strftime(formats[i % 4]) for i, t in enumerate(when)]
    money = [f"${a:,.2f}" if i % 2 else f"{a:,.2f} USD" for i, a in enumerate(amount)]
    messy = pd.DataFrame({"when": written, "amount": money, "x": x, "label": label})
    reference = when.normalize().min()
    hand = pd.DataFrame(
        {
            "when.month": when.month,
            "when.day": when.day,
            "when.weekday": when.day_of_week,
            "when.hour": when.hour,
            "when.minute": when.minute,
            "when.days_since": (when - reference) / pd.Timedelta(days=1),
            "amount": amount,
            "x": x,
            "label": label,
        }
    )
    hand.attrs["when"], hand.attrs["reference"] = when, str(reference.date())
    return messy, hand


@pytest.mark.parametrize(("model", "mode"), [("linear", "parts"), ("gbdt", "parts"), ("linear", "parts,trend")])
def test_the_messy_file_predicts_as_the_hand_prepared_one(tmp_path, model, mode, one_torch_thread):
    """Plain parts are the recurring ones; parts,trend adds days_since (the year, 2023 in every row, dropped)."""
    if model == "gbdt":
        pytest.importorskip("xgboost")
    messy, hand = messy_frame(400, seed=1)
    reference = hand.attrs["reference"]
    if mode == "parts":
        hand = hand.drop(columns="when.days_since")
    messy.to_csv(tmp_path / "messy.csv", index=False)
    hand.to_csv(tmp_path / "hand.csv", index=False)
    common = ["--model", model, "--seed", "3", "--cv", "0"]
    run_dmo(
        "train",
        tmp_path / "messy.csv",
        "--dates",
        mode,
        "--parse-numbers",
        *common,
        "-o",
        tmp_path / "m.dmo",
        check=True,
    )
    run_dmo("train", tmp_path / "hand.csv", *common, "-o", tmp_path / "h.dmo", check=True)
    # no flag at predict: the model file carries the rules
    run_dmo("predict", tmp_path / "m.dmo", tmp_path / "messy.csv", "-o", tmp_path / "m.parquet", check=True)
    run_dmo("predict", tmp_path / "h.dmo", tmp_path / "hand.csv", "-o", tmp_path / "h.parquet", check=True)
    derived, by_hand = pd.read_parquet(tmp_path / "m.parquet"), pd.read_parquet(tmp_path / "h.parquet")
    assert (derived["decision"] == by_hand["decision"]).all()
    np.testing.assert_allclose(derived["logit"], by_hand["logit"], rtol=0, atol=1e-6)
    stored = read_metadata(tmp_path / "m.dmo")
    assert stored["feature_columns"] == ["when", "amount", "x"]
    trend = mode == "parts,trend"
    assert stored["preprocessing"]["derive"]["dates"][0] == {
        "column": "when",
        "order": "day-first",
        "with_time": True,
        "reference": reference,
        "parts": ["month", "day", "weekday", "hour", "minute", *(["days_since"] if trend else [])],
        "constant": {"year": 2023.0} if trend else {},
    }
    evaluated = json.loads(run_dmo("evaluate", tmp_path / "m.dmo", tmp_path / "messy.csv", "--json", check=True).stdout)
    assert evaluated["splits"]["data"]["n"] == 400


def test_predict_reads_the_dates_typed_as_it_read_them_written(tmp_path):
    """A parquet file of typed timestamps scores as the CSV of the same instants written as text."""
    messy, hand = messy_frame(200, seed=2)
    messy.to_csv(tmp_path / "messy.csv", index=False)
    run_dmo(
        "train",
        tmp_path / "messy.csv",
        "--dates",
        "parts",
        "--parse-numbers",
        "--cv",
        "0",
        "-o",
        tmp_path / "m.dmo",
        check=True,
    )
    typed = messy.assign(when=hand.attrs["when"].tz_localize("UTC"), amount=hand["amount"])
    typed.to_parquet(tmp_path / "typed.parquet")
    run_dmo("predict", tmp_path / "m.dmo", tmp_path / "messy.csv", "-o", tmp_path / "a.parquet", check=True)
    run_dmo("predict", tmp_path / "m.dmo", tmp_path / "typed.parquet", "-o", tmp_path / "b.parquet", check=True)
    np.testing.assert_array_equal(
        pd.read_parquet(tmp_path / "a.parquet")["logit"], pd.read_parquet(tmp_path / "b.parquet")["logit"]
    )


def test_rows_that_do_not_read_are_named_with_exit_2(tmp_path):
    messy, _ = messy_frame(60, seed=3)
    messy.loc[4, "when"] = "31/02/2024"
    messy.loc[9, "when"] = "soon"
    messy.loc[7, "amount"] = "$12..5"
    messy.to_csv(tmp_path / "bad.csv", index=False)
    for command in ("check", "train"):
        proc = run_dmo(command, tmp_path / "bad.csv", "--dates", "parts", "--parse-numbers", "-o", tmp_path / "m.dmo")
        text = proc.stdout + proc.stderr
        assert proc.returncode == 2, text
        assert "column 'when': 2 value(s) are not dates" in text and "data rows 5 '31/02/2024', 10 'soon'" in text
        assert "column 'amount': 1 value(s) are not numbers" in text and "data row 8 '$12..5'" in text
    assert not (tmp_path / "m.dmo").exists()


def test_predict_refuses_a_value_it_cannot_read(tmp_path):
    messy, _ = messy_frame(100, seed=4)
    messy.to_csv(tmp_path / "messy.csv", index=False)
    run_dmo(
        "train",
        tmp_path / "messy.csv",
        "--dates",
        "parts",
        "--parse-numbers",
        "--cv",
        "0",
        "-o",
        tmp_path / "m.dmo",
        check=True,
    )
    new = messy.head(3).assign(amount=["$5", "five", "$7"])
    new.to_csv(tmp_path / "new.csv", index=False)
    proc = run_dmo("predict", tmp_path / "m.dmo", tmp_path / "new.csv", "-o", tmp_path / "p.parquet")
    assert proc.returncode == 2 and "column 'amount' holds 1 value(s) that are not numbers" in proc.stderr
    assert "'five'" in proc.stderr


def test_without_the_flags_the_columns_are_refused_with_the_flag_to_use(tmp_path):
    messy, _ = messy_frame(100, seed=5)
    messy.to_csv(tmp_path / "messy.csv", index=False)
    proc = run_dmo("check", tmp_path / "messy.csv")
    assert proc.returncode == 2 and "--dates parts" in proc.stdout and "--parse-numbers" in proc.stdout


def test_a_malformed_stored_rule_is_refused_on_load(tmp_path):
    from dmocli.models.modelfile import load_model

    messy, _ = messy_frame(100, seed=6)
    messy.to_csv(tmp_path / "messy.csv", index=False)
    run_dmo(
        "train",
        tmp_path / "messy.csv",
        "--dates",
        "parts",
        "--parse-numbers",
        "--cv",
        "0",
        "-o",
        tmp_path / "m.dmo",
        check=True,
    )
    model = load_model(tmp_path / "m.dmo")
    model.preprocessor.derive.rules[0].reference = "last year"
    model.save(tmp_path / "bad.dmo")
    proc = run_dmo("predict", tmp_path / "bad.dmo", tmp_path / "messy.csv", "-o", tmp_path / "p.parquet")
    assert proc.returncode == 2 and "corrupt or inconsistent dmo metadata" in proc.stderr and "last year" in proc.stderr


def test_streaming_training_derives_the_same_columns(tmp_path):
    messy, _ = messy_frame(300, seed=7)
    messy.to_csv(tmp_path / "messy.csv", index=False)
    run_dmo(
        "train",
        tmp_path / "messy.csv",
        "--dates",
        "parts",
        "--parse-numbers",
        "--solver",
        "lr",
        "-o",
        tmp_path / "s.dmo",
        check=True,
    )
    run_dmo(
        "train",
        tmp_path / "messy.csv",
        "--dates",
        "parts",
        "--parse-numbers",
        "--cv",
        "0",
        "-o",
        tmp_path / "m.dmo",
        check=True,
    )
    streamed, in_memory = (
        read_metadata(tmp_path / "s.dmo")["preprocessing"],
        read_metadata(tmp_path / "m.dmo")["preprocessing"],
    )
    assert streamed["derive"] == in_memory["derive"] and streamed["numeric"] == in_memory["numeric"]
    np.testing.assert_allclose(streamed["mean"], in_memory["mean"], rtol=1e-9)
    run_dmo("predict", tmp_path / "s.dmo", tmp_path / "messy.csv", "-o", tmp_path / "p.parquet", check=True)
    assert len(pd.read_parquet(tmp_path / "p.parquet")) == 300


@pytest.mark.slow
def test_dask_trees_derive_on_the_workers_as_one_process_does(tmp_path, dask_processes):
    """Parquet files of typed timestamps and amounts as text, trained on a 2-worker cluster: the stored rules are
    the one-process ones, and the model scores the file as a model trained on the same rows in one process."""
    pytest.importorskip("xgboost")
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(2):
        messy, hand = messy_frame(500, seed=10 + i)
        messy.assign(when=hand.attrs["when"].tz_localize("UTC")).to_parquet(parts / f"part-{i}.parquet")
    run_dmo("train", parts, "--model", "gbdt", "--engine", "dask", "--scheduler", dask_processes,
            "--dates", "parts", "--parse-numbers", "-o", tmp_path / "dask.dmo", check=True)  # fmt: skip
    run_dmo("train", parts, "--model", "gbdt", "--dates", "parts", "--parse-numbers", "--cv", "0",
            "-o", tmp_path / "local.dmo", check=True)  # fmt: skip
    on_dask, local = (read_metadata(tmp_path / f"{n}.dmo")["preprocessing"] for n in ("dask", "local"))
    assert on_dask["derive"] == local["derive"] and on_dask["numeric"] == local["numeric"]
    assert on_dask["derive"]["numbers"] == [{"column": "amount", "decimal": ".", "currency": "USD", "percent": False}]
    proc = run_dmo("evaluate", tmp_path / "dask.dmo", parts / "part-0.parquet", "--json", check=True)
    assert json.loads(proc.stdout)["splits"]["data"]["average_precision"] > 0.6
