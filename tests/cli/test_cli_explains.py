"""A CLI that explains itself (issue 23, point 5) and `dmo info` (point 4), through the real `dmo` entry point:
--version, --problem in any case, threshold's stored problem, a short `dmo solvers`, help without `<bool>`,
repeated single-valued options refused, Python errors that name keywords, dir(dmocli), and malformed model
files refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import save_file

import dmocli
from dmocli.solvers import available


def one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The stderr of a refused run: one line, the given exit code, no traceback."""
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr.strip()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("explains")
    make_binary_frame(n=400, seed=0).to_parquet(root / "train.parquet")
    make_binary_frame(n=300, seed=1).to_parquet(root / "val.parquet")
    return {"root": root, "train": root / "train.parquet", "val": root / "val.parquet"}


@pytest.fixture(scope="module")
def fpor_model(data: dict[str, Path]) -> Path:
    """Trained with the problem written in capitals, as the README and papers write it."""
    model = data["root"] / "fpor.st"
    proc = run_dmo("train", data["train"], "--problem", "FPOR", "--target", "0.7", "--val", data["val"], "-o", model)
    assert proc.returncode == 0, proc.stderr
    return model


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    proc = run_dmo(flag)
    assert proc.returncode == 0 and proc.stdout.strip() == f"dmo {dmocli.__version__}"


def test_problem_in_capitals_is_the_problem(fpor_model: Path, data: dict[str, Path]) -> None:
    info = json.loads(run_dmo("info", fpor_model, "--json", check=True).stdout)
    assert info["problem"] == "fpor" and info["target"] == 0.7
    refit = run_dmo("threshold", fpor_model, data["val"], "-p", "FROP", "--target", "0.6", "-o", data["root"] / "r.st")
    assert refit.returncode == 0, refit.stderr
    assert "problem: frop, target 0.6" in refit.stdout and "stored in the model" not in refit.stdout


def test_problem_in_capitals_in_the_python_api(data: dict[str, Path], tmp_path: Path) -> None:
    _, report = dmocli.train(data["train"], dmocli.TrainOptions(problem="OFBS", cv=0), output=tmp_path / "m.st")
    assert report["problem"] == "ofbs"
    assert dmocli.Problem("FROP", 0.5).kind == "frop"
    frame = make_binary_frame(n=200, seed=3)
    classifier = dmocli.DmoClassifier(problem="Fpor", target=0.6, cv=0).fit(frame.drop(columns="label"), frame.label)
    assert classifier.model_.problem.kind == "fpor"


def test_threshold_uses_the_problem_stored_in_the_model(fpor_model: Path, data: dict[str, Path]) -> None:
    proc = run_dmo("threshold", fpor_model, data["val"], "-o", data["root"] / "same.st", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["problem"], report["target"], report["problem_source"]) == ("fpor", 0.7, "model")
    assert report["splits"]["data"]["precision"] >= 0.7
    plain = run_dmo("threshold", fpor_model, data["val"], "-o", data["root"] / "same2.st", check=True)
    assert "problem: fpor, target 0.7  (stored in the model)" in plain.stdout
    alone = run_dmo("threshold", fpor_model, data["val"], "--target", "0.5", "-o", data["root"] / "x.st")
    assert "--target needs --problem" in one_line_error(alone) and not (data["root"] / "x.st").exists()


def test_solvers_is_short_with_the_default_first() -> None:
    lines = run_dmo("solvers", check=True).stdout.strip().splitlines()
    listed = [line.split()[0] for line in lines if line and not line.startswith("`")]
    assert sorted(listed) == sorted(available()) and lines[0].startswith("wce (default) ")
    assert len(lines) <= len(available()) + 2  # one line each, and a hint


def test_solvers_name_shows_its_parameters() -> None:
    proc = run_dmo("solvers", "ero", check=True)
    assert proc.stdout.startswith("ero: ") and "protocol" in proc.stdout and "torchrun: yes" in proc.stdout
    assert "warm_start" not in proc.stdout and "warm-start" in proc.stdout  # as --param spells it
    assert "choose from: adsh" in one_line_error(run_dmo("solvers", "nope"))


def test_solvers_json() -> None:
    every = json.loads(run_dmo("solvers", "--json", check=True).stdout)
    assert every["default"] == "wce" and [s["name"] for s in every["solvers"]][0] == "wce"
    assert {s["name"] for s in every["solvers"]} == set(available())
    fofo = json.loads(run_dmo("solvers", "fofo", "--json", check=True).stdout)["solvers"]
    assert len(fofo) == 1 and fofo[0]["streaming"] is True and fofo[0]["problems"] == ["ofbs"]
    lr = next(p for p in fofo[0]["params"] if p["name"] == "lr")
    assert lr["default"] == 2.0 and lr["help"]


@pytest.mark.parametrize("command", ["train", "evaluate", "threshold", "predict", "info", "solvers"])
def test_help_shows_no_bool_type_for_flags(command: str) -> None:
    proc = run_dmo(command, "--help", check=True)
    assert "--json" in proc.stdout and "<bool>" not in proc.stdout
    assert "<path>" in proc.stdout or command == "solvers"  # options that take a value still show its type


def test_root_help_lists_version_and_info() -> None:
    proc = run_dmo("--help", check=True)
    assert "--version" in proc.stdout and "info" in proc.stdout and "<bool>" not in proc.stdout


def test_a_single_valued_option_given_twice_is_refused(fpor_model: Path, data: dict[str, Path]) -> None:
    out = data["root"] / "ids.parquet"
    proc = run_dmo("predict", fpor_model, data["val"], "-o", out, "--id-col", "f0", "--id-col", "f1")
    line = one_line_error(proc)
    assert "--id-col is given 2 times ('f0', 'f1')" in line and "give it once" in line and not out.exists()
    twice = run_dmo("train", data["train"], "--label-col", "label", "--seed=1", "--seed", "2", "-o", out)
    assert "--seed is given 2 times ('1', '2')" in one_line_error(twice) and "--label-col" not in twice.stderr


def test_a_repeatable_option_keeps_every_value(data: dict[str, Path]) -> None:
    model = data["root"] / "dropped.st"
    run_dmo("train", data["train"], "--drop", "f0", "--drop", "f1", "--cv", "0", "-o", model, check=True)
    info = json.loads(run_dmo("info", model, "--json", check=True).stdout)
    assert [c["name"] for c in info["features"]["columns"]] == ["f2", "f3"]


def test_python_errors_name_the_keyword_and_the_cli_names_the_flag(data: dict[str, Path], tmp_path: Path) -> None:
    options = dict(problem="fpor", target=0.999, confidence=0.99, val=data["val"])
    with pytest.raises(dmocli.UnreachableTarget) as refused:
        dmocli.train(data["train"], dmocli.TrainOptions(**options), output=tmp_path / "m.st")
    assert "allow_infeasible=True" in str(refused.value) and "--allow-infeasible" not in str(refused.value)
    flags = ["--problem", "fpor", "--target", "0.999", "--confidence", "0.99", "--val", data["val"]]
    line = one_line_error(run_dmo("train", data["train"], *flags, "-o", tmp_path / "m.st"), code=3)
    assert "--allow-infeasible" in line and "allow_infeasible=True" not in line


def test_dir_lists_the_public_api_without_importing_it() -> None:
    code = "import sys, dmocli; print(','.join(dir(dmocli))); print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, torch_loaded = proc.stdout.split()
    assert {"train", "evaluate", "predict", "DmoClassifier", "TrainOptions", "report_schema"} <= set(names.split(","))
    assert torch_loaded == "False"


def test_info_describes_the_model(fpor_model: Path) -> None:
    lines = run_dmo("info", fpor_model, check=True).stdout.splitlines()
    assert lines[0].startswith(f"model: {fpor_model}") and "problem: fpor, target 0.7" in lines
    assert any(line.startswith("threshold: logit ") for line in lines)
    assert "label: column 'label', classes [0, 1], positive 1" in lines
    assert "features: 4 columns, 4 inputs: f0, f1, f2, f3" in lines
    assert any(line.startswith("training: solver wce, 400 rows, seed 0") for line in lines)
    report = json.loads(run_dmo("info", fpor_model, "--json", check=True).stdout)
    assert report["features"]["n_columns"] == 4 and report["architecture"]["kind"] == "linear"
    assert report["training"]["dmocli_version"] == dmocli.__version__ and report["training"]["date"][:2] == "20"


def test_info_refuses_malformed_model_files_in_one_line(fpor_model: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.st"
    garbage.write_bytes(b"not a safetensors file at all")
    bad_json = tmp_path / "bad-json.st"
    save_file({"w": make_binary_frame(n=4).to_numpy()}, str(bad_json), metadata={"dmocli": "{not json"})
    from safetensors import safe_open

    with safe_open(str(fpor_model), framework="numpy") as handle:
        meta, tensors = json.loads(handle.metadata()["dmocli"]), {k: handle.get_tensor(k) for k in handle.keys()}
    meta["threshold"] = "high"
    bad_threshold = tmp_path / "bad-threshold.st"
    save_file(tensors, str(bad_threshold), metadata={"dmocli": json.dumps(meta)})
    for path in (garbage, bad_json, bad_threshold, tmp_path / "missing.st"):
        line = one_line_error(run_dmo("info", path, "--json"))
        assert str(path) in line
