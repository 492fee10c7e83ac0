"""Every declared option refuses what its constraint refuses, the same way: for each command generated from a
declaration (dmocli/cli/declared.py) and each option with a constraint, every value `invalid_values` generates
exits 2 with one stderr line naming the flag and nothing on stdout, before any data is read. Every rule between
options a declaration lists (`RULES`) refuses each combination it generates the same way, with its own message,
on the command line and in the Python API. And the validator itself, on open and closed ends, unions, rules and
the flat keys solver parameters declare."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from dmocli.cli import app as _app  # noqa: F401  # registers every command, filling DECLARATIONS
from dmocli.cli.declared import DECLARATIONS
from dmocli.command_options import ThresholdOptions
from dmocli.constraints import (
    AllOf,
    AnyOf,
    Except,
    Exclusive,
    Interval,
    OneOf,
    Requires,
    When,
    failure,
    from_flat_keys,
    invalid_values,
)
from dmocli.options import CONFIDENCE, CV, NEW_ROWS, TARGET, TrainOptions, failing_combinations, option_errors


def leading_args(command: str, root: Path) -> list[str]:
    """The arguments that bring `command` to its option checks: files that are never read (a declared value
    is refused before any file is opened, so an unreadable one proves it)."""
    garbage = root / "data.parquet"
    garbage.write_bytes(b"not parquet")
    return {
        "train": [garbage, "-o", root / "m.safetensors"],
        "check": [garbage],
        "monitor": [root / "model.safetensors", garbage],
        "subsample": [garbage, "-o", root / "s.parquet"],
        "evaluate": [root / "model.safetensors", garbage],
        "threshold": [root / "model.safetensors", "-o", root / "t.safetensors"],
        "extract": [garbage, "-o", root / "f.parquet"],
        "predict": [root / "model.safetensors", garbage, "-o", root / "p.parquet"],
        "info": [root / "model.safetensors"],
    }[command]


def _cases() -> list[tuple[str, str, object]]:
    cases = []
    for command, declaration in sorted(DECLARATIONS.items()):
        for spec in dataclasses.fields(declaration):
            constraint = spec.metadata.get("constraint")
            if constraint is None:
                continue
            flag = spec.metadata["flags"][0].split("/")[0]
            cases += [(command, flag, value) for value in invalid_values(constraint)]
    return cases


CASES = _cases()


def test_every_generated_command_is_covered(tmp_path):
    assert {"train", "check", "monitor", "subsample", "evaluate", "predict", "threshold", "extract", "info"} <= set(
        DECLARATIONS
    )
    for command in DECLARATIONS:
        assert leading_args(command, tmp_path)  # a new declared command must say how to reach its checks


@pytest.mark.parametrize(("command", "flag", "value"), CASES, ids=[f"{c} {f} {v!r}" for c, f, v in CASES])
def test_a_value_the_constraint_refuses_is_refused_in_one_line_naming_the_flag(dmo, tmp_path, command, flag, value):
    code, out, err = dmo(command, *leading_args(command, tmp_path), flag, str(value))
    lines = err.strip().splitlines()
    assert code == 2 and out == "", (code, out, err)
    assert len(lines) == 1 and flag in lines[0], err
    assert not any(
        (tmp_path / name).exists() for name in ("m.safetensors", "s.parquet", "p.parquet", "t.safetensors", "f.parquet")
    )


def test_closed_ends_admit_their_bound_and_name_the_broken_one():
    seed = Interval(int, 0, 10)
    assert seed.admits(0) and seed.admits(10) and not seed.admits(-1) and not seed.admits(11)
    assert failure("--n -1", -1, seed) == "--n -1 must be at least 0"
    assert failure("--n 11", 11, seed) == "--n 11 must be at most 10"
    assert failure("--n True", True, seed) == "--n True must be a whole number"  # a bool is no count
    assert failure("--n 2.0", 2.0, seed) == "--n 2.0 must be a whole number"


@pytest.mark.parametrize(
    ("closed", "admitted", "refused", "shown"),
    [
        ("neither", [1e-9, 0.5], [0.0, 1.0], "(0, 1)"),
        ("left", [0.0, 0.999], [1.0, -1e-12], "[0, 1)"),
        ("right", [1.0, 1e-9], [0.0, 1.5], "(0, 1]"),
    ],
)
def test_open_ends_refuse_their_bound(closed, admitted, refused, shown):
    rate = Interval(float, 0, 1, closed=closed)
    assert all(rate.admits(value) for value in admitted)
    for value in refused:
        assert failure(f"--r {value}", value, rate) == f"--r {value} must be in {shown}"
    assert failure("--r nan", math.nan, rate) == "--r nan must be a finite number"


def test_one_sided_open_intervals_read_as_words():
    assert failure("--b 0", 0, Interval(float, 0, None, closed="neither")) == "--b 0 must be positive"
    assert failure("--b 1", 1, Interval(float, 1, None, closed="neither")) == "--b 1 must be above 1"
    assert failure("--b 2", 2, Interval(float, None, 2, closed="neither")) == "--b 2 must be below 2"


def test_a_union_names_the_member_of_the_value_s_kind_or_describes_itself():
    for good in (0, 2, 50, "auto"):
        assert CV.admits(good)
    assert failure("--cv -1", -1, CV) == "--cv -1 must be at least 0"
    assert failure("--cv 1", 1, CV).startswith("--cv 1 leaves no fold to hold out")
    assert failure("--cv 'many'", "many", CV) == "--cv 'many' must be a number of folds K >= 2, 0 for none, or auto"
    assert NEW_ROWS.admits(math.inf) and NEW_ROWS.admits(1) and not NEW_ROWS.admits(2.5)
    assert "whole number of rows" in failure("--new-rows 2.5", 2.5, NEW_ROWS)
    assert failure("--new-rows 0", 0, NEW_ROWS) == "--new-rows 0 must be at least 1 (or inf for the population value)"
    assert "is more than 1,000,000,000 rows" in failure("--new-rows 1e18", 10**18, NEW_ROWS)


def test_a_hole_and_a_choice():
    holed = AllOf((Interval(int, 0, None), Except((1,), why="is taken")))
    assert holed.admits(0) and holed.admits(2) and not holed.admits(1)
    assert failure("--k 1", 1, holed) == "--k 1 is taken"
    assert failure("--m 'x'", "x", OneOf(("a", "b", "c"))) == "--m 'x' is not known (use a, b or c)"


@pytest.mark.parametrize(
    "constraint",
    [
        Interval(int, 1, None),
        Interval(int, 0, 9, closed="neither"),
        Interval(float, 0.5, 1, closed="left"),
        TARGET,
        CV,
        NEW_ROWS,
        OneOf(("a", "b")),
        AnyOf((Interval(int, 2, 4), OneOf(("auto",))), description="2 to 4 or auto"),
    ],
)
def test_invalid_values_fail_and_sit_at_each_end(constraint):
    values = invalid_values(constraint)
    assert values and not any(constraint.admits(value) for value in values)
    if isinstance(constraint, Interval):
        low = constraint.low - 1 if constraint.kind is int and constraint.closed in ("both", "left") else None
        assert low is None or low in values
        assert constraint.closed not in ("neither", "right") or constraint.low in values  # an open end itself


def test_flat_keys_go_through_the_same_validator():
    assert failure("--c 0.3", 0.3, from_flat_keys({"min": 0.5, "below": 1.0})) == "--c 0.3 must be in [0.5, 1)"
    assert failure("--p lr=0", 0, from_flat_keys({"positive": True})) == "--p lr=0 must be positive"
    assert failure("--p k=2", 2, from_flat_keys({"min": 0, "max": 1})) == "--p k=2 must be at most 1"
    assert from_flat_keys({"help": "no checks"}) is None
    assert failure("--p x=nan", math.nan, None) == "--p x=nan must be a finite number"


def test_every_declared_default_is_admitted():
    for declaration in {*DECLARATIONS.values(), TrainOptions}:
        assert option_errors(declaration()) == [], declaration.__name__


@pytest.mark.parametrize(("command", "flag", "value"), CASES, ids=[f"{c} {f} {v!r}" for c, f, v in CASES])
def test_every_generated_value_is_refused_by_its_constraint(command, flag, value):
    declaration = DECLARATIONS[command]
    (spec,) = [spec for spec in dataclasses.fields(declaration) if spec.metadata["flags"][0].split("/")[0] == flag]
    assert not spec.metadata["constraint"].admits(value)


def _rule_cases() -> list[tuple[str, str, dict]]:
    """(command, the refusal its rule gives, the options that break it) for every rule of every declared command."""
    cases = []
    for command, declaration in sorted(DECLARATIONS.items()):
        for rule, combination in failing_combinations(declaration):
            message = option_errors(declaration(**combination))
            cases.append((command, rule.reason(combination, lambda name: _flag(declaration, name)), combination))
            assert message, (command, combination)  # the Python API refuses it too
    return cases


def _flag(declaration: type, name: str) -> str:
    (spec,) = [spec for spec in dataclasses.fields(declaration) if spec.name == name]
    return spec.metadata["flags"][0].split("/")[0]


RULE_CASES = _rule_cases()


def test_the_rules_generate_combinations_for_the_commands_that_declare_them():
    commands = {command for command, _, _ in RULE_CASES}
    assert {"train", "check", "threshold"} <= commands  # --new-rows needs --confidence; --adapt/--prior, ...
    messages = {message for _, message, _ in RULE_CASES}
    assert "give --adapt NEW or --prior R, not both" in messages
    assert "--target needs --problem (without it, the problem stored in MODEL is used as it is)" in messages


@pytest.mark.parametrize(
    ("command", "message", "combination"),
    RULE_CASES,
    ids=[f"{c} {' '.join(f'{k}={v!r}' for k, v in combo.items())}" for c, _, combo in RULE_CASES],
)
def test_a_combination_a_rule_refuses_is_refused_in_one_line_by_the_command(
    dmo, tmp_path, command, message, combination
):
    declaration = DECLARATIONS[command]
    assert option_errors(declaration(**combination)) == [message]  # the rule alone: each value is admitted
    given = [
        arg for name, value in combination.items() if value is not None for arg in (_flag(declaration, name), value)
    ]
    code, out, err = dmo(command, *leading_args(command, tmp_path), *given)
    assert code == 2 and out == "" and err.strip().splitlines() == [f"dmo: error: {message}"], (code, out, err)
    assert not any((tmp_path / name).exists() for name in ("m.safetensors", "t.safetensors"))


def test_rules_read_given_options_and_name_them():
    label = {"new_rows": "--new-rows", "target": "--target", "beta": "--beta"}.get
    needs = Requires(("target", "beta"), "problem", "{given} needs --problem")
    both = {"target": 0.8, "beta": 2.0, "problem": None}
    assert needs.broken(both) and needs.reason(both, label) == "--target and --beta needs --problem"
    assert not needs.broken({**both, "problem": "fpor"}) and not needs.broken(dict.fromkeys(both))
    one = Exclusive(("adapt",), ("prior",), "not both")
    assert one.broken({"adapt": "new.csv", "prior": 0.1}) and not one.broken({"adapt": "new.csv", "prior": None})
    under = When(("adapt", "prior"), Requires(("new_rows",), "confidence", "needs --confidence"))
    alone = {"new_rows": 500, "confidence": None, "adapt": None, "prior": None}
    assert not under.broken(alone) and under.broken({**alone, "prior": 0.1})  # a re-fit may use MODEL's confidence
    unless = When(("adapt",), needs, given=False)
    assert unless.broken({**both, "adapt": None}) and not unless.broken({**both, "adapt": "new.csv"})
    assert {"adapt": None, "target": 0.8, "problem": None} in unless.failing({"target": 0.8, "beta": 2.0}.get)


def test_the_confidence_range_is_one_constraint_with_one_message():
    for declaration, field in ((TrainOptions, "confidence"), (ThresholdOptions, "confidence")):
        (spec,) = [spec for spec in dataclasses.fields(declaration) if spec.name == field]
        assert spec.metadata["constraint"] is CONFIDENCE
    for command, declaration in DECLARATIONS.items():
        for spec in dataclasses.fields(declaration):
            if "confidence" in spec.name and spec.name != "no_confidence":  # --no-confidence: a flag, no level
                assert spec.metadata["constraint"] is CONFIDENCE, (command, spec.name)
    assert failure("--confidence 0.3", 0.3, CONFIDENCE) == "--confidence 0.3 must be in [0.5, 1), e.g. 0.95"
    assert CONFIDENCE.admits(0.5) and not CONFIDENCE.admits(1.0)


def test_every_constraint_s_example_is_admitted():
    for command, declaration in DECLARATIONS.items():
        for spec in dataclasses.fields(declaration):
            constraint = spec.metadata.get("constraint")
            if constraint is not None:
                assert constraint.admits(constraint.example()), (command, spec.name)
