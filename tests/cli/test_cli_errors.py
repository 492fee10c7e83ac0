"""Every bad input: one clear stderr line, exit code 2 (3 for an unreachable target), no traceback, no output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import save_file


def assert_clean_failure(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle.lower() in proc.stderr.lower(), proc.stderr


@pytest.fixture
def trained(tmp_path: Path, binary_parquet: Path) -> Path:
    model = tmp_path / "model.safetensors"
    run_dmo("train", binary_parquet, "--problem", "ofbs", "-o", model, check=True)
    return model


def train_fails(tmp_path: Path, data: Path, *extra: str):
    out = tmp_path / "out.safetensors"
    proc = run_dmo("train", data, "-o", out, *extra)
    assert not out.exists(), "a failed run must not leave an output file"
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".out.")], "temporary file left behind"
    return proc


def test_missing_file(tmp_path):
    proc = train_fails(tmp_path, tmp_path / "nope.parquet", "--problem", "ofbs")
    assert_clean_failure(proc, 2, "not found", "nope.parquet")


def test_corrupt_parquet(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not really parquet" * 10)
    proc = train_fails(tmp_path, bad, "--problem", "ofbs")
    assert_clean_failure(proc, 2, "cannot read", "bad.parquet")


def test_a_corrupt_file_in_a_folder_is_named_and_an_empty_csv_is_called_empty(tmp_path):
    folder = tmp_path / "events"
    folder.mkdir()
    make_binary_frame().to_parquet(folder / "a.parquet")
    (folder / "b.parquet").write_bytes(b"truncated")
    assert_clean_failure(train_fails(tmp_path, folder, "--problem", "ofbs"), 2, "cannot read", "b.parquet")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert_clean_failure(train_fails(tmp_path, empty, "--problem", "ofbs"), 2, "empty.csv is empty (0 bytes)")


def test_empty_table(tmp_path):
    empty = tmp_path / "empty.parquet"
    make_binary_frame().iloc[:0].to_parquet(empty)
    assert_clean_failure(train_fails(tmp_path, empty, "--problem", "ofbs"), 2, "no rows")


def test_no_label_column(tmp_path):
    path = tmp_path / "nolabel.parquet"
    make_binary_frame().rename(columns={"label": "target"}).to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "ofbs"), 2, "no label column 'label'", "--label-col")


def test_one_class_only(tmp_path):
    path = tmp_path / "one.parquet"
    frame = make_binary_frame()
    frame["label"] = 0
    frame.to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "ofbs"), 2, "only one class")


def test_multiclass_without_positive(tmp_path):
    """fpor/frop/ofbs on 3 classes without --positive is a multi-class operating point
    (tests/operating_point/test_multiclass_op.py) for a solver that trains multi-class models; a binary-only solver
    still asks for --positive."""
    path = tmp_path / "multi.parquet"
    frame = make_binary_frame()
    frame["label"] = np.arange(len(frame)) % 3
    frame.to_parquet(path)
    assert_clean_failure(
        train_fails(tmp_path, path, "--problem", "frop", "--target", "0.8", "--solver", "ero"), 2, "--positive"
    )


@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_nan_inf_features(tmp_path, bad_value):
    path = tmp_path / "nan.parquet"
    frame = make_binary_frame()
    frame.loc[3, "f1"] = bad_value
    frame.to_parquet(path)
    assert_clean_failure(train_fails(tmp_path, path, "--problem", "ofbs"), 2, "f1", "--impute median")


@pytest.mark.parametrize("target", ["1.5", "0", "-0.2"])
def test_target_outside_unit_interval(tmp_path, binary_parquet, target):
    proc = train_fails(tmp_path, binary_parquet, "--problem", "fpor", "--target", target)
    assert_clean_failure(proc, 2, "outside (0, 1)")


def test_unreachable_target_exit_3(tmp_path):
    path = tmp_path / "noisy.parquet"
    make_binary_frame(sep=0.2, seed=3).to_parquet(path)
    proc = train_fails(tmp_path, path, "--problem", "fpor", "--target", "0.99")
    assert_clean_failure(proc, 3, "not reachable", "best precision of any cut")


def test_model_data_column_mismatch(tmp_path, trained):
    path = tmp_path / "fewer.parquet"
    make_binary_frame().drop(columns=["f2"]).to_parquet(path)
    out = tmp_path / "pred.parquet"
    proc = run_dmo("predict", trained, path, "-o", out)
    assert_clean_failure(proc, 2, "missing column", "f2")
    assert not out.exists()


def test_corrupt_model_file(tmp_path, binary_parquet):
    model = tmp_path / "junk.safetensors"
    model.write_bytes(os.urandom(200))
    assert_clean_failure(run_dmo("evaluate", model, binary_parquet), 2, "not a readable dmo model")


def test_safetensors_that_is_not_a_dmo_model(tmp_path, binary_parquet):
    model = tmp_path / "other.safetensors"
    save_file({"w": np.zeros(3, dtype=np.float32)}, str(model))
    assert_clean_failure(run_dmo("evaluate", model, binary_parquet), 2, "not a dmo model")


def test_unwritable_output_path(tmp_path, binary_parquet):
    proc = run_dmo(
        "train", binary_parquet, "--problem", "ofbs", "-o", tmp_path / "no" / "such" / "dir" / "m.safetensors"
    )
    assert_clean_failure(proc, 2, "output directory does not exist")


def test_every_bad_option_and_output_is_named_in_one_run(tmp_path, binary_parquet):
    """A user fixes them all before the next run: the options a solver cannot be looked up for, a target out of
    range beside another bad value, and every output whose folder is missing."""
    proc = run_dmo("train", binary_parquet, "--solver", "nosuch", "--model", "tree", "--impute", "mean")
    assert_clean_failure(proc, 2, "--solver 'nosuch'", "--model 'tree'", "--impute 'mean'")
    proc = run_dmo("train", binary_parquet, "--problem", "fpor", "--target", "1.5", "--confidence", "1.5")
    assert_clean_failure(proc, 2, "--target 1.5 is outside (0, 1)", "--confidence 1.5")
    outputs = ("-o", tmp_path / "gone1" / "m.st", "--report", tmp_path / "gone2" / "r.json")
    assert_clean_failure(run_dmo("train", binary_parquet, *outputs), 2, "gone1", "gone2")
    assert not (tmp_path / "gone1").exists() and not (tmp_path / "gone2").exists()


def test_usage_errors_are_one_line_too(binary_parquet):
    assert_clean_failure(run_dmo("train", binary_parquet, "--no-such-option"), 2, "--no-such-option", "dmo train -h")
    assert_clean_failure(run_dmo("train", binary_parquet, "--target", "abc"), 2, "'--target'")
    assert_clean_failure(run_dmo("nosuch"), 2, "no such command")


def test_debug_shows_traceback(tmp_path):
    proc = run_dmo("--debug", "train", tmp_path / "nope.parquet", "--problem", "ofbs", process=True)  # the interpreter
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
    after = run_dmo("train", "--debug", tmp_path / "nope.parquet", process=True)  # after the command, as users type it
    assert "DmoError: input not found" in after.stderr and "NoSuchOption" not in after.stderr


def test_unknown_problem_lists_every_problem_train_takes(binary_parquet):
    listed = "fpor, frop, ofbs, value or multiclass"
    assert_clean_failure(run_dmo("train", binary_parquet, "--problem", "bogus"), 2, listed)


# ---- messy data and paths found by a fuzzing pass --------------------------------------------------------
def test_an_output_may_not_replace_an_input_or_another_output(tmp_path, trained, binary_parquet):
    data = tmp_path / "data.parquet"
    data.write_bytes(binary_parquet.read_bytes())
    before = data.read_bytes()
    assert_clean_failure(run_dmo("train", data, "-o", data), 2, "same file as DATA")
    assert_clean_failure(run_dmo("predict", trained, data, "-o", data), 2, "same file as DATA")
    assert_clean_failure(run_dmo("subsample", data, "--gamma", "2", "-o", data), 2, "same file as DATA")
    assert_clean_failure(run_dmo("evaluate", trained, data, "--report", trained), 2, "same file as MODEL")
    report = tmp_path / "r.json"
    assert_clean_failure(run_dmo("train", data, "-o", report, "--report", report), 2, "same file")
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "a.parquet").write_bytes(before)
    assert_clean_failure(run_dmo("predict", trained, parts, "-o", parts / "p.parquet"), 2, "inside the DATA directory")
    assert data.read_bytes() == before and not report.exists()


def test_label_of_another_type_than_the_models_is_refused_not_scored_as_all_negative(tmp_path, trained, binary_parquet):
    frame = pd.read_parquet(binary_parquet)
    text = tmp_path / "text_labels.parquet"
    frame.assign(label=frame["label"].astype(str)).to_parquet(text)
    assert_clean_failure(run_dmo("evaluate", trained, text), 2, "trained on numeric labels")


def test_nan_labels_are_missing_and_categorical_labels_train_multiclass(tmp_path):
    frame = make_binary_frame(n=300, seed=3)
    labels = frame["label"].to_numpy(dtype=float, copy=True)
    labels[:20] = np.nan
    nan_file = tmp_path / "nan.parquet"
    frame.assign(label=labels).to_parquet(nan_file)  # NaN, not null: how pyarrow, polars or Spark may write it
    assert_clean_failure(run_dmo("train", nan_file, "-o", tmp_path / "m.st"), 2, "20 rows have no label")
    categorical = tmp_path / "cat.parquet"
    frame.assign(label=pd.Categorical(np.array(["a", "b", "c"])[np.arange(300) % 3])).to_parquet(categorical)
    run_dmo("train", categorical, "-o", tmp_path / "c.st", check=True)
    assert run_dmo("evaluate", tmp_path / "c.st", categorical, check=True).returncode == 0


def test_a_list_column_beside_other_features_and_an_id_like_text_column_are_refused(tmp_path):
    frame = make_binary_frame(n=300, seed=4)
    with_list = tmp_path / "list.parquet"
    frame.assign(tags=[[0.0, 1.0]] * len(frame)).to_parquet(with_list)
    assert_clean_failure(train_fails(tmp_path, with_list), 2, "--embedding-col")
    marked = tmp_path / "marked.csv"
    frame.astype({"f1": object}).assign(f1=lambda f: f["f1"].where(f.index != 0, "?")).to_csv(marked, index=False)
    assert_clean_failure(train_fails(tmp_path, marked), 2, "'f1'", "distinct values")


def test_default_model_name_keeps_every_dot_but_the_data_suffix(tmp_path, binary_parquet):
    for year in ("2024", "2025"):
        (tmp_path / f"sales.{year}.parquet").write_bytes(binary_parquet.read_bytes())
        run_dmo("train", tmp_path / f"sales.{year}.parquet", check=True)
    assert (tmp_path / "sales.2024.dmo.safetensors").exists() and (tmp_path / "sales.2025.dmo.safetensors").exists()


def test_options_that_would_be_ignored_are_refused(tmp_path, binary_parquet):
    assert_clean_failure(train_fails(tmp_path, binary_parquet, "--problem", "ofbs", "--target", "0.9"), 2, "--target")
    assert_clean_failure(
        train_fails(tmp_path, binary_parquet, "--problem", "multiclass", "--positive", "1"), 2, "--positive"
    )
    assert_clean_failure(
        train_fails(tmp_path, binary_parquet, "--problem", "multiclass", "--beta", "2"), 2, "--beta 2 weighs recall"
    )
    every = ("--problem", "multiclass", "--target", "0.8", "--positive", "1", "--confidence", "0.9", "--beta", "2")
    assert_clean_failure(  # all four in one message, not one per run
        train_fails(tmp_path, binary_parquet, *every), 2, "--target", "--positive", "--confidence", "--beta 2"
    )
    assert_clean_failure(train_fails(tmp_path, binary_parquet, "--drop", "label"), 2, "label column")


def test_a_continuous_label_is_refused_not_trained_as_hundreds_of_classes(tmp_path):
    frame = make_binary_frame(n=300, seed=5)
    continuous = tmp_path / "continuous.parquet"
    frame.assign(label=np.random.default_rng(0).normal(size=len(frame))).to_parquet(continuous)
    assert_clean_failure(train_fails(tmp_path, continuous), 2, "300 distinct values", "--label-col")


def test_streaming_solvers_count_nan_labels_as_missing_too(tmp_path):
    frame = make_binary_frame(n=300, seed=6)
    labels = frame["label"].to_numpy(dtype=float, copy=True)
    labels[:20] = np.nan
    nan_file = tmp_path / "nan.parquet"
    frame.assign(label=labels).to_parquet(nan_file)
    assert_clean_failure(train_fails(tmp_path, nan_file, "--solver", "fofo"), 2, "20 rows have no label")
    report = run_dmo(
        "train", nan_file, "--solver", "fofo", "--drop-unlabeled", "-o", tmp_path / "m.st", "--json", check=True
    ).stdout
    assert json.loads(report)["online"]["n"] == 280


def test_duplicate_csv_header_and_values_too_large_to_standardize(tmp_path, trained):
    frame = make_binary_frame(n=200, seed=7)
    dup = tmp_path / "dup.csv"
    dup.write_text("f0,f0,label\n" + "".join(f"{a},{a},{b}\n" for a, b in zip(frame["f0"], frame["label"])))
    assert_clean_failure(train_fails(tmp_path, dup), 2, "'f0' more than once")
    huge = tmp_path / "huge.parquet"
    frame.astype({"f1": float}).assign(f1=lambda f: f["f1"].where(f.index != 0, 1e200)).to_parquet(huge)
    assert_clean_failure(train_fails(tmp_path, huge), 2, "f1", "too large")
    assert_clean_failure(run_dmo("predict", trained, huge, "-o", tmp_path / "p.parquet"), 2, "f1", "too large")
    assert not (tmp_path / "p.parquet").exists()


def test_parquet_files_whose_columns_differ_in_kind_or_set_are_named(tmp_path):
    frame = make_binary_frame(n=200, seed=8)
    for name, part in (("text", frame.tail(100).astype({"f2": str})), ("fewer", frame.tail(100).drop(columns="f3"))):
        folder = tmp_path / name
        folder.mkdir()
        frame.head(100).to_parquet(folder / "a.parquet")
        part.to_parquet(folder / "b.parquet")
    for solver in ("wce", "fofo"):
        assert_clean_failure(
            train_fails(tmp_path, tmp_path / "text", "--solver", solver), 2, "'f2'", "a.parquet", "b.parquet"
        )
        assert_clean_failure(train_fails(tmp_path, tmp_path / "fewer", "--solver", solver), 2, "f3", "same columns")


def test_files_under_differently_named_partition_folders_are_refused(tmp_path):
    frame = make_binary_frame(n=200, seed=9)
    (tmp_path / "d" / "region=eu").mkdir(parents=True)
    (tmp_path / "d" / "other").mkdir()
    frame.head(100).to_parquet(tmp_path / "d" / "region=eu" / "part-0.parquet")
    frame.tail(100).to_parquet(tmp_path / "d" / "other" / "part-1.parquet")
    assert_clean_failure(train_fails(tmp_path, tmp_path / "d"), 2, "partition folders")


def test_rows_without_a_label_in_evaluation_data_are_counted_and_warned_about(tmp_path, trained, binary_parquet):
    """evaluate, threshold and --val leave unlabeled rows out of the metrics; the report's n shrank silently."""
    frame = make_binary_frame(n=300, seed=11)
    frame["label"] = frame["label"].astype(float).where(np.arange(300) % 10 != 0)
    frame.to_parquet(tmp_path / "partly.parquet")
    proc = run_dmo("evaluate", trained, tmp_path / "partly.parquet", "--json", check=True)
    report = json.loads(proc.stdout)
    assert report["unlabeled_rows"] == 30 and report["splits"]["data"]["n"] == 270
    assert proc.stderr.startswith("dmo: warning: 30 rows of") and "have no label" in proc.stderr
    refit = run_dmo(
        "threshold",
        trained,
        tmp_path / "partly.parquet",
        "--problem",
        "frop",
        "--target",
        "0.8",
        "-o",
        tmp_path / "m2.st",
        "--json",
        check=True,
    )
    refit_report = json.loads(refit.stdout)
    assert refit_report["unlabeled_rows"] == 30 and "have no label" in refit.stderr
    assert {"solver", "seed", "device", "wall_seconds"} <= set(refit_report)
    from dmocli.models.modelfile import read_metadata

    summary = read_metadata(tmp_path / "m2.st")["info"]["summary"]  # at the new threshold, not the training one
    assert summary == {
        "data": {k: refit_report["splits"]["data"][k] for k in ("precision", "recall", "f_beta", "feasible")}
    }
    for solver in ("wce", "fofo"):
        report_path = tmp_path / f"{solver}.json"
        run_dmo(
            "train",
            binary_parquet,
            "--solver",
            solver,
            "--val",
            tmp_path / "partly.parquet",
            "-o",
            tmp_path / f"{solver}.st",
            "--report",
            report_path,
            check=True,
        )
        train_report = json.loads(report_path.read_text())
        assert train_report["val_unlabeled_rows"] == 30 and train_report["splits"]["val"]["n"] == 270
        assert any("30 rows of" in w for w in train_report["warnings"])


def test_predictions_under_another_formats_name_are_refused(tmp_path, trained, binary_parquet):
    for name in ("p.json", "p.txt", "p.parquet.gz"):
        assert_clean_failure(
            run_dmo("predict", trained, binary_parquet, "-o", tmp_path / name),
            2,
            "can only be written as parquet (.parquet) or CSV",
        )
        assert not (tmp_path / name).exists()
    assert_clean_failure(
        run_dmo("subsample", binary_parquet, "--gamma", "2", "-o", tmp_path / "s.safetensors"),
        2,
        "can only be written as parquet (.parquet)",
    )
    run_dmo("predict", trained, binary_parquet, "-o", tmp_path / "scores", check=True)  # no suffix: parquet


def test_option_combinations_that_cannot_work_are_named_together(tmp_path, binary_parquet):
    """--val with --val-frac, --scheduler without --engine dask and --plot with an in-memory solver: one run,
    one line naming all three, exit 2, nothing written."""
    proc = run_dmo("train", binary_parquet, "--val", binary_parquet, "--val-frac", "0.2", "--scheduler", "tcp://x:1",
                   "--plot", tmp_path / "p.png", "-o", tmp_path / "m.safetensors")  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    for named in ("--val-frac, not both", "--scheduler names a Dask scheduler", "--plot apply to the streaming"):
        assert named in proc.stderr
    assert not (tmp_path / "m.safetensors").exists() and not (tmp_path / "p.png").exists()


def test_a_bad_val_file_is_named_with_everything_wrong_with_it(tmp_path, binary_parquet):
    val = make_binary_frame(n=200, seed=9)
    lacking = tmp_path / "lacking.parquet"
    val.drop(columns=["f3", "label"]).to_parquet(lacking)
    proc = run_dmo("train", binary_parquet, "--val", lacking, "-o", tmp_path / "m.st")
    assert_clean_failure(proc, 2, f"--val {lacking}:", "lacks DATA's column(s) f3", "no label column 'label'")
    assert "model was trained on" not in proc.stderr  # there is no model yet


def test_too_many_folds_with_val_pooled_does_not_suggest_giving_val(tmp_path):
    frame = make_binary_frame(n=120, seed=4, pos_frac=0.05)
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    frame.iloc[:60].to_parquet(first)
    frame.iloc[60:].to_parquet(second)
    positives = int(frame["label"].sum())
    proc = run_dmo("train", first, "--val", second, "--cv", str(positives + 1), "-o", tmp_path / "m.st")
    assert_clean_failure(proc, 2, "DATA's and --val's rows together", "lower --cv")
    assert "give --val" not in proc.stderr


def test_threshold_names_every_bad_option_at_once(tmp_path, trained, binary_parquet):
    out = tmp_path / "refit.safetensors"
    asked = ("--problem", "frop", "--confidence", "3", "--new-rows", "0", "-o", out)
    proc = run_dmo("threshold", trained, binary_parquet, *asked)
    assert_clean_failure(proc, 2, "--confidence 3.0 must be in", "needs --target", "--new-rows 0")
    assert not out.exists()


def test_evaluate_names_every_column_problem_and_the_missing_label_at_once(tmp_path, trained):
    frame = make_binary_frame(n=100, seed=11)
    broken = tmp_path / "broken.parquet"
    frame.drop(columns=["f3", "label"]).astype({"f0": str}).to_parquet(broken)
    proc = run_dmo("evaluate", trained, broken)
    assert_clean_failure(proc, 2, "missing column(s) the model was trained on: f3", "f0", "hold text", "no label")
