"""Input a new user meets in the first hour (issue 33, item 9): a `dmo train` command line copied into `dmo check`
runs as it is; text levels that differ only in case are named at train and check time, and folded into one
with --fold-case (stored in the model, so predict folds alike); unseen levels at predict time are named, up to
five in the warning, all of them (with counts) in the report, case variants of a known level as such."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import REPO

from dmocli.models.modelfile import load_model
from dmocli.prep.features import MAX_LISTED_UNSEEN, LevelCounts, Preprocessor

MERCHANTS = np.array(["grocery", "fuel", "online", "travel"])
# The preprocessing keys a model file held before --fold-case: a model trained without it must hold no other.
PREPROCESSING_KEYS = {
    "numeric",
    "categorical",
    "embedding",
    "embedding_dim",
    "mean",
    "scale",
    "impute",
    "fill",
    "trim_text",
    "categorical_codes",
}


def transactions(n: int = 400, seed: int = 0, merchants: np.ndarray = MERCHANTS) -> pd.DataFrame:
    """The README's `transactions.csv`: an `is_fraud` column of yes/no, an id, some empty cells, and a text
    column `merchant` drawn from `merchants`."""
    rng = np.random.default_rng(seed)
    amount = rng.lognormal(3.0, 1.0, size=n)
    merchant = merchants[rng.integers(0, len(merchants), size=n)]
    fraud = rng.random(n) < 1 / (1 + np.exp(-(0.03 * amount - 3.0 + 1.5 * (merchant == merchants[2]))))
    age = rng.normal(45, 12, size=n)
    age[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "transaction_id": [f"T{i}" for i in range(n)],
            "merchant": merchant,
            "amount": amount,
            "customer_age": age,
            "is_fraud": np.where(fraud, "yes", "no"),
        }
    )


def readme_train_command() -> list[str]:
    """Quick start section 2's `dmo train` line, continuation lines joined, as the shell splits it."""
    section = (REPO / "README.md").read_text().split("### 2.", 1)[1].split("### 3.", 1)[0]
    text = section.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.strip().startswith("dmo train "))
    return shlex.split(line)[1:]


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("dmo: warning:")]


def test_the_readme_train_command_line_runs_as_a_check(dmo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    transactions().to_csv("transactions.csv", index=False)
    args = readme_train_command()
    assert args[0] == "train" and "--target" in args and "--problem" in args and "-o" in args
    code, out, err = dmo("check", *args[1:])
    assert code == 0, err
    assert "ok, train would take it" in out and "problem fpor" in out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["transactions.csv"]  # -o and --report: not written
    for bad, named in (("1.5", "--target 1.5 is outside (0, 1)"), ("x", "Invalid value for '--target'")):
        code, out, err = dmo("check", *[bad if arg == "0.9" else arg for arg in args[1:]])
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and named in err, err
    code, _, err = dmo("check", *args[1:], "--seed", "-1", "--solver", "nope")  # options check ignores: checked
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--seed -1 must be at least 0" in err and "nope" in err


def test_check_lists_the_options_of_train_it_ignores_apart(dmo):
    code, out, _ = dmo("check", "--help")
    assert code == 0
    used, ignored = out.split("Options of dmo train, accepted and ignored", 1)
    for flag in ("--label-col", "--target", "--fold-case", "--problem", "--json"):
        assert flag in used, flag
    for flag in ("--seed", "--report", "--output", "--val", "--cv"):
        assert flag in ignored, flag


def test_case_variants_are_named_at_check_and_train_and_fold_case_folds_them(dmo, tmp_path):
    frame = transactions(merchants=np.array([*MERCHANTS, *(m.upper() for m in MERCHANTS), "Grocery", " Fuel "]))
    frame["channel"] = np.where(np.arange(len(frame)) % 2, "web", "Web")
    frame["region"] = np.array([f"r{i % 7}" for i in range(len(frame))])
    frame["region"] = [r.upper() if i % 3 else r for i, r in enumerate(frame["region"])]
    frame.to_csv(tmp_path / "t.csv", index=False)
    fix = ["--label-col", "is_fraud", "--drop", "transaction_id", "--impute", "median"]
    code, _, err = dmo("check", tmp_path / "t.csv", *fix)
    lines = warnings_of(err)
    assert code == 0 and len(lines) == 3, err  # one line per column with variants
    merchant = next(line for line in lines if "'merchant'" in line)
    assert "'FUEL'/'Fuel'/'fuel'" in merchant and "'GROCERY'/'Grocery'/'grocery'" in merchant
    assert "--fold-case" in merchant
    region = next(line for line in lines if "'region'" in line)
    assert region.count("/") == 5 and "and 2 more" in region  # five of the seven groups named
    code, out, err = dmo("train", tmp_path / "t.csv", *fix, "--cv", "0", "-o", tmp_path / "m.st")
    assert code == 0 and [line for line in warnings_of(err) if "differ only in case" in line] == lines, err
    code, out, err = dmo("check", tmp_path / "t.csv", *fix, "--fold-case")
    assert code == 0 and not warnings_of(err) and "merchant: 4 levels" in out and "channel: 1 levels" in out


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """One model trained with --fold-case and one without, on lower-case merchants, and the training table."""
    from dmocli import TrainOptions, train

    root = tmp_path_factory.mktemp("fold")
    transactions().to_parquet(root / "train.parquet")
    base = dict(label_col="is_fraud", drop=("transaction_id",), impute="median", cv=0)
    train(root / "train.parquet", TrainOptions(**base), output=root / "plain.st")
    train(root / "train.parquet", TrainOptions(**base, fold_case=True), output=root / "folded.st")
    return {"plain": root / "plain.st", "folded": root / "folded.st", "data": root / "train.parquet"}


def respelled(path: Path, folder: Path) -> tuple[Path, Path]:
    """The table as written, and the same rows with merchants upper-cased or padded with spaces: two files."""
    frame = pd.read_parquet(path).head(200)
    frame.to_csv(folder / "same.csv", index=False)
    frame["merchant"] = [m.upper() if i % 2 else f" {m.capitalize()}  " for i, m in enumerate(frame["merchant"])]
    frame.to_csv(folder / "respelled.csv", index=False)
    return folder / "same.csv", folder / "respelled.csv"


def test_a_fold_case_model_takes_new_spellings_as_the_known_level(dmo, models, tmp_path):
    same, new = respelled(models["data"], tmp_path)
    model = load_model(models["folded"])
    assert model.preprocessor.fold_case and model.preprocessor.categorical["merchant"] == sorted(MERCHANTS)
    code, out, err = dmo("predict", models["folded"], new, "-o", tmp_path / "new.parquet", "--json")
    assert code == 0 and not warnings_of(err), err
    assert json.loads(out)["unseen_levels"] == {} and json.loads(out)["unseen_level_values"] == {}
    assert dmo("predict", models["folded"], same, "-o", tmp_path / "same.parquet")[0] == 0
    scored, expected = (
        pq.read_table(tmp_path / name).column("logit").to_numpy() for name in ("new.parquet", "same.parquet")
    )
    np.testing.assert_array_equal(scored, expected)


def test_without_fold_case_predict_and_evaluate_name_the_variant_of_the_known_level(dmo, models, tmp_path):
    _, new = respelled(models["data"], tmp_path)
    code, out, err = dmo("predict", models["plain"], new, "-o", tmp_path / "p.parquet", "--json")
    (line,) = warnings_of(err)
    assert code == 0 and "column 'merchant': 200 of 200 rows (100.0%)" in line
    assert "a case/space variant of 'grocery'" in line and "--fold-case" in line
    report = json.loads(out)
    variants = report["unseen_level_variants"]["merchant"]
    assert variants["GROCERY"] == ["grocery"] and variants["Fuel"] == ["fuel"]  # trimmed, then compared folded
    assert sum(report["unseen_level_values"]["merchant"].values()) == 200
    code, out, err = dmo("evaluate", models["plain"], new, "--json")
    assert code == 0 and "a case/space variant of" in warnings_of(err)[0]
    assert json.loads(out)["unseen_level_variants"] == report["unseen_level_variants"]


def test_drift_names_five_levels_the_most_frequent_first_and_the_report_has_all(dmo, models, tmp_path):
    frame = pd.read_parquet(models["data"]).head(360)
    # Eight unseen levels, 8..1 x 5 rows: the warning names the five most frequent, the report all eight.
    unseen = [f"shop{k}" for k in range(8) for _ in range(5 * (8 - k))]
    frame.loc[: len(unseen) - 1, "merchant"] = unseen
    frame.to_csv(tmp_path / "new.csv", index=False)
    code, out, err = dmo("predict", models["plain"], tmp_path / "new.csv", "-o", tmp_path / "p.parquet", "--json")
    (line,) = warnings_of(err)
    named = "e.g. 'shop0' (40 rows), 'shop1' (35 rows), 'shop2' (30 rows), 'shop3' (25 rows), 'shop4' (20 rows), "
    assert code == 0 and named + "and 3 more;" in line and "variant" not in line
    values = json.loads(out)["unseen_level_values"]["merchant"]
    assert values == {f"shop{k}": 5 * (8 - k) for k in range(8)} and list(values) == sorted(values)
    code, _, err = dmo("predict", models["plain"], tmp_path / "new.csv", "-o", tmp_path / "s.parquet", "--strict")
    assert code == 2 and "more than --max-unseen 0.01: " + named in err and len(err.strip().splitlines()) == 1


def test_the_report_lists_at_most_the_cap_of_unseen_levels_per_column(dmo, models, tmp_path):
    frame = pd.read_parquet(models["data"]).head(300)
    frame["merchant"] = [f"m{i}" for i in range(300)]
    frame.to_csv(tmp_path / "new.csv", index=False)
    code, out, err = dmo("predict", models["plain"], tmp_path / "new.csv", "-o", tmp_path / "p.parquet", "--json")
    report = json.loads(out)
    assert code == 0 and report["unseen_levels"] == {"merchant": 300}
    assert len(report["unseen_level_values"]["merchant"]) == MAX_LISTED_UNSEEN
    assert f"and at least {MAX_LISTED_UNSEEN - 5} more" in warnings_of(err)[0]


def test_level_counts_add_up_over_batches_within_the_cap_and_travel_as_json():
    """Batches (a stream, Dask partitions) each count their unseen levels; the sum keeps counting the levels it
    lists, and lists no more than the cap."""
    first = LevelCounts({"c": 3}, {"c": 0}, unseen_values={"c": {"A": 2, "b": 1}}, variants={"c": {"A": ["a"]}})
    total = LevelCounts()
    total.add(LevelCounts.from_dict(json.loads(json.dumps(first.to_dict()))))
    total.add(LevelCounts({"c": 2}, {"c": 0}, unseen_values={"c": {"A": 2}}))
    assert total.unseen == {"c": 5} and total.unseen_values == {"c": {"A": 4, "b": 1}}
    assert total.report()["unseen_level_variants"] == {"c": {"A": ["a"]}}
    many = LevelCounts({"c": 150}, {"c": 0}, unseen_values={"c": {f"x{i}": 1 for i in range(150)}})
    total.add(many)
    assert len(total.unseen_values["c"]) == MAX_LISTED_UNSEEN and total.unseen_values["c"]["A"] == 4


def test_a_model_trained_without_fold_case_stores_what_it_stored_before(models):
    """No new key in the model file without --fold-case (the file is byte for byte what the code before wrote);
    a file without the key, as every older one, loads as not folding."""
    plain = load_model(models["plain"]).preprocessor.to_dict()
    assert set(plain) == PREPROCESSING_KEYS
    assert set(load_model(models["folded"]).preprocessor.to_dict()) == PREPROCESSING_KEYS | {"fold_case"}
    assert Preprocessor.from_dict(plain).fold_case is False
