"""The evaluation page (`dmo evaluate --html`, dmocli/pages/evaluation.py) on models trained here: the page of the run
is the page of its report JSON (what `dmo report` draws later), byte for byte and run after run; the figures' data the
report keeps are exact counts of the rows; the page says the target met or missed as the split does, and carries the
operating point, every figure's table and the header facts; a failed gate writes its page too; a multi-class model
gets its per-class page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import make_binary_frame, make_gaussian_classes

from dmocli import TrainOptions, train
from dmocli.models.modelfile import file_sha256, load_model
from dmocli.pages.document import cell_text
from dmocli.pages.evaluation import evaluation_page
from dmocli.pages.svg import BLUE, BLUISH_GREEN, DARK_GREY, GREY, REDDISH_PURPLE, SKY_BLUE, VERMILLION


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("evaluation_page")
    make_binary_frame(n=1500, d=4, pos_frac=0.2, seed=1).to_parquet(root / "train.parquet")
    make_binary_frame(n=150, d=4, pos_frac=0.2, seed=2).to_parquet(root / "small.parquet")  # every cut kept
    make_binary_frame(n=1200, d=4, pos_frac=0.2, seed=3).to_parquet(root / "holdout.parquet")
    make_binary_frame(n=600, d=4, pos_frac=0.2, seed=4, sep=0.0).to_parquet(root / "noise.parquet")  # no signal
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.7, seed=0, val_frac=0.3), output=root / "m.st")
    return root


def _evaluate(dmo, root: Path, data: str, name: str, *more: str) -> tuple[int, dict, str]:
    code, _, err = dmo(
        "evaluate",
        root / "m.st",
        root / data,
        "--report",
        root / f"{name}.json",
        "--html",
        root / f"{name}.html",
        *more,
    )
    assert code in (0, 3), err
    report = json.loads((root / f"{name}.json").read_text())
    return code, report, (root / f"{name}.html").read_text(encoding="utf-8")


def test_the_runs_page_is_the_page_of_its_report_and_the_same_run_after_run(binary: Path, dmo) -> None:
    _, report, page = _evaluate(dmo, binary, "holdout.parquet", "first")
    _, again, second = _evaluate(dmo, binary, "holdout.parquet", "second")
    assert page == evaluation_page(report)  # what dmo report draws from the JSON alone
    code, _, err = dmo("report", binary / "first.json", "-o", binary / "later.html")
    assert code == 0 and (binary / "later.html").read_text(encoding="utf-8") == page, err
    # a second run: the same bytes but the report's time of writing, the one date on the page (no render clock, no
    # random ids)
    assert f"report written {report['written_at']}" in page.split("</header>")[0]
    assert page == second.replace(again["written_at"], report["written_at"])
    assert report["model_sha256"] == file_sha256(binary / "m.st") and report["model_sha256"] in page
    assert report["figures"] == again["figures"]


def test_the_figures_data_are_the_rows_counts(binary: Path, dmo) -> None:
    """On 150 rows every cut of the curve is kept: the cut just above the model's threshold flags exactly the split's
    rows, the lowest cut flags every row, the histogram and the reliability bins count every row once."""
    _, report, _ = _evaluate(dmo, binary, "small.parquet", "small")
    split, figures = report["splits"]["data"], report["figures"]
    curve = figures["curve"]
    assert len(curve["threshold"]) == len(set(curve["threshold"])) < 200
    model = load_model(binary / "m.st")
    at = [k for k, cut in enumerate(curve["threshold"]) if cut >= np.float32(model.threshold)][-1]
    assert (curve["tp"][at], curve["fp"][at]) == (split["tp"], split["fp"])
    assert (curve["tp"][-1], curve["tp"][-1] + curve["fp"][-1]) == (split["n_pos"], split["n"])
    histogram, bins = figures["histogram"], figures["reliability"]
    assert sum(histogram["positives"]) == split["n_pos"] and sum(histogram["negatives"]) == split["n"] - split["n_pos"]
    assert sum(bins["rows"]) == split["n"] and sum(bins["positives"]) == split["n_pos"]
    assert len(histogram["edges"]) == len(histogram["positives"]) + 1 == 31


def test_the_page_says_the_verdict_and_carries_its_figures_and_tables(binary: Path, dmo) -> None:
    _, report, page = _evaluate(dmo, binary, "holdout.parquet", "content")
    split = report["splits"]["data"]
    assert '<body data-page="evaluation">' in page
    assert page.count('id="operating-point"') == 1  # the marker on the precision-recall curve
    verdict = "The target is met" if split["feasible"] else "The target is missed"
    assert re.search(rf'<p class="{"met" if split["feasible"] else "missed"}">{verdict}: precision', page)
    figures = re.findall(r'<figure class="plot" id="([^"]+)">', page)
    assert figures == ["confusion", "pr-curve", "metrics-threshold", "reliability", "scores"]
    # every figure is followed by its table, and every <svg> carries its alt text as a title
    assert len(re.findall(r'</figure>\n<table class="numbers[ a-z]*">', page)) == len(figures)
    assert page.count('role="img"') == len(figures) and page.count("<title id=") == len(figures)
    # the operating point's row of the curve's table holds the split's own figures
    # (a column of numbers right-aligned; a column of text left-aligned, class "txt")
    num = "<td>"
    row = '<tr><td class="txt">operating point</td>'
    row += f"{num}{cell_text(split['threshold'])}</td>{num}{cell_text(split['precision'])}"
    assert row in page
    counts = f"{num}{split['tn']}</td>{num}{split['fp']}</td></tr>"
    assert counts in page  # the confusion matrix's negative row
    for fact in (report["model"], report["data"], report["dmocli_version"]):
        assert f"<dd>{fact}</dd>" in page
    assert "http://" not in page.replace("http://www.w3.org/", "") and "https://" not in page and "<script" not in page


def test_the_figures_keep_to_a_colour_blind_safe_palette_and_the_cut_is_dashed_black(binary: Path, dmo) -> None:
    """Every line and marker is one of Okabe and Ito's colours, black or a grey (the red cut beside the orange recall
    line could not be told apart), the model's cut a dashed black line; the figures sit two by two in a grid, each
    still followed by its table."""
    _, _, page = _evaluate(dmo, binary, "holdout.parquet", "colours")
    strokes = set(re.findall(r"stroke: (#[0-9a-f]{6})", page))
    allowed = {BLUE, VERMILLION, SKY_BLUE, BLUISH_GREEN, REDDISH_PURPLE, GREY, DARK_GREY, "#000000", "#cccccc"}
    assert strokes and strokes <= {colour.lower() for colour in allowed}, strokes
    fills = set(re.findall(r"fill: (#[0-9a-f]{6})", page)) - {"#ffffff", "#1f77b4"}  # white; an errorbar cap's
    assert fills <= {colour.lower() for colour in allowed}, fills
    cut = re.search(r'<g id="operating-cut">\s*<path [^>]*style="([^"]*)"', page).group(1)
    assert "stroke-dasharray" in cut and "stroke: #000000" in cut
    grids = re.findall(r'<div class="figures">\n(.*?)\n</div>\n</div>', page, re.DOTALL)
    assert len(grids) == 2
    pairs = [re.findall(r'<div class="pair">\n<figure class="plot" id="([^"]+)">', grid) for grid in grids]
    assert pairs == [["pr-curve", "metrics-threshold"], ["reliability", "scores"]]


def test_a_failed_gate_writes_its_page_saying_so(binary: Path, dmo) -> None:
    code, report, page = _evaluate(dmo, binary, "noise.parquet", "failed", "--gate")
    assert code == 3 and report["gate"]["passed"] is False
    assert '<p class="missed">The target is missed' in page and '<p class="missed">gate failed:' in page
    assert page == evaluation_page(report)


def test_an_unwritable_page_is_refused_before_data_is_read(binary: Path, dmo) -> None:
    code, _, err = dmo("evaluate", binary / "m.st", binary / "holdout.parquet", "--html", binary / "no" / "p.html")
    assert code == 2 and err.count("\n") == 1 and "no" in err
    code, _, err = dmo("evaluate", binary / "m.st", binary / "holdout.parquet", "--html", binary / "holdout.parquet")
    assert code == 2 and "the same file" in err
    code, _, err = dmo("evaluate", binary / "m.st", binary / "holdout.parquet", "--html", binary / "page.txt")
    assert code == 2 and ".html" in err and not (binary / "page.txt").exists()


def test_a_multiclass_model_gets_per_class_figures(tmp_path: Path, dmo) -> None:
    make_gaussian_classes(900, seed=0, d=5, sep=1.0).to_parquet(tmp_path / "train.parquet")
    make_gaussian_classes(300, seed=1, d=5, sep=1.0).to_parquet(tmp_path / "test.parquet")
    train(tmp_path / "train.parquet", TrainOptions(seed=0, val_frac=0.3), output=tmp_path / "m.st")
    code, _, err = dmo(
        "evaluate",
        tmp_path / "m.st",
        tmp_path / "test.parquet",
        "--report",
        tmp_path / "r.json",
        "--html",
        tmp_path / "p.html",
    )
    assert code == 0, err
    report, page = json.loads((tmp_path / "r.json").read_text()), (tmp_path / "p.html").read_text()
    assert "figures" not in report and page == evaluation_page(report)
    assert re.findall(r'<figure class="plot" id="([^"]+)">', page) == ["per-class", "confusion"]
    for name, recall in zip(report["classes"], report["splits"]["data"]["per_class"]["recall"]):
        assert re.search(f'<tr><td( class="txt")?>{re.escape(str(name))}</td>', page)
        assert f"<td>{cell_text(recall)}</td>" in page
