"""A page as a person's browser shows it: Debian's Chromium, headless, driven through playwright.

playwright starts the system's browser (`executable_path`); it never downloads one of its own, so the check runs
where `chromium` is installed (`.ci/run` installs it when missing) and is skipped, naming why, where it is not.
`look` opens a page from its file, with JavaScript on or off, and keeps what the browser saw as a `Sight`: the
console's errors, every request the page made, the facts of its document read from the rendered DOM, and a
screenshot of the whole page, from which each figure's picture is cut. test_browser.py judges them; bench/pages.py
times renders and takes the screenshots in docs/images/ with the same code.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

CHROMIUM_NAMES = ("chromium", "chromium-browser")  # Debian's package, and the name other distributions use
VIEWPORT = {"width": 1280, "height": 900}
NEAR_WHITE = 245  # a pixel with every channel at or above this reads as background

# One read of the rendered document. Each figure: its SVG's laid-out size, role and accessible name (the text of
# the element aria-labelledby names), its caption, and whether its table of numbers follows it. Each <img> and
# each image inside an SVG is decoded again by the browser (Image.decode), which fails on a broken one.
DOCUMENT_FACTS = """async () => {
  const size = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  const box = e => {
    const r = e.getBoundingClientRect();
    return [r.left + scrollX, r.top + scrollY, r.width, r.height];
  };
  const named = e => (e.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean)
      .map(id => (document.getElementById(id) || {}).textContent || '').join(' ').trim();
  const decoded = async e => {
    const src = e.getAttribute('src') || e.getAttribute('href') || e.getAttribute('xlink:href') || '';
    const img = new Image();
    img.src = src;
    try { await img.decode(); return {src: src.slice(0, 40), width: img.naturalWidth, height: img.naturalHeight}; }
    catch (err) { return {src: src.slice(0, 40), width: 0, height: 0, error: String(err)}; }
  };
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  const marker = document.getElementById('operating-point');
  return {
    kind: document.body.dataset.page || '',
    lang: document.documentElement.lang,
    title: document.title,
    header: (document.querySelector('header') || {}).innerText || '',
    header_pairs: [...document.querySelectorAll('header dt')].map(
        dt => [dt.textContent.trim(), ((dt.nextElementSibling || {}).textContent || '').trim()]),
    main: (document.querySelector('main') || document.body).innerText,
    verdicts: document.querySelectorAll('p.met, p.missed').length,
    figures: [...document.querySelectorAll('figure.plot')].map(f => {
      const svg = f.querySelector('svg');
      const next = f.nextElementSibling;
      return {id: f.id, svg: svg !== null, box: svg ? box(svg) : [0, 0, 0, 0],
              role: svg ? svg.getAttribute('role') : '', name: svg ? named(svg) : '',
              caption: ((f.querySelector('figcaption') || {}).textContent || '').trim(),
              table_follows: next !== null && next.matches('table.numbers')};
    }),
    tables: [...document.querySelectorAll('table.numbers')].map(t => ({
      size: size(t), caption: ((t.caption || {}).textContent || '').trim(),
      headings: t.querySelectorAll('thead th[scope=col]').length,
      rows: t.querySelectorAll('tbody tr').length,
      short_rows: [...t.querySelectorAll('tbody tr')].filter(
          r => r.cells.length !== t.querySelectorAll('thead th').length).length})),
    images: await Promise.all([...document.querySelectorAll('img, svg image')].map(decoded)),
    marker: marker ? size(marker) : null,
    duplicate_ids: ids.filter((id, i) => ids.indexOf(id) !== i),
    outside_references: [...document.querySelectorAll('[href], [src], [xlink\\\\:href]')]
      .map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('xlink:href') || '')
      .filter(u => !u.startsWith('#') && !u.startsWith('data:')),
    broken_anchors: [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href').slice(1))
      .filter(id => document.getElementById(decodeURIComponent(id)) === null),
    scripts: document.scripts.length,
    scroll_width: document.documentElement.scrollWidth,
    view_width: window.innerWidth,
    column: (() => { const r = document.body.getBoundingClientRect(); return [r.left, r.width]; })(),
    load_ms: (performance.getEntriesByType('navigation')[0] || {}).loadEventEnd || 0,
  };
}"""


def chromium_path() -> str | None:
    """The system's Chromium, or None where none is installed."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass(frozen=True)
class Sight:
    """What the browser saw of one page: its console's errors (and uncaught exceptions), the requests other than
    the page's own file, the document's facts (DOCUMENT_FACTS) and a full-page screenshot."""

    javascript: bool
    console_errors: tuple[str, ...]
    requests: tuple[str, ...]
    facts: dict[str, Any]
    screenshot: bytes

    def ink(self) -> float:
        """The share of the full page's pixels that are not background."""
        return ink(_pixels(self.screenshot))

    def figure_inks(self) -> list[float]:
        """Each figure's share of pixels that are not background, read from the full page's screenshot inside
        the figure's SVG box (a figure of no size: 0)."""
        pixels = _pixels(self.screenshot)
        inks = []
        for figure in self.facts["figures"]:
            left, top, width, height = (round(value) for value in figure["box"])
            inside = pixels[max(top, 0) : top + height, max(left, 0) : left + width]
            inks.append(ink(inside) if inside.size else 0.0)
        return inks


def ink(pixels: np.ndarray) -> float:
    """The share of an RGB picture's pixels darker than near-white in some channel: 0 for a blank picture."""
    return float((pixels < NEAR_WHITE).any(axis=2).mean())


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (playwright's Browser) on the system's executable, closed on leaving."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=path, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def look(browser: Any, page: Path, *, javascript: bool, screenshot: Path | None = None) -> Sight:
    """Open PAGE from its file in a fresh context with JavaScript on or off, every request other than the file
    itself refused (and recorded), and read what the browser rendered. SCREENSHOT, when given, keeps the
    full-page picture there too."""
    url = page.resolve().as_uri()
    context = browser.new_context(java_script_enabled=javascript, viewport=VIEWPORT, device_scale_factor=1)
    errors: list[str] = []
    requests: list[str] = []
    try:
        context.route(lambda target: target != url, lambda route: _refused(route, requests))
        tab = context.new_page()
        tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        tab.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
        tab.goto(url, wait_until="load")
        facts = tab.evaluate(DOCUMENT_FACTS)
        shot = tab.screenshot(full_page=True, path=screenshot)
    finally:
        context.close()
    return Sight(javascript, tuple(errors), tuple(requests), facts, shot)


def _refused(route: Any, requests: list[str]) -> None:
    url = route.request.url
    if not url.startswith("data:"):
        requests.append(url)
    route.abort()
