"""Whole numbers too large for the code that uses them (issue 45, hostile review 10): `--chunk-size
9223372036854775808` was an OverflowError (exit 1) and `--param max-depth=3000000000` an XGBoostError. The one
validator (dmocli/constraints.py:failure) refuses any whole number past int64 whatever the declaration, every
unbounded integer Interval admits at most int64 (tests/cli/test_option_constraints.py runs the generated
`INT_MAX + 1` for every declared integer option), and XGBoost's 32-bit parameters declare their own most."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import make_binary_frame, run_dmo

from dmocli.cli import app as _app  # noqa: F401  # registers every command, filling DECLARATIONS
from dmocli.cli.declared import DECLARATIONS
from dmocli.constraints import INT_MAX, Interval, failure, invalid_values
from dmocli.options import NEW_ROWS, check_value


def test_every_declared_option_refuses_a_whole_number_past_int64() -> None:
    checked = 0
    for declaration in DECLARATIONS.values():
        for spec in dataclasses.fields(declaration):
            constraint = spec.metadata.get("constraint")
            assert failure("--x", INT_MAX + 1, constraint) is not None, spec.metadata["flags"]
            if isinstance(constraint, Interval) and constraint.kind is int:
                checked += 1
                assert not constraint.admits(INT_MAX + 1), spec.metadata["flags"]  # what unions and tests ask
    assert checked >= 15


def test_the_generated_values_include_one_past_int64_and_the_bound_is_admitted() -> None:
    count = Interval(int, 1, None)
    assert INT_MAX + 1 in invalid_values(count) and count.admits(INT_MAX)
    assert failure("--chunk-size 9223372036854775808", INT_MAX + 1, count) == (
        "--chunk-size 9223372036854775808 is too large: give a whole number of at most 9223372036854775807"
    )
    # a declared most keeps its own message (--new-rows: a billion rows), not int64's
    assert "1,000,000,000" in failure("--new-rows", INT_MAX + 1, NEW_ROWS)
    # and where nothing is declared at all (a --param without flat keys)
    assert check_value("--param n=9223372036854775808", INT_MAX + 1, {}) is not None
    assert check_value("--param n=5", 5, {}) is None


@pytest.mark.parametrize("param", ["max-depth=3000000000", "max-leaves=2147483648", "max-bin=9223372036854775808"])
def test_xgboosts_32_bit_parameters_are_refused_in_one_line(tmp_path: Path, param: str) -> None:
    make_binary_frame(n=100).to_parquet(tmp_path / "t.parquet")
    done = run_dmo("train", tmp_path / "t.parquet", "-m", "gbdt", "--param", param, "-o", tmp_path / "m.safetensors")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and param.split("=")[0] in lines[0], done.stderr
    assert not (tmp_path / "m.safetensors").exists()
