"""An alert budget through a model's life: trained within it (the report's `alert_budget` section, the model file's
info), re-targeted from the stored curve to another budget, and watched by `dmo monitor`, whose --gate fails when
new rows are flagged past the budget and passes on rows like the training ones."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import make_binary_frame, run_dmo

from dmocli import load_model, report_schema


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model trained within 30 alerts per 1,000 rows, certified at 0.9 for the next 1,000 rows."""
    folder = tmp_path_factory.mktemp("alerts")
    make_binary_frame(n=3000, seed=1, sep=1.0).to_csv(folder / "train.csv", index=False)
    fresh = make_binary_frame(n=2000, seed=2, sep=1.0).drop(columns="label")
    fresh.to_csv(folder / "new.csv", index=False)
    fresh.assign(f0=fresh["f0"] + 1.5).to_csv(folder / "shifted.csv", index=False)
    proc = run_dmo(
        "train", folder / "train.csv", "--max-alerts", "30", "--per-rows", "1000", "--confidence", "0.9",
        "-o", folder / "m.dmo", "--json", check=True,
    )  # fmt: skip
    return folder, json.loads(proc.stdout)


def test_train_reports_the_budget_and_its_certificate(trained):
    folder, report = trained
    jsonschema.validate(report, report_schema())
    section = report["alert_budget"]
    assert report["problem"] == "alerts"
    assert (section["max_alerts"], section["per_rows"], section["certified_rows"]) == (30, 1000, 1000)
    assert section["within"] and section["certified_share"] <= 0.03
    assert section["flagged"] == report["operating_point"]["tp"] + report["operating_point"]["fp"]
    low, high = section["alerts_interval"]
    assert low <= section["expected_alerts"] <= high and section["period_rows"] == 1000
    model = load_model(folder / "m.dmo")
    assert model.info["alert_budget"] == {"max_alert_rate": 0.03, "max_alerts": 30, "per_rows": 1000}
    assert model.problem.kind == "alerts"


def test_threshold_retargets_another_budget_from_the_stored_curve(trained):
    folder, report = trained
    proc = run_dmo(
        "threshold", folder / "m.dmo", "--max-alert-rate", "0.06", "-o", folder / "wider.dmo", "--json", check=True
    )
    moved = json.loads(proc.stdout)
    jsonschema.validate(moved, report_schema())
    assert moved["alert_budget"]["max_alert_rate"] == 0.06 and moved["alert_budget"]["within"]
    assert moved["threshold"] < report["threshold"]  # a larger budget flags more rows
    assert load_model(folder / "wider.dmo").info["alert_budget"]["max_alert_rate"] == 0.06
    kept = run_dmo("threshold", folder / "m.dmo", "-o", folder / "same.dmo", "--json", check=True)
    assert json.loads(kept.stdout)["threshold"] == report["threshold"]  # its own budget, searched again
    other = run_dmo(
        "threshold", folder / "m.dmo", "--problem", "ofbs", "--no-confidence", "-o", folder / "f1.dmo", check=True
    )
    assert "alert budget" not in other.stdout
    assert "alert_budget" not in load_model(folder / "f1.dmo").info  # a problem given alone drops the budget


def test_monitor_gate_fails_when_new_rows_exceed_the_budget(trained):
    folder, _ = trained
    calm = run_dmo("monitor", folder / "m.dmo", folder / "new.csv", "--gate", "--json")
    assert calm.returncode == 0, calm.stderr
    alerts = json.loads(calm.stdout)["alerts"]
    assert not alerts["exceeded"] and alerts["budget_alerts"] == 30 and alerts["rows"] == 2000
    shifted = run_dmo("monitor", folder / "m.dmo", folder / "shifted.csv", "--gate", "--json")
    assert shifted.returncode == 3
    report = json.loads(shifted.stdout)
    jsonschema.validate(report, report_schema())
    assert report["alerts"]["exceeded"]
    assert report["alerts"]["expected_alerts"] > 30
    assert "over the alert budget of 3.00%" in shifted.stderr
    assert "re-target within the budget" in shifted.stderr
