"""`dmo monitor --engine dask`: NEW scored partition by partition on a real Dask cluster gives the local engine's
report, for all rows and per chunk (a chunk column, and --chunk-size chunks that cross partition boundaries).

An in-process Dask cluster (threads, started once for this module, as in test_dask_engine.py) keeps these fast;
the commands connect to it with --scheduler, as a batch job connects to a real cluster.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame

from dmocli import TrainOptions, report_schema, train
from dmocli.engines.choice import EngineChoice
from dmocli.use.monitor import monitor

pytest.importorskip("distributed")

VOLATILE = {"wall_seconds", "written_at", "engine", "created", "dmocli_version", "timestamp"}


def _with_colour(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return frame.assign(colour=rng.choice(["red", "blue", "green"], len(frame)))


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, Path]:
    """A model with a drift profile, and NEW as three parquet files of unequal size: weeks, a drifted feature, a
    level the model never saw and labels on some rows."""
    root = tmp_path_factory.mktemp("monitor_dask")
    _with_colour(make_binary_frame(3_000, seed=1, pos_frac=0.2), seed=1).to_parquet(root / "train.parquet")
    model = root / "m.safetensors"
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.8, cv=3, seed=0), output=model)
    new = _with_colour(make_binary_frame(2_500, seed=2, pos_frac=0.08), seed=2)
    new["week"] = np.repeat(["2026-03", "2026-01", "2026-02"], [900, 800, 800])
    new.loc[new.week == "2026-02", "f1"] += 1.5  # a feature that moved, in one week
    new.loc[new.index[::97], "colour"] = "violet"  # unseen
    new["label"] = new["label"].astype("float64")
    new.loc[new.index[::3], "label"] = np.nan  # a third of the rows unlabeled
    parts = root / "new"
    parts.mkdir()
    for i, rows in enumerate(np.split(np.arange(len(new)), [1_100, 1_600])):  # 1100, 500, 900 rows
        new.iloc[rows].to_parquet(parts / f"part{i}.parquet")
    return model, parts


def _assert_close(local: Any, dask: Any, where: str = "report") -> None:
    """The same report up to float rounding (scores summed in another order); counts and text exactly."""
    if isinstance(local, dict):
        assert set(local) - VOLATILE == set(dask) - VOLATILE, where
        for key in set(local) - VOLATILE:
            _assert_close(local[key], dask[key], f"{where}.{key}")
    elif isinstance(local, list):
        assert len(local) == len(dask), where
        for i, (a, b) in enumerate(zip(local, dask)):
            _assert_close(a, b, f"{where}[{i}]")
    elif isinstance(local, float) and not isinstance(dask, bool):
        assert math.isclose(local, dask, rel_tol=1e-6, abs_tol=1e-9), (where, local, dask)
    else:
        assert local == dask, (where, local, dask)


@pytest.mark.parametrize(
    "chunks",
    [{}, {"chunk_col": "week"}, {"chunk_size": 700}, {"chunk_col": "week", "chunk_size": 500}],
    ids=["all", "chunk-col", "chunk-size", "both"],
)
def test_monitor_on_dask_gives_the_local_report(setup, dask_threads, chunks):
    model, parts = setup
    local = monitor(model, parts, **chunks).to_dict()
    dask = monitor(model, parts, **chunks, engine=EngineChoice("dask", scheduler=dask_threads)).to_dict()
    assert local["engine"] == "local" and dask["engine"] == "dask"
    jsonschema.validate(dask, report_schema())
    _assert_close(local, dask)
    assert dask["rows"] == 2_500 and dask["realized"]["rows"] == 2_500 - 834
    if chunks == {"chunk_size": 700}:  # 0-699, ..., 2100-2499 across the files' 1100 / 500 / 900 rows
        assert [c["rows"] for c in dask["chunks"]] == [700, 700, 700, 400]
    if chunks == {"chunk_col": "week"}:
        assert [c["chunk"] for c in dask["chunks"]] == ["2026-01", "2026-02", "2026-03"]
        assert dask["chunks"][1]["drift"][0]["name"] == "f1" and dask["chunks"][1]["drift_reasons"]
    colour = next(entry for entry in dask["drift"] if entry["name"] == "colour")
    assert colour["unseen_after"] == len(range(0, 2_500, 97))


def test_the_cli_runs_monitor_on_a_scheduler_and_refuses_what_dask_cannot_read(dmo, setup, dask_threads, tmp_path):
    model, parts = setup
    on_dask = ["--engine", "dask", "--scheduler", dask_threads]
    code, out, err = dmo("monitor", model, parts, *on_dask, "--json")
    assert code == 0, err
    assert json.loads(out)["engine"] == "dask"
    code, out, err = dmo("monitor", model, parts, *on_dask, "--chunk-size", "900")
    assert code == 0 and "chunk 2: rows 700" in out, err
    code, _, err = dmo("monitor", model, parts, *on_dask, "--chunk-col", "f0")
    assert code == 2 and "more than 1000 values" in err and "--chunk-size N" in err, err
    code, _, err = dmo("monitor", model, parts, *on_dask, "--chunk-size", "2")
    assert code == 2 and "more than 1000 chunks" in err and "larger --chunk-size" in err, err
    pd.read_parquet(parts).to_csv(tmp_path / "new.csv", index=False)
    code, _, err = dmo("monitor", model, tmp_path / "new.csv", *on_dask)
    assert code == 2 and "--engine dask reads parquet" in err and "--engine local" in err, err
    code, _, err = dmo("monitor", model, parts, "--scheduler", dask_threads)
    assert code == 2 and "add --engine dask" in err, err
