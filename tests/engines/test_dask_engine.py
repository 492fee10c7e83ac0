"""The Dask engine of evaluate, threshold and predict: the same results as the local engine, from partitions.

An in-process Dask cluster (threads, started once for this module) keeps these fast; the `dmo` subprocesses
connect to it with --scheduler, as a batch job connects to a real cluster. The local cluster the CLI starts
itself (processes) is covered by the slow subsample test in test_lus.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame, make_gaussian_classes, run_dmo

from dmocli import TrainOptions, train
from dmocli.engines.choice import EngineChoice
from dmocli.errors import DmoError
from dmocli.operating_point.problems import Problem
from dmocli.pipelines.subsample import SubsampleOptions, subsample
from dmocli.use.apply import refit_threshold
from dmocli.use.evaluate import evaluate
from dmocli.use.predict import predict

pytest.importorskip("distributed")


def _parts(folder: Path, frame: pd.DataFrame, files: int = 3) -> Path:
    folder.mkdir()
    for i, chunk in enumerate(np.array_split(np.arange(len(frame)), files)):
        frame.iloc[chunk].to_parquet(folder / f"p{i}.parquet")
    return folder


def _binary_setup(tmp_path: Path) -> tuple[Path, Path]:
    frame = make_binary_frame(1_500, seed=3)
    frame["colour"] = np.where(np.arange(len(frame)) % 3 == 0, "red", "blue")
    frame["id"] = np.arange(len(frame)) * 7
    train_path = tmp_path / "train.parquet"
    frame.iloc[:900].to_parquet(train_path)
    scoring = frame.iloc[900:].copy()
    scoring.loc[scoring.index[::50], "colour"] = "green"  # a level the model never saw: counted per engine alike
    data = _parts(tmp_path / "parts", scoring)
    model = tmp_path / "m.safetensors"
    train(train_path, TrainOptions(problem="fpor", target=0.7, drop=("id",)), output=model)
    return model, data


def test_evaluate_threshold_predict_on_dask_equal_the_local_engine(tmp_path, dask_threads):
    model, data = _binary_setup(tmp_path)
    dask = EngineChoice("dask", scheduler=dask_threads)

    local_eval, dask_eval = evaluate(model, data), evaluate(model, data, engine=dask)
    assert dask_eval["engine"] == "dask" and local_eval["engine"] == "local"
    assert dask_eval["splits"] == local_eval["splits"]  # counts, AP and AUC from every partition's logits
    assert dask_eval["unseen_levels"] == local_eval["unseen_levels"] == {"colour": 12}

    problem = Problem("frop", 0.6)
    local_t = refit_threshold(model, data, problem, tmp_path / "local.safetensors")
    dask_t = refit_threshold(model, data, problem, tmp_path / "dask.safetensors", engine=dask)
    assert dask_t["threshold"] == local_t["threshold"] and dask_t["splits"] == local_t["splits"]

    predict(model, data, tmp_path / "local.parquet", id_col="id")
    report = predict(model, data, tmp_path / "pred", id_col="id", engine=dask)
    parts = sorted(p.name for p in (tmp_path / "pred").iterdir())
    assert parts == [f"part-{i:06d}.parquet" for i in range(3)] and report.rows == 600
    local, distributed = pq.read_table(tmp_path / "local.parquet"), pq.read_table(tmp_path / "pred")
    assert distributed.schema == local.schema and distributed.equals(local)  # same rows, same order, same types
    assert report.levels.unseen_levels == {"colour": 12}

    predict(model, data, tmp_path / "pred", id_col="id", engine=dask)  # a re-run replaces its own parts
    assert pq.read_table(tmp_path / "pred").equals(local)


def test_multiclass_predict_and_the_cli_on_a_running_scheduler(tmp_path, dask_threads):
    frame = make_gaussian_classes(2_000, seed=4, d=5)
    train_path = tmp_path / "train.parquet"
    frame.iloc[:1_000].to_parquet(train_path)
    data = _parts(tmp_path / "parts", frame.iloc[1_000:], files=2)
    model = tmp_path / "m.safetensors"
    train(train_path, TrainOptions(), output=model)  # wce, multi-class

    out, rep = tmp_path / "pred", tmp_path / "r.json"
    run_dmo("predict", model, data, "-o", out, "--engine", "dask", "--scheduler", dask_threads, check=True)
    predict(model, data, tmp_path / "local.parquet")
    assert pq.read_table(out).equals(pq.read_table(tmp_path / "local.parquet"))
    run_dmo("evaluate", model, data, "--engine", "dask", "--scheduler", dask_threads, "--report", rep, check=True)
    dask_report = json.loads(rep.read_text())
    assert dask_report["engine"] == "dask" and dask_report["splits"] == evaluate(model, data)["splits"]


def test_engine_choices_that_cannot_run_are_refused_before_any_work(tmp_path):
    model, data = _binary_setup(tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    csv = tmp_path / "d.csv"
    pd.read_parquet(data).to_csv(csv, index=False)
    dask = EngineChoice("dask")
    cases = [
        (lambda: evaluate(model, data, engine=EngineChoice(scheduler="tcp://127.0.0.1:1")), "add --engine dask"),
        (lambda: evaluate(model, data, engine=EngineChoice("spark")), "--engine 'spark' is not known"),
        (
            lambda: refit_threshold(
                model, data, Problem("ofbs"), tmp_path / "t.st", engine=EngineChoice("dask", workers=0)
            ),
            "--workers 0 must be at least 1",
        ),
        (lambda: predict(model, data, "-", engine=dask), "-o - \\(standard output\\) needs --engine local"),
        (lambda: predict(model, data, folder, engine=dask), "notes.txt"),
        (lambda: evaluate(model, csv, engine=dask), "reads parquet"),
        (lambda: subsample(data, tmp_path / "s.parquet", SubsampleOptions(gamma=2, workers=0)), "--workers 0"),
    ]
    for call, message in cases:
        with pytest.raises(DmoError, match=message):
            call()
    assert (folder / "notes.txt").read_text() == "keep me" and not (tmp_path / "t.st").exists()
    proc = run_dmo("evaluate", model, "-", "--engine", "dask", stdin=csv)  # the CLI: one line, exit 2
    assert proc.returncode == 2 and "not standard input" in proc.stderr and "Traceback" not in proc.stderr


def test_partitions_are_the_local_engines_files_rows_and_types(tmp_path, dask_threads):
    """File order as the local engine sorts names (part10 before part2), hive folders with text values kept
    as text ("007"), and pandas index columns: Dask's own reader changes all three (a review found it)."""
    frame = make_binary_frame(1_200, seed=6)
    frame["id"] = np.random.default_rng(0).permutation(len(frame)) * 3 + 1  # not a range: stored as a column
    frame["store"] = np.array(["007", "010", "2"])[np.arange(len(frame)) % 3]
    hive = tmp_path / "hive"
    for store, rows in frame.groupby("store"):
        rows = rows.drop(columns="store")
        for i, chunk in enumerate(np.array_split(np.arange(len(rows)), 3)):
            folder = hive / f"store={store}"
            folder.mkdir(parents=True, exist_ok=True)
            rows.iloc[chunk].set_index("id").to_parquet(folder / f"part{[1, 2, 10][i]}.parquet")  # a named pandas index
    model = tmp_path / "m.safetensors"
    train(hive, TrainOptions(problem="ofbs", drop=("id",)), output=model)
    dask = EngineChoice("dask", scheduler=dask_threads)
    local_eval, dask_eval = evaluate(model, hive), evaluate(model, hive, engine=dask)
    assert dask_eval["splits"] == local_eval["splits"] and dask_eval["unseen_levels"] == {}
    predict(model, hive, tmp_path / "local.parquet", id_col="store")
    predict(model, hive, tmp_path / "pred", id_col="store", engine=dask)
    assert pq.read_table(tmp_path / "pred").equals(pq.read_table(tmp_path / "local.parquet"))
    predict(model, hive, tmp_path / "local.parquet", id_col="id")
    predict(model, hive, tmp_path / "pred", id_col="id", engine=dask)
    local, distributed = pq.read_table(tmp_path / "local.parquet"), pq.read_table(tmp_path / "pred")
    in_name_order = [
        i for f in sorted(map(str, hive.rglob("*.parquet"))) for i in pq.read_table(f).column("id").to_pylist()
    ]
    assert distributed.equals(local) and local.column("id").to_pylist() == in_name_order


def test_outputs_that_would_swallow_or_hide_the_data_are_refused(tmp_path):
    model, data = _binary_setup(tmp_path)
    dask = EngineChoice("dask")
    with pytest.raises(DmoError, match="inside the -o directory"):  # the re-run would delete its own input
        predict(model, data / "p1.parquet", data, engine=dask)
    with pytest.raises(DmoError, match="inside the DATA directory"):  # the next run would read it as data
        predict(model, data, data / "predictions", engine=dask)
    assert sorted(p.name for p in data.iterdir()) == ["p0.parquet", "p1.parquet", "p2.parquet"]


def test_an_address_that_is_no_scheduler_is_one_clear_error(tmp_path):
    """A web server where the scheduler should be (the dashboard's port, say) must not hang or crash."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer() -> None:
        for _ in range(8):
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n" * 4)
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    model, data = _binary_setup(tmp_path)
    try:
        with pytest.raises(DmoError, match="cannot reach the Dask scheduler"):
            evaluate(model, data, engine=EngineChoice("dask", scheduler=f"tcp://127.0.0.1:{server.getsockname()[1]}"))
    finally:
        server.close()


def test_a_stored_pandas_index_and_an_empty_file_read_as_locally(tmp_path, dask_threads, monkeypatch):
    """Files of one schema written with a pandas index (kept as a column, as locally) and a 0-row file, under a
    multi-class model: a second review found both broke the Dask passes."""
    frame = make_gaussian_classes(1_500, seed=7, d=4)
    frame["id"] = np.random.default_rng(1).permutation(len(frame)) * 5 + 2  # not a range: a stored column
    data = tmp_path / "data"
    data.mkdir()
    for i, chunk in enumerate(np.array_split(np.arange(len(frame)), 2)):
        frame.iloc[chunk].set_index("id").to_parquet(data / f"p{i}.parquet")
    pq.write_table(pq.read_table(data / "p0.parquet").slice(0, 0), data / "p2.parquet")  # same schema, no rows
    model = tmp_path / "m.safetensors"
    train(data, TrainOptions(drop=("id",)), output=model)
    dask = EngineChoice("dask", scheduler=dask_threads)
    assert evaluate(model, data, engine=dask)["splits"] == evaluate(model, data)["splits"]
    predict(model, data, tmp_path / "local.parquet", id_col="id")
    predict(model, data, tmp_path / "pred", id_col="id", engine=dask)
    assert pq.read_table(tmp_path / "pred").equals(pq.read_table(tmp_path / "local.parquet"))
    report = subsample(data, tmp_path / "sub", SubsampleOptions(gamma=3, engine="dask", scheduler=dask_threads))
    kept = pq.read_table(tmp_path / "sub")
    assert kept.num_rows == report["rows_written"] > report["rows_kept"] > 0 and "id" in kept.column_names
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DmoError, match="working directory"):  # the output replaces its directory: not this one
        predict(model, data, ".", engine=dask)
