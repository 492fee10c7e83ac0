"""A matplotlib figure as inline SVG text that is the same bytes for the same figure.

Pages embed their figures as `<svg>` elements, so a page is one file that needs no network, no image decoder
beyond the browser's own and no JavaScript. matplotlib's SVG writer names clip paths and markers by a hash of
their content salted with `svg.hashsalt` (random unless set) and stamps a date into the metadata; both are fixed
here, per figure, so two renders of the same inputs are byte-identical and two figures on one page never share
an id. Text stays text (`svg.fonttype` none): a screen reader, a search and copy-paste find the labels, and the
file is a fraction of the size glyph paths would take.
"""

from __future__ import annotations

import io
import re

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

DPI = 100  # an image inside a figure (a heat map) is rasterized at this resolution
_XML_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_ROOT = re.compile(r"<svg\b([^>]*)>")
# matplotlib numbers its groups per figure (figure_1, axes_1, line2d_1, ...): on a page of several figures those
# ids would repeat, so they are dropped; an id set with set_gid (no trailing _N) is kept
_AUTO_ID = re.compile(r' id="[A-Za-z][A-Za-z0-9.]*_\d+"')
# Okabe and Ito's colour-blind-safe palette ("Color Universal Design"): the figures use these, black and grey only,
# each with one meaning on every page (blue the curve or the estimate, vermillion the positive rows, recall or the
# realized figure, bluish green the covariate-shift estimate), and the model's cut is always a dashed black line
BLUE, VERMILLION, SKY_BLUE, BLUISH_GREEN, REDDISH_PURPLE = "#0072B2", "#D55E00", "#56B4E9", "#009E73", "#CC79A7"
GREY, DARK_GREY = "#999999", "#555555"
CUT_STYLE = {"color": "black", "linestyle": "--", "linewidth": 1.5}
_RC = {"svg.fonttype": "none", "svg.image_inline": True, "font.family": "DejaVu Sans", "font.size": 9}


def new_figure(width_in: float, height_in: float) -> tuple[Figure, Axes]:
    """A figure with one set of axes, made through matplotlib's object API: no pyplot, so nothing is kept in a
    global figure registry and no GUI backend is ever chosen (the SVG canvas is picked when it is saved)."""
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def svg_text(fig: Figure, *, gid: str, alt: str) -> str:
    """`fig` as an inline `<svg>` element: `id` GID, `role="img"` and `aria-labelledby` naming a `<title>` that
    carries ALT (what a screen reader says instead of the picture), without the XML prologue a standalone file
    has. Artists a test or a reader looks for carry their own `set_gid` (the operating point's marker:
    `operating-point`), which the SVG keeps as the element's id; such a gid must not end in `_N` (a number), the
    form of the ids matplotlib numbers itself, which are dropped."""
    buffer = io.StringIO()
    with rc_context({**_RC, "svg.hashsalt": gid}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = _METADATA.sub("", _XML_PROLOGUE.sub("", buffer.getvalue(), count=1), count=1)
    text = _AUTO_ID.sub("", text)
    title_id = f"{gid}-title"
    root = _ROOT.search(text)
    if root is None:
        raise ValueError("matplotlib wrote no <svg> element")
    head = f'<svg{root.group(1)} id="{_attribute(gid)}" role="img" aria-labelledby="{_attribute(title_id)}">'
    title = f'<title id="{_attribute(title_id)}">{_escaped(alt)}</title>'
    return text[: root.start()] + head + title + text[root.end() :].rstrip() + "\n"


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attribute(text: str) -> str:
    return _escaped(text).replace('"', "&quot;")
