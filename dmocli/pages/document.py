"""The page itself: a title, a header of facts, sections of text, figures and tables, written as one HTML file.

Everything a page needs is inside it: an inline stylesheet, figures as inline SVG, no script, no link to
anything outside the file, so it opens offline, from an attachment or a CI artifact, with JavaScript off. Every
figure is followed by the table of the numbers it shows (a screen reader reads the table, a reviewer copies
from it). The facts in the header (the model file's sha256, the `dmo` version, when the model or the report was
made) come from the input, never from the clock at render time: the same inputs give the same bytes. All text is
escaped (html.escape): column names and levels come from the user's data.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure as PlotFigure

from dmocli.pages.svg import svg_text

KINDS = ("training", "evaluation", "monitoring")
LONG_TABLE = 25  # rows beyond which a table scrolls in a box of its own (printed whole), so the figures stay close
MISSING_CELL = "—"  # a figure not measured (no labels, too few rows): shown as a dash, never as 0

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;
max-width:84rem;padding:0 1rem 3rem;color:#1b1b1b;background:#fff;line-height:1.45}p{max-width:62rem}
header{border-bottom:2px solid #1f4e79;margin-bottom:1rem}
h1{font-size:1.6rem;margin:1rem 0 .4rem}h2{font-size:1.25rem;margin:2rem 0 .5rem;color:#1f4e79}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;font-size:.9rem;margin:.5rem 0 1rem}
dl.facts dt{font-weight:600}dl.facts dd{margin:0;overflow-wrap:anywhere;font-family:ui-monospace,monospace}
nav ol{columns:2;font-size:.9rem;padding-left:1.2rem}
figure.plot{margin:1rem 0 .3rem}figure.plot svg{max-width:100%;height:auto;display:block}
div.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,30rem),1fr));gap:0 2rem;
align-items:start}div.pair{min-width:0}
figcaption{font-weight:600;font-size:.95rem;margin-top:.2rem}
table.numbers{border-collapse:collapse;font-size:.8rem;margin:.3rem 0 1.2rem;font-variant-numeric:tabular-nums;
display:block;overflow-x:auto;width:max-content;max-width:100%}
table.numbers caption{text-align:left;font-weight:600;padding:.2rem 0;caption-side:top}
table.numbers th,table.numbers td{border:1px solid #c8c8c8;padding:.15rem .45rem;text-align:right;
white-space:nowrap;vertical-align:top}table.numbers th{background:#eef2f7}
table.numbers .txt{text-align:left}table.numbers td.prose{white-space:normal;min-width:20rem}
table.long{max-height:24rem;overflow:auto}
table.long thead th{position:sticky;top:0}
details{margin:.3rem 0 1rem}summary{cursor:pointer;font-size:.9rem;color:#1f4e79}
p.met{color:#1a6b2a;font-weight:600}p.missed{color:#a4161a;font-weight:600}p.note{color:#555;font-size:.9rem}
@media print{nav{display:none}details{display:block}table.long{max-height:none;overflow:visible}
div.figures{display:block}}
"""


@dataclass(frozen=True)
class Table:
    """A table of numbers: CAPTION, the COLUMNS' headings and the ROWS, each a sequence of one cell a column.

    Cells are text or numbers; `cell_text` writes a number with six significant digits, a missing one as a dash."""

    caption: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]

    def html(self) -> str:
        """`<table class="numbers">` with its caption and column headings (`<th scope="col">`); the columns of
        numbers right-aligned, the columns of text (a period, a reason: class `txt`, the fewer cells in the large
        tables, a heat map's) left-aligned."""
        text = [not _numeric(row[k] for row in self.rows) for k in range(len(self.columns))]
        head = "".join(
            f'<th scope="col"{_TXT if text[k] else ""}>{_text(column)}</th>' for k, column in enumerate(self.columns)
        )
        # a column of sentences (a gate's reasons) wraps; every other cell keeps to one line (a period, a bin)
        kinds = [
            _PROSE if text[k] and any(len(cell_text(row[k])) > PROSE for row in self.rows) else _TXT if text[k] else ""
            for k in range(len(self.columns))
        ]
        kind = "numbers long" if len(self.rows) > LONG_TABLE else "numbers"
        body = "".join(
            "<tr>" + "".join(f"<td{kinds[k]}>{_text(cell_text(cell))}</td>" for k, cell in enumerate(row)) + "</tr>\n"
            for row in self.rows
        )
        return (
            f'<table class="{kind}"><caption>{_text(self.caption)}</caption>\n'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>\n"
        )


@dataclass(frozen=True)
class Figure:
    """One figure of a page: its ANCHOR (the `<figure>`'s id), TITLE (the caption), ALT (what it shows, in
    words, for a reader who cannot see it), SVG (from svg.svg_text) and the TABLE of every number it shows."""

    anchor: str
    title: str
    alt: str
    svg: str
    table: Table

    @classmethod
    def of(cls, plot: PlotFigure, *, anchor: str, title: str, alt: str, table: Table) -> Figure:
        """A figure from a matplotlib figure: its SVG made with the anchor as id and the alt text as its title."""
        return cls(anchor=anchor, title=title, alt=alt, svg=svg_text(plot, gid=f"{anchor}-plot", alt=alt), table=table)

    def html(self) -> str:
        return (
            f'<figure class="plot" id="{_attribute(self.anchor)}">{self.svg}'
            f"<figcaption>{_text(self.title)}</figcaption></figure>\n{self.table.html()}"
        )


class Page:
    """A page being written: sections, paragraphs, figures and tables in the order they are added.

    TITLE is the page's heading, KIND which page it is (training, evaluation or monitoring: the body's
    `data-page`), FACTS the header's name-value pairs in the order given."""

    def __init__(self, title: str, *, kind: str, facts: Mapping[str, str]) -> None:
        if kind not in KINDS:
            raise ValueError(f"page kind {kind!r} is none of {', '.join(KINDS)}")
        self.title = title
        self.kind = kind
        self.facts = dict(facts)
        self._parts: list[str] = []
        self._sections: list[tuple[str, str]] = []

    def section(self, heading: str, *, anchor: str) -> Page:
        """Start a section (an `<h2>` with id ANCHOR, listed in the page's contents)."""
        self._close_section()
        self._sections.append((anchor, heading))
        self._parts.append(f'<section id="{_attribute(anchor)}">\n<h2>{_text(heading)}</h2>\n')
        return self

    def text(self, paragraph: str, *, css_class: str | None = None) -> Page:
        """A paragraph; CSS_CLASS `met`, `missed` or `note` styles a verdict or an aside."""
        kind = f' class="{_attribute(css_class)}"' if css_class else ""
        self._parts.append(f"<p{kind}>{_text(paragraph)}</p>\n")
        return self

    def figure(self, figure: Figure) -> Page:
        """A figure followed by the table of its numbers."""
        self._parts.append(figure.html())
        return self

    def figures(self, *figures: Figure) -> Page:
        """Figures side by side where the window is wide enough (a CSS grid, one column on a narrow window or in
        print), each still followed by its table."""
        pairs = "".join(f'<div class="pair">\n{figure.html()}</div>\n' for figure in figures)
        self._parts.append(f'<div class="figures">\n{pairs}</div>\n')
        return self

    def table(self, table: Table) -> Page:
        """A table on its own (the options, a data summary)."""
        self._parts.append(table.html())
        return self

    def html(self) -> str:
        """The whole page as text, the same for the same calls."""
        self._close_section()
        facts = "".join(f"<dt>{_text(name)}</dt><dd>{_text(value)}</dd>" for name, value in self.facts.items())
        contents = "".join(
            f'<li><a href="#{_attribute(anchor)}">{_text(heading)}</a></li>' for anchor, heading in self._sections
        )
        nav = f'<nav aria-label="contents"><ol>{contents}</ol></nav>\n' if self._sections else ""
        return (
            '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_text(self.title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f'<body data-page="{self.kind}">\n<header>\n<h1>{_text(self.title)}</h1>\n'
            f'<dl class="facts">{facts}</dl>\n</header>\n{nav}<main>\n{"".join(self._parts)}</main>\n</body>\n</html>\n'
        )

    def _close_section(self) -> None:
        if self._sections and not self._parts[-1].endswith("</section>\n"):
            self._parts.append("</section>\n")


def cell_text(value: Any) -> str:
    """A table cell's text: a float to six significant digits, an integer whole, None or NaN as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING_CELL
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


_TXT, _PROSE = ' class="txt"', ' class="txt prose"'
PROSE = 60  # a text cell longer than this makes its column wrap
_NUMBER = re.compile(r"^[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?(?: \*)?$")  # 1,095  -0.25  3e-05  0.2591 *


def _numeric(cells: Iterable[Any]) -> bool:
    """Whether a column is of numbers: every cell given is one (a missing cell, shown as a dash, counts as either;
    yes/no is text); a column of no cell at all is not."""
    found = False
    for cell in cells:
        if cell is None or (isinstance(cell, float) and math.isnan(cell)):
            continue
        if isinstance(cell, bool) or not _NUMBER.match(cell_text(cell)):
            return False
        found = True
    return found


def _text(value: str) -> str:
    return html.escape(value, quote=False)


def _attribute(value: str) -> str:
    return html.escape(value, quote=True)
