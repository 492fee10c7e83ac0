"""The three pages in a real browser (issue 47): headless Chromium opens each page from its file, with JavaScript
on and off, and every check below must hold, each a test of its own.

The pages come from real runs on generated data: a model trained with `dmo train --html`, evaluated on fresh
rows with `dmo evaluate --html`, and monitored over a stream of twelve weeks that drifts (`dmo monitor --time-col
--every week --html`). The checks (CHECKS): nothing in the console, no request leaving the file, the page's kind
and language, the header's facts, every figure drawn and named, every image decoded, every figure followed by
the table of its numbers, the page's key elements, ink on the page, no id twice, nothing wider than the
window. `test_each_check_finds_its_defect` shows each check failing on a page built with that one defect.
Skipped, naming why, only where no Chromium is installed (`.ci/run` installs Debian's `chromium`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser_check import CHROMIUM_NAMES, Sight, _pixels, chromium, chromium_path, look
from conftest import run_dmo
from page_runs import KINDS, make_pages, week_names

from dmocli.version import __version__

pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason=f"no Chromium on PATH ({' or '.join(CHROMIUM_NAMES)}): `apt-get install chromium` (.ci/run does)",
)

PAGE_INK = 0.02  # a page of figures and tables covers far more; a blank or unstyled-empty page far less
FIGURE_INK = 0.01  # the axes, ticks and labels alone exceed it; an SVG that drew nothing is white


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three pages, each written by its command's --html on a real run."""
    return make_pages(lambda *args: run_dmo(*args, check=True), tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as opened:
        yield opened


@pytest.fixture(scope="module")
def seen(pages: dict[str, Path], browser: Any) -> Callable[[str, bool], Sight]:
    """What Chromium saw of a page, JavaScript on or off: opened once a module, read by every check."""

    @cache
    def sight(kind: str, javascript: bool) -> Sight:
        return look(browser, pages[kind], javascript=javascript)

    return sight


# The checks: each takes what the browser saw of a page of KIND and returns its problems, none when it holds.


def console_clean(sight: Sight, kind: str) -> list[str]:
    return [f"console: {message}" for message in sight.console_errors]


def self_contained(sight: Sight, kind: str) -> list[str]:
    requested = [f"requested {url}" for url in sight.requests]
    return requested + [f"refers to {url}" for url in sight.facts["outside_references"]]


def page_kind(sight: Sight, kind: str) -> list[str]:
    facts = sight.facts
    problems = [] if facts["kind"] == kind else [f"body data-page is {facts['kind']!r}, not {kind!r}"]
    problems += [] if facts["lang"] == "en" else [f"html lang is {facts['lang']!r}"]
    return problems + ([] if facts["title"].strip() else ["the page has no title"])


def header_facts(sight: Sight, kind: str) -> list[str]:
    """The header's facts: the model file's sha256, dmo's version, and when it was made (a "made" fact: reports and
    model files keep no date, so that the same inputs give the same bytes, and a page says so there)."""
    facts = dict(sight.facts["header_pairs"])
    problems = [] if facts.get("dmo version") == __version__ else [f"dmo version {facts.get('dmo version')!r}"]
    if not re.fullmatch(r"[0-9a-f]{64}", facts.get("model sha256", "")):
        problems.append(f"model sha256 {facts.get('model sha256')!r}")
    return problems + ([] if facts.get("made") else [f"no 'made' fact among {sorted(facts)}"])


def figures_drawn(sight: Sight, kind: str) -> list[str]:
    figures = sight.facts["figures"]
    if not figures:
        return ["the page has no figure"]
    problems = [f"figure {f['id']!r} has no <svg>" for f in figures if not f["svg"]]
    problems += [f"figure {f['id']!r} is {f['box'][2:]} px" for f in figures if min(f["box"][2:]) <= 0]
    inks = sight.figure_inks()
    return problems + [f"figure {f['id']!r} is blank ({i:.2%} ink)" for f, i in zip(figures, inks) if i < FIGURE_INK]


def images_decoded(sight: Sight, kind: str) -> list[str]:
    return [
        f"image {image['src']!r} not decoded: {image.get('error', 'no size')}"
        for image in sight.facts["images"]
        if min(image["width"], image["height"]) <= 0
    ]


def figures_named(sight: Sight, kind: str) -> list[str]:
    problems = []
    for figure in sight.facts["figures"]:
        if figure["role"] != "img" or not figure["name"]:
            problems.append(f"figure {figure['id']!r}: role {figure['role']!r}, accessible name {figure['name']!r}")
        if not figure["caption"]:
            problems.append(f"figure {figure['id']!r} has no caption")
    return problems


def numbers_tables(sight: Sight, kind: str) -> list[str]:
    facts = sight.facts
    problems = [f"figure {f['id']!r} is not followed by its table" for f in facts["figures"] if not f["table_follows"]]
    for number, table in enumerate(facts["tables"], 1):
        name = f"table {number} ({table['caption']!r})"
        if not table["caption"] or table["headings"] == 0 or table["rows"] == 0:
            problems.append(f"{name}: {table['headings']} column headings, {table['rows']} rows")
        if min(table["size"]) <= 0:
            problems.append(f"{name} is not shown ({table['size']} px)")
        if table["short_rows"]:
            problems.append(f"{name}: {table['short_rows']} rows with another number of cells than headings")
    return problems


def key_elements(sight: Sight, kind: str) -> list[str]:
    """Training and evaluation: the operating point's marker drawn (an evaluation also says whether the target was
    met); monitoring: every week of the stream named and the drift heat map (figure `drift`) drawn."""
    facts = sight.facts
    if kind == "monitoring":
        problems = [f"week {week} is not on the page" for week in week_names() if week not in facts["main"]]
        drift = [figure for figure in facts["figures"] if figure["id"] == "drift"]
        return problems + ([] if drift else [f"no drift heat map among {[f['id'] for f in facts['figures']]}"])
    marker = facts["marker"]
    problems = [] if marker and min(marker) > 0 else [f"the operating point's marker is {marker}"]
    if kind == "evaluation" and facts["verdicts"] == 0:
        problems.append("no paragraph says whether the target was met (p.met or p.missed)")
    return problems


def not_blank(sight: Sight, kind: str) -> list[str]:
    share = sight.ink()
    return [] if share >= PAGE_INK else [f"the page is nearly blank: {share:.2%} of it is not background"]


def ids_and_links(sight: Sight, kind: str) -> list[str]:
    facts = sight.facts
    problems = [f"id {name!r} used twice" for name in sorted(set(facts["duplicate_ids"]))]
    return problems + [f"a link to #{name} that nothing on the page has" for name in facts["broken_anchors"]]


def fits_window(sight: Sight, kind: str) -> list[str]:
    wide, window = sight.facts["scroll_width"], sight.facts["view_width"]
    return [] if wide <= window else [f"the page is {wide} px wide in a {window} px window"]


CHECKS: dict[str, Callable[[Sight, str], list[str]]] = {
    check.__name__: check
    for check in (
        console_clean,
        self_contained,
        page_kind,
        header_facts,
        figures_drawn,
        images_decoded,
        figures_named,
        numbers_tables,
        key_elements,
        not_blank,
        ids_and_links,
        fits_window,
    )
}


@pytest.mark.parametrize("javascript", [True, False], ids=["js-on", "js-off"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("check", CHECKS)
def test_page_in_chromium(check: str, kind: str, javascript: bool, seen: Callable[[str, bool], Sight]) -> None:
    problems = CHECKS[check](seen(kind, javascript), kind)
    assert not problems, f"{kind} page, JavaScript {'on' if javascript else 'off'}: {problems}"


@pytest.mark.parametrize("kind", KINDS)
def test_the_page_shows_the_same_without_javascript(kind: str, seen: Callable[[str, bool], Sight]) -> None:
    on, off = seen(kind, True), seen(kind, False)
    shown = ("figures", "tables", "header", "main", "marker")
    assert {key: off.facts[key] for key in shown} == {key: on.facts[key] for key in shown}
    before, after = _pixels(on.screenshot), _pixels(off.screenshot)
    assert before.shape == after.shape  # the same layout, to the pixel
    differing = np.count_nonzero((before != after).any(axis=-1))
    assert differing <= before.shape[0] * before.shape[1] // 1000, differing  # a loaded machine's anti-aliasing aside


@pytest.mark.parametrize("kind", ["training", "evaluation"])
def test_two_figures_stand_side_by_side_on_a_wide_window(kind: str, seen: Callable[[str, bool], Sight]) -> None:
    """The curve and the metrics against the threshold, the reliability diagram and the scores: each pair on one
    row in a window as wide as the browser check's (1280 px), the first on the left, so the page is about half as
    tall as one figure under another made it."""
    boxes = {figure["id"]: figure["box"] for figure in seen(kind, False).facts["figures"]}
    for left, right in (("pr-curve", "metrics-threshold"), ("reliability", "scores")):
        (x_left, y_left, width, _), (x_right, y_right, *_) = boxes[left], boxes[right]
        assert abs(y_left - y_right) < 1 and x_left + width <= x_right, (left, boxes[left], right, boxes[right])


def hand_page() -> str:
    """A small training page built with the page's own parts: a curve with the operating point and its table."""
    from dmocli.pages.document import Figure, Page, Table
    from dmocli.pages.svg import new_figure

    plot, axes = new_figure(6, 3.5)
    axes.plot([0.0, 0.5, 1.0], [1.0, 0.8, 0.2])
    axes.plot([0.5], [0.8], "o", gid="operating-point")
    axes.set(title="Precision against recall", xlabel="recall", ylabel="precision")
    numbers = Table("The curve's points", ["recall", "precision"], [[0.0, 1.0], [0.5, 0.8], [1.0, 0.2]])
    facts = {"model sha256": "ab" * 32, "dmo version": __version__, "made": "not recorded"}
    page = Page("A model", kind="training", facts=facts).section("The curve", anchor="curve")
    alt = "Precision falls from 1 to 0.2 as recall rises; the operating point at recall 0.5."
    return page.figure(Figure.of(plot, anchor="pr", title="The curve", alt=alt, table=numbers)).html()


EMPTY_FIGURE = (
    '<figure class="plot" id="empty"><svg role="img" aria-labelledby="e" width="400" height="300">'
    '<title id="e">nothing</title></svg><figcaption>Empty</figcaption></figure>'
)
# Each check's defect: the good page's text changed by one replacement (OLD, NEW), found by the check named.
DEFECTS = {
    "console_clean": ("</main>", "</main><script>console.error('a figure failed')</script>"),
    "self_contained": ("</main>", '</main><p style="background:url(https://example.com/x.png)">x</p>'),
    "page_kind": ('data-page="training"', 'data-page="evaluation"'),
    "header_facts": ("<dt>made</dt>", "<dt>built</dt>"),
    "figures_drawn": ("</main>", f"{EMPTY_FIGURE}<table class='numbers'></table></main>"),
    "images_decoded": ("</main>", '<img src="data:image/png;base64,AAAA" alt="broken"></main>'),
    "figures_named": ('role="img"', ""),
    "numbers_tables": ('</figure>\n<table class="numbers">', '</figure>\n<p>between</p><table class="numbers">'),
    "key_elements": ('id="operating-point"', 'id="a-point"'),
    "not_blank": ("</style>", "header,nav,main{visibility:hidden}</style>"),
    "ids_and_links": ('href="#curve"', 'href="#nowhere"'),
    "fits_window": ("</main>", '<div style="width:3000px">wide</div></main>'),
}


def test_the_hand_made_page_passes_every_check(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "good.html").write_text(hand_page())
    sight = look(browser, tmp_path / "good.html", javascript=True)
    assert {check: CHECKS[check](sight, "training") for check in CHECKS} == dict.fromkeys(CHECKS, [])
    assert DEFECTS.keys() == CHECKS.keys()


@pytest.mark.parametrize("check", CHECKS)
def test_each_check_finds_its_defect(check: str, browser: Any, tmp_path: Path) -> None:
    good = hand_page()
    old, new = DEFECTS[check]
    assert old in good
    (tmp_path / "bad.html").write_text(good.replace(old, new, 1))
    assert CHECKS[check](look(browser, tmp_path / "bad.html", javascript=True), "training") != []
