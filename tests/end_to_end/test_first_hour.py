"""A new user's first hour with their own fraud table (issue 23), end to end through the real entry point: the
first train names every problem at once, the fixed run trains, and drift in new data is warned about (an error
with --strict). docs/first-hour.md is this transcript (python tests/fraud_scenario.py FOLDER writes it, starting a
real `dmo` per step). The test runs the steps in this process, in the scenario's folder: six process start-ups
(torch) cost about 15 s and show nothing the steps' exit statuses and output do not; a real process's exit
status is tested in tests/cli and tests/end_to_end/test_readme.py."""

from __future__ import annotations

import pyarrow.parquet as pq
from conftest import REPO, run_dmo
from fraud_scenario import STEPS, write_scenario

DOC = REPO / "docs" / "first-hour.md"


def test_the_fraud_scenario_goes_from_four_problems_to_a_model_and_a_drift_warning(tmp_path, monkeypatch):
    write_scenario(tmp_path)
    monkeypatch.chdir(tmp_path)  # the steps name their files as the user typed them there
    procs = []
    for args, expected in STEPS:
        proc = run_dmo(*args)
        assert proc.returncode == expected, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        if expected == 2 and args[0] == "train":  # a refused run writes no model, not even half of one
            assert not list(tmp_path.glob("*.safetensors*"))
        procs.append(proc)
    first, listed, check, trained, predicted, strict = procs
    message = first.stderr.strip()
    assert len(message.splitlines()) == 1 and "4 problems to fix before training" in message
    for fix in ("--label-col is_fraud", "--drop transaction_date", "--drop transaction_id", "--impute median"):
        assert fix in message
    assert "customer_age" in message
    assert [line.split(".")[0] for line in listed.stdout.splitlines()[1:]] == ["  1", "  2", "  3", "  4"]
    # dmo check's clean bill says what train then makes of the columns
    assert "features: 12 from 3 numeric" in check.stdout and "card_type: 4 levels" in check.stdout
    assert (tmp_path / "fraud.dmo.safetensors").is_file() and "threshold" in trained.stdout
    warning = [line for line in predicted.stderr.splitlines() if line.startswith("dmo: warning:")]
    assert len(warning) == 1 and "'card_type': 500 of 500 rows (100.0%)" in warning[0]
    assert "e.g. 'VISA'" in warning[0] or "e.g. 'MASTERCARD'" in warning[0] or "e.g. 'AMEX'" in warning[0]
    assert pq.read_table(tmp_path / "scores.parquet").num_rows == 500
    assert "more than --max-unseen 0.01" in strict.stderr and "Traceback" not in strict.stderr


def test_docs_first_hour_shows_every_step_of_the_scenario():
    text = DOC.read_text()
    for args, expected in STEPS:
        command = f"$ dmo {' '.join(args)}"
        assert command in text
        assert f"# exit {expected}" in text.split(command, 1)[1].split("$ dmo", 1)[0]
