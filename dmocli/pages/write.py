"""A page written to its path the way every other output is: under a temporary name beside it, renamed into
place once whole (data/outputs.py atomic_path), so a failed render leaves the old page or nothing, and inside a
command's `outputs_together` the page is renamed with the model and the report, never alone.
"""

from __future__ import annotations

from pathlib import Path

from dmocli.data.outputs import atomic_path
from dmocli.errors import DmoError

# what a page may weigh, in bytes: the bound for the largest page asked for (a monitoring history of
# 200 features x 52 periods; a training page of 200 features), which tests/pages checks; a page is not refused
# above it, the bound is what the figures and tables are sized to stay under
PAGE_SIZE_LIMIT = 2_000_000
PAGE_SUFFIXES = (".html", ".htm")


def write_page(html: str, path: Path) -> None:
    """Write HTML to PATH as UTF-8 (whatever the locale), atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(html.encode("utf-8"))


def refuse_misnamed_page(path: Path, flag: str) -> None:
    """A page written under another kind of file's name (`-o train.json`) would be read as that kind by the next
    step; refused in one line, before anything is read."""
    if path.suffix.lower() not in PAGE_SUFFIXES:
        raise DmoError(f"{flag} {path} is not an .html name; a page is one HTML file: name it PAGE.html")
