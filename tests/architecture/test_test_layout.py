"""tests/ follows dmocli's package layout, and its modules can keep importing one another by basename.

With pytest's default "prepend" import mode and no __init__.py, a test module is imported under its basename
(tests/conftest.py puts every folder on sys.path), so two `test_x.py` in different folders would collide: the
basenames must stay unique. Each folder is a package of dmocli (tests/solvers/ero/ tests dmocli/solvers/ero/),
except architecture/ (the package as a whole) and end_to_end/ (a user's session across every layer); the root
holds the tests of dmocli's top-level modules (estimator.py, options.py, progress.py, report.py, the Python API)."""

from __future__ import annotations

from collections import Counter

from conftest import REPO

TESTS = REPO / "tests"
NOT_PACKAGES = {"architecture", "end_to_end"}


def _folders() -> list[str]:
    return sorted({module.parent.relative_to(TESTS).as_posix() for module in TESTS.rglob("test_*.py")} - {"."})


def test_test_module_basenames_are_unique():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    twice = sorted(name for name, count in names.items() if count > 1)
    assert not twice, f"test modules named alike in two folders: {twice}; rename one (they import by basename)"


def test_no_folder_of_tests_is_a_python_package():
    packages = sorted(path.relative_to(TESTS).as_posix() for path in TESTS.rglob("__init__.py"))
    assert not packages, f"{packages}: remove them (tests/conftest.py names test modules by basename)"


def test_every_folder_of_tests_is_a_package_of_dmocli():
    folders = _folders()
    assert {"cli", "data", "prep", "models", "solvers", "operating_point", "pipelines"} <= set(folders)
    strays = [
        f for f in folders if f.split("/")[0] not in NOT_PACKAGES and not (REPO / "dmocli" / f / "__init__.py").exists()
    ]
    assert not strays, f"tests/{strays} match no package of dmocli; put each module beside what it tests"
