"""`dmo report INPUT... -o PAGE.html` (dmocli/pages/inputs.py): each kind of input to its page, and every input it
cannot draw refused in one line, exit 2, with nothing written: another command's report, a JSON cut short, JSON
that is no dmo report, a file that is no model, a missing file, monitor reports of two model files, an output that
is not an .html name or is an input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_binary_frame

from dmocli import TrainOptions, train


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report_command")
    make_binary_frame(n=800, d=3, pos_frac=0.2, seed=5).to_parquet(root / "train.parquet")
    make_binary_frame(n=400, d=3, pos_frac=0.2, seed=6).to_parquet(root / "new.parquet")
    for name, target in (("a", 0.6), ("b", 0.7)):
        train(
            root / "train.parquet",
            TrainOptions(problem="fpor", target=target, val_frac=0.3),
            output=root / f"{name}.safetensors",
            report_path=root / f"train-{name}.json",
        )
    return root


def _refused(dmo, *args) -> str:
    """Run `dmo report ARGS -o out.html`; it must fail in one line, exit 2, and write no page."""
    *inputs, output = args
    code, _, err = dmo("report", *inputs, "-o", output)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("dmo: error: "), err
    assert not Path(output).exists()
    return err


def test_each_kind_of_input_makes_its_page(files: Path, dmo) -> None:
    code, _, err = dmo("monitor", files / "a.safetensors", files / "new.parquet", "--report", files / "mon.json")
    assert code in (0, 3), err
    code, _, err = dmo("evaluate", files / "a.safetensors", files / "new.parquet", "--report", files / "ev.json")
    assert code == 0, err
    for source, kind in (
        ("train-a.json", "training"),
        ("a.safetensors", "training"),
        ("ev.json", "evaluation"),
        ("mon.json", "monitoring"),
    ):
        code, _, err = dmo("report", files / source, "-o", files / f"{source}.html")
        assert code == 0, (source, err)
        assert f'<body data-page="{kind}">' in (files / f"{source}.html").read_text(encoding="utf-8")


def test_a_report_of_another_command_is_refused(files: Path, dmo) -> None:
    code, _, err = dmo("threshold", files / "a.safetensors", "--target", "0.65", "--problem", "fpor",
                       "-o", files / "moved.safetensors", "--report", files / "threshold.json")  # fmt: skip
    assert code == 0, err
    err = _refused(dmo, files / "threshold.json", files / "out.html")
    assert "report of dmo threshold" in err and "train, evaluate or monitor" in err


def test_a_json_cut_short_or_not_a_report_is_refused(files: Path, dmo) -> None:
    whole = (files / "train-a.json").read_text()
    (files / "cut.json").write_text(whole[: len(whole) // 2])
    assert "not complete JSON" in _refused(dmo, files / "cut.json", files / "out.html")
    (files / "list.json").write_text(json.dumps([1, 2, 3]))
    assert "not a dmo report" in _refused(dmo, files / "list.json", files / "out.html")


def test_a_file_that_is_no_model_or_is_missing_is_refused(files: Path, dmo) -> None:
    (files / "table.csv").write_text("a,b\n1,2\n")
    refused = _refused(dmo, files / "table.csv", files / "out.html")
    assert "not a readable dmo model file" in refused and "dmo report takes" in refused and "history" in refused
    assert "no such file" in _refused(dmo, files / "nowhere.json", files / "out.html")


def test_monitor_reports_of_two_model_files_are_refused(files: Path, dmo) -> None:
    for name in ("a", "b"):
        code, _, err = dmo("monitor", files / f"{name}.safetensors", files / "new.parquet",
                           "--report", files / f"mon-{name}.json")  # fmt: skip
        assert code in (0, 3), err
    assert "different model files" in _refused(dmo, files / "mon-a.json", files / "mon-b.json", files / "out.html")


def test_an_output_that_is_not_a_page_or_is_an_input_is_refused(files: Path, dmo) -> None:
    assert ".html" in _refused(dmo, files / "train-a.json", files / "page.json")
    before = (files / "train-a.json").read_bytes()
    code, _, err = dmo("report", files / "train-a.json", "-o", files / "train-a.json")
    assert code == 2 and "the same file" in err and (files / "train-a.json").read_bytes() == before


def test_train_refuses_an_html_page_not_named_html_before_training(files: Path, dmo) -> None:
    code, _, err = dmo("train", files / "train.parquet", "-o", files / "c.safetensors", "--html", files / "c.png")
    assert code == 2 and "--html" in err and not (files / "c.safetensors").exists()
