"""docs/architecture.md states the package's size limits; this checks them, so the page cannot go stale
silently: no module over 1,000 lines, and the modules over 500 lines are exactly those its "Module sizes"
section lists, each with its stated size within a fifth of the real one."""

from __future__ import annotations

import re

from conftest import REPO

ROOT = REPO
PACKAGE = ROOT / "dmocli"
LISTED = 500  # modules over this many lines are listed on the page
LIMIT = 1000  # and none is over this


def _lines() -> dict[str, int]:
    return {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }


def _stated() -> dict[str, int]:
    """Module -> its stated size, from the list items of the page's "Module sizes" section."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Module sizes", 1)[1].split("\n## ", 1)[0]
    assert f"{LIMIT:,}" in section and str(LISTED) in section  # the limits checked here are the ones it states
    items = re.findall(r"^- `([\w/]+\.py)` \(about (\d+)", section, flags=re.MULTILINE)
    assert items, "the Module sizes section lists no module as `- `path.py` (about N ...`"
    return {module: int(size) for module, size in items}


def test_no_module_is_over_the_stated_limit():
    over = {module: n for module, n in _lines().items() if n > LIMIT}
    assert not over, f"over {LIMIT:,} lines: {over}; split them"


def test_the_modules_over_500_lines_are_exactly_those_the_page_lists():
    lines = _lines()
    over = {module for module, n in lines.items() if n > LISTED}
    stated = _stated()
    assert over == set(stated), f"docs/architecture.md lists {sorted(stated)}; over {LISTED} lines now: {sorted(over)}"
    for module, size in stated.items():
        assert abs(lines[module] - size) <= lines[module] / 5, f"{module}: stated about {size}, is {lines[module]}"
