"""The alert budget's options on the command line: each bad value and combination refused in one line naming the
fix (exit 2), before any data is read, and a budget the data cannot meet refused with what would be (exit 3)."""

from __future__ import annotations

import pytest
from conftest import make_binary_frame, make_gaussian_classes, run_dmo


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "train.csv"
    make_binary_frame(n=800, seed=4).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-alerts", "5"], "--max-alerts N counts a period's alerts: give --per-rows M"),
        (["--per-rows", "100"], "--per-rows M is the period of --max-alerts N"),
        (["--max-alert-rate", "0"], "--max-alert-rate 0.0 is a share of rows: give one in (0, 1]"),
        (["--max-alert-rate", "1.5"], "--max-alert-rate 1.5 is a share of rows"),
        (["--max-alert-rate", "0.1", "--max-alerts", "5", "--per-rows", "9"], "not both"),
        (["--max-alerts", "11", "--per-rows", "10"], "--max-alerts 11 is more than --per-rows 10"),
        (["--max-alerts", "0", "--per-rows", "10"], "--max-alerts 0"),
    ],
)
def test_train_refuses_a_malformed_budget(tmp_path, args, says):
    missing = tmp_path / "absent.csv"  # refused before any reading: the data need not exist
    proc = run_dmo("train", missing, *args, "-o", tmp_path / "m.dmo")
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_threshold_refuses_a_budget_beside_adapt(tmp_path):
    proc = run_dmo("threshold", tmp_path / "m.dmo", "--prior", "0.2", "--max-alert-rate", "0.1", "-o", tmp_path / "o")
    assert proc.returncode == 2
    assert "--adapt and --prior keep MODEL's operating point" in proc.stderr


def test_a_budget_alone_on_a_multiclass_label_is_refused(tmp_path):
    path = tmp_path / "three.csv"
    make_gaussian_classes(300, d=3).to_csv(path, index=False)
    proc = run_dmo("train", path, "--max-alert-rate", "0.1", "-o", tmp_path / "m.dmo")
    assert proc.returncode == 2
    assert "an alert budget bounds a binary model's threshold" in proc.stderr


def test_a_budget_alone_refuses_a_target(table, tmp_path):
    proc = run_dmo("train", table, "--max-alert-rate", "0.1", "--target", "0.8", "-o", tmp_path / "m.dmo")
    assert proc.returncode == 2
    assert "an alert budget alone maximizes recall within it" in proc.stderr


def test_a_budget_the_data_cannot_certify_says_what_would(table, tmp_path):
    # 800 held-out rows cannot certify 1 alert per 1,000 rows: not even a cut flagging none passes the test
    proc = run_dmo(
        "train", table, "--max-alerts", "1", "--per-rows", "1000", "--confidence", "0.95", "-o", tmp_path / "m.dmo"
    )
    assert proc.returncode == 3, proc.stderr
    assert "the alert budget (at most 1 alerts per 1,000 rows, certified at 0.95 for the next 1,000 rows)" in (
        proc.stderr
    )
    assert "the smallest budget it keeps within is" in proc.stderr
    assert "give a larger budget" in proc.stderr
    assert not (tmp_path / "m.dmo").exists()
