"""`--adapt` on a NEW of a handful of rows makes up no rate (issue 45, hostile review 4): the rate's interval is
never narrower than the rows allow, a certificate at its low end is refused naming the rows and --prior, and a
plain `--adapt` of a certified model leaves no certificate in the file that it does not hold."""

from __future__ import annotations

import json

import pytest
from conftest import make_binary_frame

from dmocli.models.modelfile import load_model
from dmocli.operating_point.bounds import clopper_pearson_interval


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from conftest import run_dmo

    where = tmp_path_factory.mktemp("tiny_new")
    frame = make_binary_frame(n=3000, seed=3, sep=2.0)
    frame.to_parquet(where / "train.parquet", index=False)
    new = make_binary_frame(n=400, seed=4, sep=2.0).drop(columns="label")
    for rows in (1, 5, 40):
        new.head(rows).to_csv(where / f"new{rows}.csv", index=False)
    new.to_csv(where / "new.csv", index=False)
    asked = "--problem fpor --target 0.7 --confidence 0.95"
    run_dmo(*f"train {where / 'train.parquet'} {asked} -o {where / 'c.st'}".split(), check=True)
    return where


@pytest.mark.parametrize("rows", [1, 5])
def test_a_rate_from_a_handful_of_rows_is_refused_with_the_rows_needed(files, dmo, rows):
    code, out, err = dmo(
        "threshold", files / "c.st", "--adapt", files / f"new{rows}.csv", "--confidence", "0.95",
        "--new-rows", "inf", "-o", files / "a.st",
    )  # fmt: skip
    assert code == 3 and not (files / "a.st").exists(), err
    assert f"at the rate estimated on {rows:,} row(s) of NEW" in err and "--prior R" in err
    needed = int(err.split("at least about ")[1].split(" rows")[0].replace(",", ""))
    assert needed > rows  # more rows than it has: the rows it lacks, never a rate made up
    low, high = (float(v) for v in err.split("its interval [")[1].split("]")[0].split(", "))
    assert high - low > 0.5  # the real width of a rate from a handful of rows, not [0.5, 0.5]


def test_without_confidence_too_few_rows_are_refused_and_a_few_carry_their_interval(files, dmo):
    """One row cannot tell any rate from the training one, even with its class known: refused (exit 2) naming the
    rows needed and --prior, where it moved the threshold for a rate of 0.5. Forty rows can: their interval is
    never narrower than the Clopper-Pearson one of forty rows of known class. (--no-confidence: the certified
    model's own confidence would refuse the one row with exit 3, test_a_certified_model_s_own_confidence_...)"""
    code, _, err = dmo(
        "threshold", files / "c.st", "--adapt", files / "new1.csv", "--no-confidence", "-o", files / "b.st"
    )
    assert code == 2 and not (files / "b.st").exists() and err.count("\n") == 1, err
    needed = int(err.split("fewer than ")[1].split(" ")[0].replace(",", ""))
    assert 1 < needed <= 40 and f"give at least {needed} rows, or the rate with --prior R" in err
    code, out, err = dmo(
        "threshold", files / "c.st", "--adapt", files / "new40.csv", "--no-confidence", "-o", files / "b.st", "--json"
    )
    assert code == 0, err
    adapted = json.loads(out)["adapted"]
    low, high = adapted["rate_interval"]
    known = clopper_pearson_interval(round(adapted["new_rate"] * 40), 40, 0.95)
    assert low <= known[0] + 1e-12 and high >= known[1] - 1e-12


def test_a_certified_model_s_own_confidence_refuses_one_row_with_the_ways_out(files, dmo):
    """A plain --adapt of a certified model certifies at its confidence: one row bounds no rate, so exit 3 naming
    --prior and --no-confidence, and no file."""
    code, _, err = dmo("threshold", files / "c.st", "--adapt", files / "new1.csv", "-o", files / "b1.st")
    assert code == 3 and not (files / "b1.st").exists(), err
    assert "--prior R" in err and "pass --no-confidence to move the threshold without one" in err


def test_no_confidence_drops_the_training_certificate_and_the_file_says_so(files, dmo):
    assert load_model(files / "c.st").info["confidence"] == 0.95
    code, out, err = dmo(
        "threshold", files / "c.st", "--adapt", files / "new.csv", "--no-confidence", "-o", files / "p.st", "--json"
    )
    assert code == 0 and json.loads(out)["confidence"] is None and json.loads(out)["dropped_confidence"] == 0.95, err
    info = json.loads(dmo("info", files / "p.st", "--json")[1])
    assert info["confidence"] is None and info["certified"] is None and info["dropped_confidence"] == 0.95
    code, shown, _ = dmo("info", files / "p.st")
    problem = next(line for line in shown.splitlines() if line.startswith("problem:"))
    assert "NOT certified: dmo threshold dropped the certificate at confidence 0.95" in problem
    code, out, err = dmo(
        "threshold", files / "c.st", "--adapt", files / "new.csv", "--confidence", "0.9", "-o", files / "q.st"
    )
    assert code == 0, err  # certified anew, of the population at the new rate as training's was: said so
    assert load_model(files / "q.st").info["confidence"] == 0.9
    assert "certified (feasible=True) for the precision in the population at a rate of at least" in out


def test_a_refusal_at_the_rates_low_end_says_it_is_the_low_end(files, dmo):
    """The certificate holds at the rate interval's low end: the refusal names that rate as the low end, beside
    the estimate, with the figures of the report it carries (it said "at the positive rate" of the low end)."""
    code, out, err = dmo(
        "threshold", files / "c.st", "--adapt", files / "new.csv", "--confidence", "0.99", "--new-rows", "60",
        "-o", files / "r.st", "--json",
    )  # fmt: skip
    assert code == 3, err
    adapted = json.loads(out)["adapted"]
    assert adapted["rate_used"] == adapted["rate_interval"][0] < adapted["new_rate"]
    assert (
        f"at the positive rate {adapted['rate_used']:.4f}, the low end of the interval of the rate estimated at "
        f"{adapted['new_rate']:.4f}"
    ) in err
    assert "for the value measured on 60 new rows" in err and "--prior R where the rate is known" in err
