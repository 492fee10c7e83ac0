"""`dmo train`'s options are declared once (dmocli/options.py): the CLI, TrainOptions and DmoClassifier agree,
and every declared choice and range is refused with one message form, all problems at once."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re

import pyarrow as pa
import pytest
from conftest import REPO, make_binary_frame, run_dmo

from dmocli import DmoClassifier, Problem, TrainOptions, evaluate, predict, refit_threshold, train
from dmocli.errors import DmoError
from dmocli.options import NEW_ROWS_WITHOUT_CONFIDENCE, estimator_fields, option_errors
from dmocli.use.adapt import adapt_to_rate


def test_every_train_option_is_on_the_command_line():
    help_text = run_dmo("train", "--help", check=True).stdout
    for spec in dataclasses.fields(TrainOptions):
        for flag in spec.metadata["flags"]:
            for name in flag.split("/"):
                assert re.search(rf"{re.escape(name)}\b", help_text), (spec.name, name)


def test_the_estimator_takes_the_declared_fields_with_their_defaults():
    signature = inspect.signature(DmoClassifier.__init__)
    names = [name for name in signature.parameters if name != "self"]
    assert names == [spec.name for spec in estimator_fields()]
    for spec in estimator_fields():
        expected = None if spec.name == "params" else spec.default
        assert signature.parameters[spec.name].default == expected, spec.name
    assert DmoClassifier().get_params()["device"] == TrainOptions().device


def test_estimator_parameters_reach_the_training_options(tmp_path):
    frame = make_binary_frame(n=300)
    clf = DmoClassifier(problem="frop", target=0.6, seed=3, params={"max-iter": 50}).fit(
        frame.drop(columns="label"), frame["label"]
    )
    assert clf.report_["seed"] == 3 and clf.report_["params"]["max_iter"] == 50 and clf.report_["target"] == 0.6


def test_every_bad_option_is_named_in_one_message_before_any_data_is_read(tmp_path):
    garbage = tmp_path / "data.parquet"
    garbage.write_bytes(b"not parquet")
    opts = TrainOptions(model="tree", impute="mean", device="tpu", width=0, val_frac=1.5, seed=-1, confidence=0.3)
    with pytest.raises(DmoError) as caught:
        train(garbage, opts, output=tmp_path / "m.safetensors")
    message = str(caught.value)
    for part in (
        "--model 'tree' is not known (use linear, mlp, gbdt or auto)",
        "--impute 'mean' is not known",
        "--device 'tpu' is not known (use auto, cpu or cuda)",
        "--width 0 must be at least 1",
        "--val-frac 1.5 must be in [0, 1)",
        "--seed -1 must be at least 0",
        "--confidence 0.3 must be in",
    ):
        assert part in message, part
    assert "cannot read" not in message


def test_the_cli_reports_them_on_one_line_with_exit_2(tmp_path):
    garbage = tmp_path / "data.parquet"
    garbage.write_bytes(b"not parquet")
    proc = run_dmo("train", garbage, "--model", "tree", "--param", "lr=-1", "-o", tmp_path / "m.safetensors")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "--model 'tree' is not known" in lines[0] and "--param lr=-1.0 must be positive" in lines[0]
    )


def test_ci_runs_the_test_command_the_readme_gives():
    readme = (REPO / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "python3 -m pytest" in line and "pip install" in line)
    assert command.strip() in (REPO / ".ci" / "run").read_text()


def test_the_python_api_trains_on_a_pandas_frame_as_on_its_table_and_names_other_data():
    frame = make_binary_frame(n=400, seed=8)
    options = TrainOptions(cv=0, seed=3)
    from_frame, _ = train(frame, options)
    from_table, _ = train(pa.Table.from_pandas(frame, preserve_index=False), options)
    assert from_frame.threshold == from_table.threshold
    with pytest.raises(DmoError, match="data must be a path, a pyarrow.Table or a pandas.DataFrame, not list"):
        train([[1.0, 0]], options)
    mixed = frame.astype({"f0": object})
    mixed.loc[0, "f0"] = "n/a"
    with pytest.raises(DmoError, match="the DataFrame cannot be read as a table .*give each column one type"):
        train(mixed, options)


def test_evaluate_predict_and_refit_take_a_pandas_frame_as_train_does(tmp_path):
    frame = make_binary_frame(n=400, seed=8)
    model = tmp_path / "m.st"
    train(frame, TrainOptions(cv=0, seed=3), output=model)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    assert evaluate(model, frame)["splits"] == evaluate(model, table)["splits"]
    predict(model, frame, tmp_path / "frame.csv")
    predict(model, table, tmp_path / "table.csv")
    assert (tmp_path / "frame.csv").read_bytes() == (tmp_path / "table.csv").read_bytes()
    refit = refit_threshold(model, frame, Problem("frop", 0.7), output=tmp_path / "r.st", allow_train_rows=True)
    assert refit["feasible"] is True
    with pytest.raises(DmoError, match="data must be a path, a pyarrow.Table or a pandas.DataFrame, not list"):
        evaluate(model, [[1.0, 0]])


def test_new_rows_is_a_count_or_inf_in_the_python_api_as_on_the_command_line():
    assert TrainOptions(confidence=0.95, new_rows="inf").new_rows == math.inf
    assert TrainOptions(confidence=0.95, new_rows=" 500 ").new_rows == 500
    assert option_errors(TrainOptions(confidence=0.95, new_rows=500)) == []
    assert option_errors(TrainOptions(confidence=0.95, new_rows=math.inf)) == []
    assert option_errors(TrainOptions(confidence=0.95, new_rows=2.5)) == [
        "--new-rows 2.5 must be a whole number of rows (e.g. 2000) or inf (the population value)"
    ]
    assert option_errors(TrainOptions(new_rows="inf")) == [NEW_ROWS_WITHOUT_CONFIDENCE]


def test_the_library_functions_refuse_what_the_declared_rules_refuse(tmp_path):
    """refit_threshold, evaluate and adapt_to_rate take keywords, not the declarations, and check them against the
    same rules and constraints (options.check_given), with the command line's messages."""
    frame = make_binary_frame(n=400, seed=8)
    model, out = tmp_path / "m.st", tmp_path / "out.st"
    train(frame, TrainOptions(cv=0, seed=3, problem="frop", target=0.5), output=model)  # no stored certificate
    refused = [
        (lambda: refit_threshold(model, None, None, out, new_rows=500), NEW_ROWS_WITHOUT_CONFIDENCE),
        (lambda: adapt_to_rate(model, out, prior=0.2, new_rows=500), NEW_ROWS_WITHOUT_CONFIDENCE),
        (lambda: adapt_to_rate(model, out, new_data=frame, prior=0.2), "give --adapt NEW or --prior R, not both"),
        (lambda: adapt_to_rate(model, out), "give one of new_data= and prior="),
        (lambda: adapt_to_rate(model, out, prior=1.5), "--prior 1.5 must be a positive rate strictly between 0 and 1"),
        (
            lambda: adapt_to_rate(model, out, prior=0.2, confidence=0.3),
            "--confidence 0.3 must be in [0.5, 1), e.g. 0.95",
        ),
        (lambda: evaluate(model, frame, gate_confidence=1.0), "--gate-confidence 1.0 must be in [0.5, 1), e.g. 0.95"),
    ]
    for call, message in refused:
        with pytest.raises(DmoError) as refusal:
            call()
        assert str(refusal.value) == message
    assert not out.exists()
    adapted = adapt_to_rate(model, out, prior=0.2, confidence=0.9, new_rows=500, allow_infeasible=True)
    assert adapted.adapted.new_rows == 500  # with its --confidence, --new-rows is taken
