"""The package's architecture as a checked rule: no import cycle, and no layer importing a higher one.

Every import statement of every module counts, those inside functions and under TYPE_CHECKING too (a lazy
import is still a dependency). docs/architecture.md describes the layers.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "dmocli"

# Lowest first. A module may import its own layer or lower ones; within a layer, no cycle.
LAYERS: list[tuple[str, ...]] = [
    (
        "dmocli.errors",
        "dmocli.version",
        "dmocli.constraints",
        "dmocli.options",
        "dmocli.command_options",
        "dmocli.progress",
    ),
    ("dmocli.data",),
    ("dmocli.operating_point",),
    ("dmocli.shift",),  # the shift maths: operating_point below it, never prep or above
    ("dmocli.prep",),
    ("dmocli.models", "dmocli.report", "dmocli.report_figures", "dmocli.heldout_figures"),
    ("dmocli.engines",),
    ("dmocli.scoring",),
    ("dmocli.solvers", "dmocli.extract"),
    ("dmocli.pipelines",),
    ("dmocli.use",),
    ("dmocli.pages",),  # the HTML pages: read reports, model files and histories, never data
    ("dmocli.estimator",),
    ("dmocli.cli",),
    ("dmocli", "dmocli.__main__"),  # the package's lazy public API and `python -m dmocli`
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _layer(module: str) -> int:
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer of LAYERS: add it"
    return best[0]


def _imports(module: str) -> set[str]:
    """The dmocli modules `module` imports (a `from PACKAGE import NAME` that names a submodule counts as it)."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "dmocli")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "dmocli":
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: _imports(module) for module in MODULES}


def test_every_module_is_in_a_layer():
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_higher_layer(module):
    higher = sorted(target for target in GRAPH[module] if _layer(target) > _layer(module))
    assert not higher, f"{module} (layer {_layer(module)}) imports higher layers: {higher}"


def test_there_is_no_import_cycle():
    cycles: list[list[str]] = []
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The rule is only as good as the parser: a function-level import and a relative one are both found."""
    assert "dmocli.pipelines.streaming" in GRAPH["dmocli.pipelines.train"]  # imported inside train()
    assert "dmocli.solvers.base" in GRAPH["dmocli.solvers"]  # the registry's `from .base import` style or absolute


SOLVER_FAMILIES = sorted(f"dmocli.solvers.{path.parent.name}" for path in (PACKAGE / "solvers").glob("*/__init__.py"))


def _family(module: str) -> str | None:
    return next((family for family in SOLVER_FAMILIES if module.startswith(family + ".")), None)


def test_solver_families_stand_apart():
    """A solver family's subpackage (solvers/ero/, solvers/online/, ...) may use the shared helpers at solvers/'s
    top level, never another family's modules; and no top-level helper depends on a family, so a family can be
    moved or removed alone (the registry names families' modules as text, imported on first use)."""
    assert {"dmocli.solvers.ero", "dmocli.solvers.online", "dmocli.solvers.semisup"} <= set(SOLVER_FAMILIES)
    crossing = sorted(
        f"{module} -> {target}"
        for module in GRAPH
        if module.startswith("dmocli.solvers")
        for target in GRAPH[module]
        if _family(target) is not None and _family(target) != _family(module)
    )
    assert not crossing, "imports across solver families (move the shared code to solvers/'s top level): " + "; ".join(
        crossing
    )


def _closure(prefix: str) -> set[str]:
    """The dmocli modules under `prefix` and every dmocli module they import, directly or through others."""
    seen: set[str] = set()
    todo = [module for module in MODULES if module == prefix or module.startswith(prefix + ".")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(GRAPH[module])
    return seen


def test_training_never_depends_on_the_after_training_half():
    """dmocli/pipelines/ (training: options to saved model) imports nothing of dmocli/use/ (evaluate, threshold,
    predict, monitor, adapt), directly or through another module: training stands alone, and the after-training
    half builds on it. The layer order says so; this names the rule, so a reordering of LAYERS cannot drop it."""
    assert _layer("dmocli.pipelines") < _layer("dmocli.use")
    reached = sorted(module for module in _closure("dmocli.pipelines") if module.startswith("dmocli.use"))
    assert not reached, f"dmocli.pipelines reaches the after-training half: {reached}"


# What dmocli/shift/'s own modules may import beside dmocli's lower layers: the shift maths is pure numpy.
SHIFT_MAY_IMPORT = {"__future__", "numpy", "scipy.special", "math", "statistics", "dataclasses", "typing"}
HEAVY = ("torch", "pyarrow", "pandas", "dask", "distributed", "sklearn", "safetensors")


def _third_party(module: str) -> set[str]:
    """The modules outside dmocli that `module` imports (every statement, lazy ones too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] != "dmocli"}


def test_the_shift_maths_is_pure_numpy():
    """dmocli/shift/ (rate estimation, expected metrics, adaptation, carry, drift statistics) imports only numpy,
    scipy.special and the standard library's maths, and importing all of it (with the lower layers it reaches)
    loads no torch, pyarrow, pandas, Dask or scikit-learn: each formula can be read, tested and reused on arrays
    alone, and a process that only does the maths pays none of their start-up."""
    shift = sorted(module for module in MODULES if module.startswith("dmocli.shift"))
    own = {module: sorted(_third_party(module) - SHIFT_MAY_IMPORT) for module in shift}
    assert not {module: names for module, names in own.items() if names}, f"dmocli.shift imports beyond numpy: {own}"
    imports = "; ".join(f"import {module}" for module in shift)
    probe = f"import sys; {imports}; print(sorted(set(sys.modules) & {set(HEAVY)!r}))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", f"importing dmocli.shift loads {loaded.strip()}"
