"""A --parse-numbers column keeps the unit training wrote it in: values in another currency, or with a percent sign
where training had none (or without where it had one), are refused by predict, evaluate and monitor with exit 2,
as values that do not read are; train refuses mixed currencies the same way (issue 45, hostile 11)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dmocli.prep.derive import Derivation, NumberRule


def _amounts(n: int, seed: int, write) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    amount = np.round(rng.lognormal(5, 1.0, n), 2)
    x = rng.normal(size=n)
    label = (rng.random(n) < 1 / (1 + np.exp(-(0.01 * (amount - 150) + x)))).astype(int)
    return pd.DataFrame({"amount": [write(a, i) for i, a in enumerate(amount)], "x": x, "label": label})


def dollars(a: float, i: int) -> str:
    return f"${a:,.2f}" if i % 2 else f"{a:,.2f} USD"


@pytest.fixture(scope="module")
def dollar_model(tmp_path_factory):
    from conftest import run_dmo

    folder = tmp_path_factory.mktemp("units")
    _amounts(200, 1, dollars).to_csv(folder / "train.csv", index=False)
    run_dmo("train", folder / "train.csv", "--parse-numbers", "--cv", "0", "-o", folder / "m.dmo", check=True)
    return folder / "m.dmo"


def _run(dmo, command: str, model, data, folder):
    """`dmo COMMAND MODEL DATA`, or `dmo threshold MODEL --adapt NEW` (NEW's rows move the positive rate)."""
    if command == "threshold --adapt":
        return dmo("threshold", model, "--adapt", data, "-o", folder / "a.safetensors")
    outputs = {"predict": ["-o", folder / "p.parquet"], "evaluate": [], "monitor": []}[command]
    return dmo(command, model, data, *outputs)


@pytest.mark.parametrize("command", ["predict", "evaluate", "monitor", "threshold --adapt"])
@pytest.mark.parametrize(
    "write, shown",
    [
        (lambda a, i: f"€{a:.2f}" if i == 3 else dollars(a, i), "'€"),
        (lambda a, i: f"{a:.2f}%" if i in (2, 5) else dollars(a, i), "%'"),
        (lambda a, i: f"{a:.2f} EUR" if i % 3 == 0 else dollars(a, i), " EUR'"),
    ],
)
def test_values_in_another_unit_are_refused(dmo, tmp_path, dollar_model, command, write, shown):
    frame = _amounts(30, 2, write)
    foreign = int((~frame["amount"].str.contains(r"\$|USD")).sum())
    if command != "evaluate":
        frame = frame.drop(columns="label")
    frame.to_csv(tmp_path / "new.csv", index=False)
    code, out, err = _run(dmo, command, dollar_model, tmp_path / "new.csv", tmp_path)
    assert code == 2, (out, err)
    assert f"column 'amount' holds {foreign} value(s) in another unit than the model was trained on" in err
    assert "(written in USD and without a percent sign)" in err and shown in err and err.count("\n") == 1
    assert not (tmp_path / "p.parquet").exists() and not (tmp_path / "a.safetensors").exists()


@pytest.mark.parametrize("command", ["predict", "evaluate", "monitor"])
def test_training_units_and_plain_numbers_are_scored(dmo, tmp_path, dollar_model, command):
    """`$5`, `5 USD` and `5` (no currency: taken as training's) all score, and alike."""
    frame = _amounts(30, 3, lambda a, i: [f"${a:.2f}", f"{a:.2f} USD", f"{a:.2f}"][i % 3])
    if command != "evaluate":
        frame = frame.drop(columns="label")
    frame.to_csv(tmp_path / "new.csv", index=False)
    code, out, err = _run(dmo, command, dollar_model, tmp_path / "new.csv", tmp_path)
    assert code == 0, err


def test_a_percent_column_refuses_plain_numbers_and_the_reverse(dmo, tmp_path):
    """Trained on `12.5%` (0.125), a `12.5` would be a hundred times larger."""
    _amounts(200, 4, lambda a, i: f"{a / 10:.1f}%").to_csv(tmp_path / "train.csv", index=False)
    code, _, err = dmo("train", tmp_path / "train.csv", "--parse-numbers", "--cv", "0", "-o", tmp_path / "m.dmo")
    assert code == 0, err
    new = _amounts(10, 5, lambda a, i: f"{a / 10:.1f}" if i == 0 else f"{a / 10:.1f}%").drop(columns="label")
    new.to_csv(tmp_path / "new.csv", index=False)
    code, _, err = dmo("predict", tmp_path / "m.dmo", tmp_path / "new.csv", "-o", tmp_path / "p.parquet")
    assert code == 2 and "1 value(s) in another unit" in err and "(written as percents (12%))" in err


def test_the_unit_is_stored_and_an_older_rule_checks_none():
    rule = NumberRule("amount", ".", "USD", False)
    stored = Derivation([rule]).to_dict()
    assert stored["numbers"] == [{"column": "amount", "decimal": ".", "currency": "USD", "percent": False}]
    assert Derivation.from_dict(stored).rules == [rule]
    older = {"dates": [], "numbers": [{"column": "amount", "decimal": "."}], "order": ["amount"]}
    derived = Derivation.from_dict(older).apply(pa.table({"amount": ["€5", "6%"]}))
    assert derived.column("amount").to_pylist() == [5.0, 0.06]  # as such a model read them before
    for bad in ({"currency": 3}, {"percent": "no"}):
        with pytest.raises(ValueError, match="malformed number rule"):
            Derivation.from_dict({**older, "numbers": [{"column": "amount", "decimal": ".", **bad}]})
