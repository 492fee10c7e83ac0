"""The training page (`dmo train --html`, `dmo report train.json`, `dmo report MODEL`; dmocli/pages/training.py) on
models trained here: the run's page is the page of its report JSON, byte for byte, and the same for the same
inputs; the figures' data the train report keeps are the held-out rows' exact counts and the same as the model
file's; the page carries the operating point, the certificate, every figure's table, the header facts and the
importance; a 200-feature model's page stays under PAGE_SIZE_LIMIT; a multi-class model's classes meet their
floors on the page."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import _dmo_in_this_process, make_binary_frame, make_gaussian_classes

from dmocli.heldout_figures import IMPORTANCE_TOP, HeldOutFigures
from dmocli.models.modelfile import file_sha256, load_model
from dmocli.pages.training import training_page
from dmocli.pages.write import PAGE_SIZE_LIMIT


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A linear model under --confidence with --cv 3, its report and its page, through the CLI in this process."""
    root = tmp_path_factory.mktemp("training_page")
    make_binary_frame(n=1500, d=4, pos_frac=0.2, seed=1).to_parquet(root / "train.parquet")
    args = ["train", root / "train.parquet", "--problem", "fpor", "--target", "0.7", "--confidence", "0.9"]
    args += ["--cv", "3", "-o", root / "m.safetensors", "--report", root / "train.json", "--html", root / "page.html"]
    ran = _dmo_in_this_process(tuple(args))  # puts back what main sets for the process (messages naming flags)
    assert ran.returncode == 0, ran.stderr
    return root


def _report(root: Path) -> dict:
    return json.loads((root / "train.json").read_text())


def test_the_runs_page_is_the_page_of_its_report_json(trained: Path, dmo) -> None:
    page = (trained / "page.html").read_text(encoding="utf-8")
    assert page == training_page(_report(trained), None, model_sha256=None)
    code, _, err = dmo("report", trained / "train.json", "-o", trained / "again.html")
    assert code == 0, err
    assert (trained / "again.html").read_bytes() == (trained / "page.html").read_bytes()


def test_the_header_names_the_model_file_by_its_hash_and_when_it_was_written(trained: Path) -> None:
    report = _report(trained)
    assert report["model_sha256"] == file_sha256(trained / "m.safetensors")
    header = (trained / "page.html").read_text(encoding="utf-8").split("</header>")[0]
    assert report["model_sha256"] in header and report["written_at"] in header
    assert re.search(r"20\d\d-\d\d-\d\dT", report["written_at"]) and report["dmocli_version"] in header


def test_the_figures_data_are_the_held_out_rows_counts_and_the_model_files(trained: Path) -> None:
    report = _report(trained)
    figures, split = report["figures"], report["splits"]["cv"]
    assert figures["split"] == "cv" == report["operating_point"]["split"]
    curve = figures["curve"]
    assert (curve["tp"][-1], curve["fp"][-1]) == (split["n_pos"], split["n"] - split["n_pos"])  # the last cut: all
    assert np.all(np.diff(curve["tp"]) >= 0) and np.all(np.diff(curve["threshold"]) < 0)
    for bins in (figures["reliability"], figures["uncalibrated"]):
        assert (sum(bins["rows"]), sum(bins["positives"])) == (split["n"], split["n_pos"])
    histogram = figures["histogram"]
    assert (sum(histogram["positives"]), sum(histogram["negatives"])) == (split["n_pos"], split["n"] - split["n_pos"])
    model = load_model(trained / "m.safetensors")
    assert HeldOutFigures.of_curve(model.heldout, model.calibration).to_dict() == figures


def test_the_page_shows_the_operating_point_its_certificate_and_every_figures_numbers(trained: Path) -> None:
    page = (trained / "page.html").read_text(encoding="utf-8")
    report = _report(trained)
    assert '<body data-page="training">' in page and page.startswith("<!doctype html>")
    assert 'id="operating-point"' in page and 'id="certificate-bound"' in page
    assert f"{report['operating_point']['constraint_bound']:.6g}" in page  # the bound, in the table
    figures = re.findall(r'<figure class="plot" id="([^"]+)">', page)
    assert figures == ["pr-curve", "metrics-threshold", "reliability", "scores", "folds", "importance"]
    after = re.findall(r"</figure>\n<table class=\"numbers[^\"]*\"><caption>", page)
    assert len(after) == len(figures)  # each figure is followed by the table of its numbers
    assert len(re.findall(r'role="img" aria-labelledby="[^"]+-title"><title id="[^"]+-title">[^<]+', page)) == 6
    assert not re.search(r"(src|href)=\"(https?:|//)|@import|url\((?!#)", page)  # nothing outside the file
    assert "<script" not in page


def test_importance_lists_the_top_columns_with_their_sign(trained: Path) -> None:
    importance = _report(trained)["importance"]
    assert 0 < len(importance["columns"]) <= IMPORTANCE_TOP
    assert all(isinstance(column["coefficient"], float) for column in importance["columns"])  # linear, numeric
    values = [column["importance"] for column in importance["columns"]]
    assert values == sorted(values, reverse=True)
    page = (trained / "page.html").read_text(encoding="utf-8")
    assert "raises the score" in page or "lowers the score" in page


def test_the_same_inputs_give_the_same_bytes(trained: Path, dmo) -> None:
    report = _report(trained)
    assert training_page(report, None, model_sha256=None) == training_page(report, None, model_sha256=None)
    for name in ("model-1.html", "model-2.html"):
        code, _, err = dmo("report", trained / "m.safetensors", "-o", trained / name)
        assert code == 0, err
    assert (trained / "model-1.html").read_bytes() == (trained / "model-2.html").read_bytes()


def test_the_page_of_a_model_file_has_its_figures_and_hash_and_says_it_keeps_no_date(trained: Path, dmo) -> None:
    """A model file stores no date (its bytes are reproducible): the page says so, and reads no modification time
    (a copy made later, or a checkout, would change it)."""
    os.utime(trained / "m.safetensors", (0, 0))  # 1970: a page that read the mtime would show it
    code, _, err = dmo("report", trained / "m.safetensors", "-o", trained / "model.html")
    assert code == 0, err
    page = (trained / "model.html").read_text(encoding="utf-8")
    header = page.split("</header>")[0]
    assert file_sha256(trained / "m.safetensors") in header and "a model file stores no date" in header
    assert "1970" not in header and not re.search(r"20\d\d-\d\d-\d\dT", header)
    assert 'id="operating-point"' in page and 'id="pr-curve"' in page and 'id="importance"' in page
    assert 'id="certificate-bound"' not in page  # the file keeps whether it is certified, not the bound


def test_a_200_feature_page_stays_under_the_size_limit(tmp_path: Path, dmo) -> None:
    make_binary_frame(n=3000, d=200, pos_frac=0.2, seed=2).to_parquet(tmp_path / "wide.parquet")
    code, _, err = dmo(
        "train", tmp_path / "wide.parquet", "--problem", "frop", "--target", "0.8", "--cv", "3",
        "-o", tmp_path / "wide.safetensors", "--html", tmp_path / "wide.html",
    )  # fmt: skip
    assert code == 0, err
    size = (tmp_path / "wide.html").stat().st_size
    assert size < PAGE_SIZE_LIMIT, size
    page = (tmp_path / "wide.html").read_text(encoding="utf-8")
    assert page.count('<td class="txt">f1') >= 1 and f"The {IMPORTANCE_TOP} most important feature columns" in page


def test_a_multiclass_page_shows_each_class_against_its_floor(tmp_path: Path, dmo) -> None:
    make_gaussian_classes(1500, seed=3, d=4, sep=1.5).to_parquet(tmp_path / "classes.parquet")
    code, _, err = dmo(
        "train", tmp_path / "classes.parquet", "--problem", "frop", "--target", "0.5", "--cv", "3",
        "-o", tmp_path / "classes.safetensors", "--report", tmp_path / "classes.json", "--html", tmp_path / "c.html",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads((tmp_path / "classes.json").read_text())
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert "figures" not in report and 'id="per-class"' in page
    assert page.count('id="floor-') == len(report["classes"])  # each class's floor drawn
    for entry in report["class_operating_point"]["per_class"]:
        assert re.search(
            f'<td( class="txt")?>{re.escape(str(entry["class"]))}</td><td>{entry["offset"]:.6g}</td>', page
        )
