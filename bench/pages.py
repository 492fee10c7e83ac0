"""The HTML pages of issue 47: how big each is, how long `dmo report` takes to make it and Chromium to open it.

Three cases, each a model with its three pages (training, evaluation, monitoring), written by the commands'
`--html` on a real run:

- sample_data: `dmo train sample_data/train.parquet --val sample_data/val.parquet --problem frop --target 0.8
  --cv 5`, evaluated on test.parquet, monitored on test.parquet in chunks of CHUNK rows (it has no time column);
- drifting: tests/pages/page_runs.py's transactions, monitored over a stream of 12 weeks that drifts (the pages
  the browser test opens);
- wide: the same with 200 features, monitored over 52 weeks: the size the issue bounds (< 2 MB).

For each page: its bytes; `dmo report REPORT.json -o PAGE` in a fresh process (median of RUNS, start-up
included: what a CI job pays to render a kept report; wall and CPU seconds); whether that page equals the --html
one byte for byte; Chromium's time from opening the file to its load event, the page parsed, laid out and its
figures drawn (the navigation timing's loadEventEnd, median of RUNS, JavaScript on); the figures and tables it
shows. `--screenshots DIR` also writes DIR/page-KIND.png (sample_data's training and evaluation pages, the
drifting stream's monitoring page: the one with periods), the page's column and its top SHOT_HEIGHT pixels.

    python bench/pages.py [--runs 3] [--screenshots docs/images]

Results: bench/results/pages.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "pages"))
from _common import REPO, print_table, write_results  # noqa: E402
from browser_check import chromium, look  # noqa: E402
from page_runs import KINDS, make_pages  # noqa: E402

SAMPLE = REPO / "sample_data"
CHUNK = 220  # test.parquet's 1,095 rows in five chunks
WIDE_FEATURES, WIDE_WEEKS = 200, 52
SIZE_LIMIT = 2 * 1024 * 1024
SHOT_HEIGHT = 2400  # a screenshot shows the header and the first figures; the whole page is far longer
MARGIN = 24  # pixels kept either side of the page's column in a screenshot
SHOTS = {"training": "sample_data", "evaluation": "sample_data", "monitoring": "drifting"}


class Dmo:
    """Runs `dmo ARGS` in a fresh process inside ROOT, a path under ROOT given relative to it: the pages name the
    files as a user who ran the commands there would see them (`model.safetensors`, `sample_data/train.parquet`).
    A failure stops the benchmark with dmo's message."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, *args: Any) -> None:
        named = [
            str(a.relative_to(self.root)) if isinstance(a, Path) and a.is_relative_to(self.root) else str(a)
            for a in args
        ]
        exe = str(Path(sys.executable).with_name("dmo"))
        proc = subprocess.run([exe, *named], capture_output=True, text=True, cwd=self.root)
        if proc.returncode != 0:
            raise RuntimeError(f"dmo {' '.join(named)}: {proc.stderr[-2000:]}")


def sample_pages(root: Path) -> dict[str, Path]:
    """sample_data's three pages, the model trained as the README's first command trains it."""
    dmo = Dmo(root)
    (root / "sample_data").symlink_to(SAMPLE, target_is_directory=True)
    model = root / "page_blocks.safetensors"
    page = {kind: root / f"{kind}.html" for kind in KINDS}
    report = {kind: root / f"{kind}.json" for kind in KINDS}
    train = ("--problem", "frop", "--target", "0.8", "--cv", "5", "--val", root / "sample_data" / "val.parquet")
    outputs = ("-o", model, "--report", report["training"], "--html", page["training"])
    dmo("train", root / "sample_data" / "train.parquet", *train, *outputs)
    test = root / "sample_data" / "test.parquet"
    dmo("evaluate", model, test, "--report", report["evaluation"], "--html", page["evaluation"])
    dmo("monitor", model, test, "--chunk-size", CHUNK, "--report", report["monitoring"], "--html", page["monitoring"])
    return page


CASES: dict[str, Callable[[Path], dict[str, Path]]] = {
    "sample_data": sample_pages,
    "drifting": lambda root: make_pages(Dmo(root), root),
    "wide": lambda root: make_pages(Dmo(root), root, weeks=WIDE_WEEKS, extra=WIDE_FEATURES - 4),
}


def median_seconds(action: Callable[[], Any], runs: int) -> tuple[float, float]:
    """The median wall seconds of RUNS calls of ACTION, and the median CPU seconds (user + system) of the
    processes each call started: the CPU figure holds on a loaded machine, where the wall figure stretches."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        action()
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def measure(case: str, page: Path, browser: Any, runs: int) -> dict[str, Any]:
    """One page's row: its size, the time to make it again from its report and to open it, what it shows."""
    again = page.with_name(f"{page.stem}-again.html")
    report = page.with_suffix(".json")
    make, make_cpu = median_seconds(lambda: Dmo(page.parent)("report", report, "-o", again), runs)
    sights = [look(browser, page, javascript=True) for _ in range(runs)]
    sight = sights[0]
    return {
        "case": case,
        "page": page.stem,
        "bytes": page.stat().st_size,
        "under_2MB": page.stat().st_size < SIZE_LIMIT,
        "report_s": round(make, 3),
        "report_cpu_s": round(make_cpu, 3),
        "same_as_html": again.read_bytes() == page.read_bytes(),
        "chromium_s": round(statistics.median(seen.facts["load_ms"] for seen in sights) / 1000, 3),
        "figures": len(sight.facts["figures"]),
        "tables": len(sight.facts["tables"]),
        "console_errors": len(sight.console_errors),
    }


def screenshot(browser: Any, page: Path, target: Path) -> None:
    """The page as Chromium shows it with JavaScript off, cut to its column of text (the margins of the window
    left out) and SHOT_HEIGHT pixels, as a palette PNG."""
    sight = look(browser, page, javascript=False, screenshot=target)
    left, width = sight.facts["column"]
    with Image.open(target) as full:
        box = (max(0, left - MARGIN), 0, min(full.width, left + width + MARGIN), min(full.height, SHOT_HEIGHT))
        top = full.crop(box).convert("RGB")
    top.quantize(colors=256).save(target, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--screenshots", type=Path, help="write page-KIND.png here (docs/images)")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch, chromium() as browser:
        for case in args.cases:
            root = Path(scratch) / case
            root.mkdir()
            started = time.perf_counter()
            pages = CASES[case](root)
            print(f"{case}: trained, evaluated and monitored with --html in {time.perf_counter() - started:.1f} s")
            rows += [measure(case, pages[kind], browser, args.runs) for kind in KINDS]
            if args.screenshots:
                args.screenshots.mkdir(parents=True, exist_ok=True)
                for kind in (kind for kind, source in SHOTS.items() if source == case):
                    screenshot(browser, pages[kind], args.screenshots / f"page-{kind}.png")
    columns = ["case", "page", "bytes", "under_2MB", "report_s", "report_cpu_s", "same_as_html", "chromium_s"]
    print_table(rows, [*columns, "figures", "tables", "console_errors"])
    command = "python bench/pages.py " + " ".join(sys.argv[1:])
    load = os.getloadavg()  # the timings are wall seconds: a loaded machine stretches them
    path = write_results("pages", {"command": command.strip(), "runs": args.runs, "load_average": load, "rows": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
