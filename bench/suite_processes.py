"""How many test functions start a process (issue 34: at most 20 %), counted from the source, per test folder.

A test function starts one when its body, a helper of its module it calls or a fixture of its module it takes
(followed through further calls) runs `subprocess.*`, `dmo_command()`, `run_dmo(..., process=True)` or
`run_dmo(..., stdin=...)`, a multiprocessing or pty child, a Dask `LocalCluster` (worker processes), or the
README's and the first hour's shell steps. Everything else runs `dmo` in the test process (tests/conftest.py).

Usage: python bench/suite_processes.py [--tests tests]; prints a table, writes bench/results/suite_processes.json.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from _common import REPO, print_table, write_results

STARTERS = {
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.check_output",
    "subprocess.check_call",
    "subprocess.call",
    "os.fork",
    "pty.fork",
    "os.posix_spawn",
    "dmo_command",
    "multiprocessing.Process",
    "Process",
    "LocalCluster",
    "run_step",  # tests/fraud_scenario.py: one real `dmo` per step
    "run_block",  # tests/end_to_end/test_readme.py: a README shell block under bash
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _starts_directly(function: ast.AST) -> tuple[bool, set[str]]:
    """(whether the function itself starts a process, the names it calls)."""
    starts, calls = False, set()
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        calls.add(name.rsplit(".", 1)[-1])
        starts |= name in STARTERS or name.rsplit(".", 1)[-1] == "dmo_command"
        if name.endswith("run_dmo"):
            starts |= any(
                (kw.arg == "process" and isinstance(kw.value, ast.Constant) and kw.value.value is True)
                or kw.arg == "stdin"
                for kw in node.keywords
            )
    return starts, calls


def count_module(path: Path) -> tuple[int, int]:
    """(test functions that start a process, test functions) of one module."""
    functions: dict[str, ast.AST] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
    direct = {name: _starts_directly(node) for name, node in functions.items()}
    known: dict[str, bool] = {}

    def starts(name: str, seen: frozenset[str]) -> bool:
        if name in known or name not in functions or name in seen:
            return known.get(name, False)
        itself, calls = direct[name]
        taken = {arg.arg for arg in functions[name].args.args}  # fixtures of this module
        known[name] = itself or any(starts(other, seen | {name}) for other in (calls | taken) & functions.keys())
        return known[name]

    tests = [name for name in functions if name.startswith("test_")]
    return sum(starts(name, frozenset()) for name in tests), len(tests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, default=REPO / "tests")
    args = parser.parse_args()
    folders: dict[str, list[int]] = {}
    for path in sorted(args.tests.rglob("test_*.py")):
        starting, total = count_module(path)
        counts = folders.setdefault(path.parent.relative_to(args.tests).as_posix(), [0, 0])
        counts[0] += starting
        counts[1] += total
    rows = [{"folder": name, "start a process": s, "tests": t} for name, (s, t) in folders.items()]
    starting, total = sum(r["start a process"] for r in rows), sum(r["tests"] for r in rows)
    rows.append({"folder": "all", "start a process": starting, "tests": total})
    print_table(rows, ["folder", "start a process", "tests"])
    print(f"{starting} of {total} test functions start a process: {100 * starting / total:.1f} %")
    write_results("suite_processes", {"folders": rows, "share": starting / total})


if __name__ == "__main__":
    main()
