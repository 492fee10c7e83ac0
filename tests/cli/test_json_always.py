"""With --json every exit prints one JSON object that validates against the report schema, a failure's carrying
`error` and the line stderr shows (issue 35 item 7); `dmo evaluate --gate` fails a model whose target labeled rows
show missed (item 6); the summaries show the constrained metric's interval (item 3)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_binary_frame, run_dmo
from jsonschema import Draft202012Validator

import dmocli
from dmocli.report import SCHEMA_VERSION

VALIDATOR = Draft202012Validator(dmocli.report_schema())
INTERVAL = re.compile(r"precision \d\.\d{4} \[\d\.\d{3}, \d\.\d{3}\] 95%")


def one_report(code: int, out: str, err: str, expected: int) -> dict:
    """stdout as one JSON object of the schema; a failure's `error` names the exit status and stderr's last line."""
    assert code == expected, err
    report = json.loads(out)  # one object: a second one would fail to parse
    assert [error.message for error in VALIDATOR.iter_errors(report)] == []
    assert report["schema_version"] == SCHEMA_VERSION
    if code == 0:
        assert "error" not in report and "message" not in report
    else:
        assert report["error"]["code"] == code and report["error"]["message"] == report["message"]
        last = err.strip().splitlines()[-1]
        assert last.removeprefix("dmo: ").removeprefix("error: ") == report["message"]
    return report


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A model trained for FPOR 0.9 on well-separated classes, rows it has not seen, and a table too small for
    any certified threshold."""
    root = tmp_path_factory.mktemp("json_always")
    paths = {name: root / f"{name}.parquet" for name in ("train", "holdout", "tiny")}
    make_binary_frame(n=800, seed=0, sep=3.0).to_parquet(paths["train"])
    make_binary_frame(n=400, seed=1, sep=3.0).to_parquet(paths["holdout"])
    make_binary_frame(n=60, seed=2).to_parquet(paths["tiny"])
    model = root / "fpor.st"
    run_dmo("train", paths["train"], "--problem", "fpor", "--target", "0.9", "-o", model, check=True)
    return {**paths, "model": model, "root": root}


def relabeled(files: dict[str, Path], name: str, positives: int) -> Path:
    """20 rows the model predicts positive, `positives` of them labeled positive, and 20 it predicts negative
    labeled negative: a precision of positives/20 at the model's threshold, whatever threshold training chose."""
    scores = files["root"] / "scores.parquet"
    run_dmo("predict", files["model"], files["holdout"], "-o", scores, check=True)
    rows = pd.read_parquet(files["holdout"]).assign(decision=pd.read_parquet(scores)["decision"].to_numpy())
    flagged, passed = rows[rows["decision"] == 1].head(20), rows[rows["decision"] == 0].head(20)
    assert len(flagged) == len(passed) == 20
    flagged = flagged.assign(label=np.arange(20) < positives)
    table = pd.concat([flagged, passed.assign(label=False)]).drop(columns="decision")
    path = files["root"] / f"{name}.parquet"
    table.assign(label=table["label"].astype(np.int64)).to_parquet(path)
    return path


def test_exit_0_prints_the_report_without_an_error(dmo, files: dict[str, Path]) -> None:
    report = one_report(*dmo("evaluate", files["model"], files["holdout"], "--json"), expected=0)
    assert "gate" not in report


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (("train", "{tiny}", "--problem", "fpor", "--target", "1.5"), "bad_input"),
        (("evaluate", "{root}/missing.st", "{holdout}"), "bad_input"),
        (("evaluate", "{model}", "{holdout}", "--gate-confidence", "0.3"), "bad_input"),
        (("train", "{tiny}", "--no-such-option"), "usage"),
        (("evaluate", "{model}", "{holdout}", "--max-unseen", "lots"), "usage"),
    ],
)
def test_exit_2_prints_an_error_report(dmo, files: dict[str, Path], args: tuple[str, ...], kind: str) -> None:
    """Bad input and usage errors printed nothing on stdout with --json; now a report of the envelope keys and
    the error."""
    report = one_report(*dmo(*(arg.format(**files) for arg in args), "--json"), expected=2)
    assert report["error"]["kind"] == kind and report["command"] == args[0]
    assert set(report) == {"command", "schema_version", "dmocli_version", "python", "torch", "message", "error"}


def test_exit_3_adds_the_error_to_the_runs_report(dmo, files: dict[str, Path]) -> None:
    """A refused target prints its full report, once, with the message and error in it."""
    args = ("--problem", "fpor", "--target", "0.995", "--confidence", "0.99", "-o", files["root"] / "never.st")
    report = one_report(*dmo("train", files["tiny"], *args, "--json"), expected=3)
    assert report["error"]["kind"] == "unreachable" and report["feasible"] is False and "splits" in report


def test_check_refusing_the_data_carries_the_error(dmo, files: dict[str, Path], tmp_path: Path) -> None:
    messy = tmp_path / "messy.parquet"
    make_binary_frame(n=200, seed=3).assign(f0=lambda f: f["f0"].where(f.index % 7 > 0)).to_parquet(messy)
    code, out, _ = dmo("check", messy, "--json")
    assert code == 2
    report = json.loads(out)
    assert [error.message for error in VALIDATOR.iter_errors(report)] == []
    assert report["ok"] is False and report["error"] == {"code": 2, "kind": "bad_input", "message": report["message"]}
    assert "a problem to fix" in report["message"]


def test_machine_unexpected_and_interrupted_failures_print_an_error_report(
    dmo, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = one_report(*dmo("evaluate", files["model"], files["holdout"], "--report", "/dev/full", "--json"), expected=4)
    assert full["error"]["kind"] == "machine"
    for raised, code, kind in ((RuntimeError("boom"), 1, "unexpected"), (KeyboardInterrupt(), 130, "interrupted")):

        def fail(*args: object, **kwargs: object) -> None:
            raise raised

        monkeypatch.setattr("dmocli.use.evaluate.evaluation", fail)
        report = one_report(*dmo("evaluate", files["model"], files["holdout"], "--json"), expected=code)
        assert report["error"]["kind"] == kind


def test_the_least_error_report_validates() -> None:
    least = {
        "command": "evaluate",
        "schema_version": SCHEMA_VERSION,
        "error": {"code": 2, "kind": "usage", "message": "x"},
    }
    assert list(VALIDATOR.iter_errors(least)) == []
    assert list(VALIDATOR.iter_errors({**least, "error": {**least["error"], "kind": "other"}}))
    assert list(VALIDATOR.iter_errors({**least, "undocumented": 1}))


def test_gate_passes_where_the_target_is_met_and_fails_where_it_is_missed(dmo, files: dict[str, Path]) -> None:
    met = relabeled(files, "met", positives=20)
    code, out, err = dmo("evaluate", files["model"], met, "--gate")
    assert code == 0, err
    assert "gate passed: precision 1.0000" in out and "target 0.9" in out
    missed = relabeled(files, "missed", positives=2)
    report = one_report(*dmo("evaluate", files["model"], missed, "--gate", "--json"), expected=3)
    gate = report["gate"]
    assert gate["rule"] == "point" and gate["metric"] == "precision" and gate["passed"] is False
    assert gate["value"] == pytest.approx(0.1) and gate["target"] == 0.9 and gate["interval"][1] < 0.9
    for words in ("precision 0.1000", "[0.", "target 0.9"):
        assert words in report["message"]
    code, _, err = dmo("evaluate", files["model"], missed, "--gate-confidence", "0.95")
    assert code == 3 and "upper bound is below the target 0.9" in err


def test_a_miss_within_the_interval_passes_the_confidence_gate(dmo, files: dict[str, Path]) -> None:
    """17 of 20: precision 0.85 is below 0.9, but 20 rows cannot rule 0.9 out."""
    near = relabeled(files, "near", positives=17)
    code, _, err = dmo("evaluate", files["model"], near, "--gate")
    assert code == 3 and "precision 0.8500" in err
    report = one_report(*dmo("evaluate", files["model"], near, "--gate-confidence", "0.95", "--json"), expected=0)
    gate = report["gate"]
    assert gate["rule"] == "upper_bound" and gate["confidence"] == 0.95 and gate["passed"] is True
    assert gate["interval"][0] < 0.85 < 0.9 <= gate["interval"][1]


def test_a_model_without_a_target_has_nothing_to_gate(dmo, files: dict[str, Path]) -> None:
    model = files["root"] / "ofbs.st"
    run_dmo("train", files["train"], "-o", model, check=True)
    report = one_report(*dmo("evaluate", model, files["holdout"], "--gate", "--json"), expected=0)
    assert report["gate"]["rule"] == "none" and report["gate"]["passed"] is None
    assert any("nothing to check" in warning for warning in report["warnings"])


def test_the_python_api_gate_raises_with_the_report(files: dict[str, Path]) -> None:
    missed = relabeled(files, "api_missed", positives=2)
    with pytest.raises(dmocli.UnreachableTarget) as refused:
        dmocli.evaluate(files["model"], missed, gate=True)
    assert refused.value.report["gate"]["passed"] is False
    assert "gate" not in dmocli.evaluate(files["model"], missed)  # no gate asked, none judged


def test_summaries_show_the_constrained_metrics_interval(dmo, files: dict[str, Path]) -> None:
    code, out, err = dmo("evaluate", files["model"], files["holdout"])
    assert code == 0, err
    assert INTERVAL.search(out) and not re.search(r"recall \d\.\d{4} \[", out)
    code, out, err = dmo(
        "train", files["train"], "--problem", "fpor", "--target", "0.9", "-o", files["root"] / "again.st"
    )
    assert code == 0, err
    assert len(INTERVAL.findall(out)) == 2  # train and cv
    code, out, err = dmo("threshold", files["model"], files["holdout"], "-o", files["root"] / "refit.st")
    assert code == 0, err
    assert INTERVAL.search(out)
