"""--confidence without --new-rows certifies the population's value (issue 45, trial 3): the README's CI command
passes on an ordinary table, and `dmo threshold` re-certifies what the model file says it was certified on."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dmocli.models.modelfile import load_model


def user_table(n: int = 4414, seed: int = 0) -> pd.DataFrame:
    """Like the trial's export: about 4,400 rows, 6.5 % positives, a yes/no label, where a linear model's
    precision at the threshold a 0.9 target gets is about 0.93-0.97."""
    rng = np.random.default_rng(seed)
    fraud = rng.random(n) < 0.065
    x = rng.normal(size=(n, 4))
    x[:, 0] += 2.2 * fraud
    x[:, 1] += 1.8 * fraud
    frame = pd.DataFrame(x, columns=["amount_z", "hour_z", "age_z", "noise"])
    frame["transaction_id"] = np.arange(n)
    frame["is_fraud"] = np.where(fraud, "yes", "no")
    return frame


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from conftest import run_dmo

    where = tmp_path_factory.mktemp("user_table")
    user_table().to_csv(where / "transactions.csv", index=False)
    readme = (  # the README's CI line, as written but for the file names
        f"train {where / 'transactions.csv'} --label-col is_fraud --positive yes --drop transaction_id "
        f"--impute median --problem fpor --target 0.9 --confidence 0.95 -o {where / 'fraud.safetensors'} --json"
    )
    proc = run_dmo(*readme.split())
    return where, proc


def test_the_readme_ci_command_passes_on_an_ordinary_table_with_the_default(trained):
    where, proc = trained
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    point = report["operating_point"]
    assert point["new_rows"] is None and "Clopper-Pearson" in point["certificate"]  # the population's precision
    assert 0.9 <= point["constraint_bound"] and 0.9 < report["splits"]["cv"]["precision"] < 0.99
    info = load_model(where / "fraud.safetensors").info
    assert info["confidence"] == 0.95 and "new_rows" not in info


def test_one_folds_sample_is_what_refused_it_and_the_refusal_names_both_ways_out(trained, dmo):
    where, _ = trained
    fold = round(4414 / 5)
    code, out, err = dmo(
        *f"train {where / 'transactions.csv'} --label-col is_fraud --positive yes --drop transaction_id "
        f"--problem fpor --target 0.9 --confidence 0.95 --new-rows {fold} -o {where / 'f.st'} --json".split()
    )
    assert code == 3, err
    point = json.loads(out)["operating_point"]
    assert point["new_rows"] == fold
    assert f"for the precision measured on {fold:,} new rows (--new-rows {fold})" in err
    assert "--new-rows inf certifies the population's precision instead, which passes here" in err
    assert "a larger --new-rows asks less" in err


def test_threshold_certifies_what_the_model_was_certified_on(trained, dmo, tmp_path):
    """A model certified on 4,306 new rows keeps that sample when re-targeted with --confidence (it fell back to
    one fold's rows), and a population model keeps the population."""
    where, _ = trained
    sized = tmp_path / "sized.st"
    code, _, err = dmo(
        *f"train {where / 'transactions.csv'} --label-col is_fraud --positive yes --drop transaction_id "
        f"--problem fpor --target 0.85 --confidence 0.95 --new-rows 4306 -o {sized}".split()
    )
    assert code == 0, err
    for model, sample in ((sized, 4306), (where / "fraud.safetensors", None)):
        code, out, err = dmo(
            "threshold", model, "--problem", "fpor", "--target", "0.85", "--confidence", "0.95",
            "-o", tmp_path / "r.st", "--json",
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["operating_point"]["new_rows"] == sample
        assert load_model(tmp_path / "r.st").info.get("new_rows") == sample
