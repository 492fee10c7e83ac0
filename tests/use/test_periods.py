"""`dmo monitor --time-col COL --every day|week|month|Nd` (issue 46): each row's period named by its first day,
checked against pandas' own periods of the same timestamps, on either engine, with rows of no time apart."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import make_binary_frame

from dmocli.errors import DmoError
from dmocli.prep.periods import MISSING_TIME, Every, Periods

STAMPS = pd.date_range("2023-12-20", "2024-04-10 23:00", freq="7h")  # across a year end, a leap day, months


def pandas_starts(stamps: pd.DatetimeIndex, every: str) -> np.ndarray:
    """Each stamp's period start by pandas: to_period for day, week (W-SUN: weeks Monday to Sunday) and month;
    resample with origin="epoch" for N days."""
    if every.endswith("d") and every[:-1].isdigit():
        bins = pd.Series(1, index=stamps).resample(f"{every[:-1]}D", origin="epoch").sum().index.values
        return np.datetime_as_string(bins[np.searchsorted(bins, stamps.values, side="right") - 1], unit="D")
    freq = {"day": "D", "week": "W-SUN", "month": "M"}[every]
    return np.asarray(stamps.to_period(freq).start_time.strftime("%Y-%m-%d"))


@pytest.mark.parametrize("every", ["day", "week", "month", "3d", "7d"])
@pytest.mark.parametrize("written", ["typed", "iso text", "day-first text"])
def test_period_keys_match_pandas(every, written):
    values = {
        "typed": pa.array(STAMPS.values.astype("datetime64[us]")),
        "iso text": pa.array(STAMPS.strftime("%Y-%m-%dT%H:%M").tolist()),
        "day-first text": pa.array(STAMPS.strftime("%d/%m/%Y %H:%M").tolist()),
    }[written]
    keys = Periods("t", Every.parse(every)).keys(pa.table({"t": values}))
    assert keys.names.tolist() == pandas_starts(STAMPS, every).tolist()


def test_a_week_is_named_by_its_monday():
    table = pa.table({"t": ["2026-03-02", "2026-03-08", "2026-03-09"]})  # Monday, Sunday, the next Monday
    assert Periods("t", Every.parse("week")).keys(table).names.tolist() == ["2026-03-02", "2026-03-02", "2026-03-09"]


def test_rows_without_a_time_are_their_own_section():
    table = pa.table({"t": ["2026-03-02", None, "", "not a date", "2026-04-15"]})
    names = Periods("t", Every.parse("month")).keys(table).names.tolist()
    assert names == ["2026-03-01", MISSING_TIME, MISSING_TIME, MISSING_TIME, "2026-04-01"]


@pytest.mark.parametrize("bad", ["fortnight", "0d", "7", "-3d"])
def test_every_refuses_what_is_no_period(bad):
    with pytest.raises(DmoError, match="give day, week, month or a number of days"):
        Every.parse(bad)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """A model, and 2,400 new rows over four months with a timestamp (a few without one), in two parquet files."""
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("periods")
    make_binary_frame(n=2000, d=3, pos_frac=0.3, seed=1).to_parquet(root / "train.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.8, cv=3, seed=0), output=root / "m.st")
    new = make_binary_frame(n=2400, d=3, pos_frac=0.2, seed=2).drop(columns="label")
    rng = np.random.default_rng(3)
    new["created_at"] = (pd.Timestamp("2026-01-01") + pd.to_timedelta(rng.integers(0, 120 * 24, 2400), "h")).strftime(
        "%d/%m/%Y %H:%M"
    )
    new.loc[[5, 1300], "created_at"] = None
    (root / "new").mkdir()
    new.iloc[:1200].to_parquet(root / "new" / "part-0.parquet")
    new.iloc[1200:].to_parquet(root / "new" / "part-1.parquet")
    return root, new


def test_monitor_every_week_in_time_order_with_missing_times_counted(dmo, stream):
    root, new = stream
    code, out, err = dmo(
        "monitor", root / "m.st", root / "new", "--time-col", "created_at", "--every", "week", "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    names = [chunk["chunk"] for chunk in report["chunks"]]
    stamps = pd.to_datetime(new["created_at"], format="%d/%m/%Y %H:%M").dropna()
    expected = pd.Series(pandas_starts(pd.DatetimeIndex(stamps), "week")).value_counts().sort_index()
    assert names == [*expected.index, MISSING_TIME]
    assert [chunk["rows"] for chunk in report["chunks"]] == [*expected.tolist(), 2]
    assert report["chunk_by"] == {"column": "created_at", "rows": None, "every": "week"}
    assert any("2 row(s) of NEW have no readable time in created_at" in warning for warning in report["warnings"])


def test_dask_gives_the_local_periods(dmo, stream, dask_threads):
    root, _ = stream
    asked = ("monitor", root / "m.st", root / "new", "--time-col", "created_at", "--every", "month", "--json")
    code, local, err = dmo(*asked)
    assert code == 0, err
    code, remote, err = dmo(*asked, "--engine", "dask", "--scheduler", dask_threads)
    assert code == 0, err
    local, remote = json.loads(local), json.loads(remote)
    for key in ("wall_seconds", "engine", "written_at"):
        local.pop(key), remote.pop(key)
    assert local == remote


@pytest.mark.parametrize(
    "args, says",
    [
        (("--every", "week"), "--every needs --time-col"),
        (("--time-col", "created_at"), "--time-col needs --every"),
        (("--time-col", "created_at", "--every", "week", "--chunk-size", "100"), "--every makes the sections"),
        (("--time-col", "f0", "--every", "week"), "holds numbers, not dates"),
        (("--time-col", "nope", "--every", "week"), "'nope' is not a column"),
        (("--time-col", "created_at", "--every", "fortnight"), "is not a period"),
    ],
)
def test_refusals_are_one_line(dmo, stream, args, says):
    root, _ = stream
    code, _, err = dmo("monitor", root / "m.st", root / "new", *args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
