"""The command line reads a command's result by its attributes, never by a report's keys (issue 49, typed
results): a key read of a dict built layers below is a shape the layering test cannot see, and a renamed key
would fail only at run time, where a renamed attribute fails the type check and the schema agreement test
(tests/use/test_result_schema.py).

Each command module listed in TYPED is parsed, and every string-key read in it is an error: a subscript with a
string constant (`report["splits"]`) or a `.get("...")` call. `PENDING` names the command modules whose
commands still return dicts, with the reason; a module moves from PENDING to TYPED when its command returns a
typed result, until PENDING is empty and every module of dmocli/cli/commands/ is checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COMMANDS = Path(__file__).resolve().parents[2] / "dmocli" / "cli" / "commands"

TYPED = ["info.py", "evaluate.py", "monitor.py", "threshold.py", "predict.py", "shared.py", "report.py"]
PENDING = {
    "train.py": "pending issue 49 phase 2: dmo train's conclude still returns its report as a dict",
    "subsample.py": "pending issue 49 phase 2: dmo subsample still returns its report as a dict",
    "check.py": "pending issue 49 phase 2: dmo check still returns its report as a dict",
    "extract.py": "pending issue 49 phase 2: dmo extract still returns its report as a dict",
    "solvers.py": "pending issue 49 phase 2: dmo solvers describes the registry as a dict",
}


def key_reads(path: Path) -> list[str]:
    """Each string-key read in the module at `path`: `x["key"]` and `x.get("key")`, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            found.append(f"{path.name}:{node.lineno}: [{node.slice.value!r}]")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(f"{path.name}:{node.lineno}: .get({node.args[0].value!r})")
    return found


@pytest.mark.parametrize("module", TYPED)
def test_typed_commands_read_no_report_keys(module: str) -> None:
    assert key_reads(COMMANDS / module) == []


def test_every_command_module_is_typed_or_pending_with_its_reason() -> None:
    """A new command module is checked or named as pending; a module typed since leaves PENDING."""
    modules = {path.name for path in COMMANDS.glob("*.py") if path.name != "__init__.py"}
    assert modules == set(TYPED) | set(PENDING)
    assert not set(TYPED) & set(PENDING)
    assert all(reason for reason in PENDING.values())


def test_the_check_finds_a_key_read(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('def f(report):\n    return report["splits"], report.get("gate"), report[0], report.splits\n')
    assert key_reads(sample) == ["sample.py:2: ['splits']", "sample.py:2: .get('gate')"]
