"""The monitoring page (`dmo monitor --html`, dmocli/pages/monitoring.py) on a model trained here and a generated
stream of 12 weeks that drifts (one feature moves, a shop the model never saw appears from week 9): the page of the
run is the page of its report JSON and of the history it wrote, byte for byte and run after run; it shows every
feature's PSI in every week with the cells past the gate's limit marked, the unseen levels, every week's gate
verdict and reasons, and the rate and metrics with the realized ones; inputs of another kind are refused in one
line; 200 features x 52 weeks stay under PAGE_SIZE_LIMIT."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.models.modelfile import file_sha256
from dmocli.pages.document import cell_text
from dmocli.pages.drift_heatmap import _draw
from dmocli.pages.monitoring import _legend_below, monitoring_input, monitoring_page, of_reports
from dmocli.pages.svg import new_figure
from dmocli.pages.write import PAGE_SIZE_LIMIT
from dmocli.report import dumps
from dmocli.use import history
from dmocli.use.monitor import monitor

WEEKS = 12


def stream(weeks: int, rows: int, seed: int, *, features: int = 4, drift: float = 0.12) -> pd.DataFrame:
    """Labeled rows over `weeks` weeks from Monday 2026-03-02 (no time column when `weeks` is 0: training rows):
    feature f1 moves by `drift` standard deviations a week, and shop `z` (never seen in training) appears in the
    ninth week."""
    rng = np.random.default_rng(seed)
    frames = []
    for week in range(max(weeks, 1)):
        y = (rng.random(rows) < 0.2).astype(np.int64)
        x = rng.normal(size=(rows, features)) + 1.5 * y[:, None] * np.linspace(1, 0.3, features)
        x[:, 1] += drift * week
        frame = pd.DataFrame(x.astype(np.float32), columns=[f"f{i}" for i in range(features)])
        frame["shop"] = rng.choice(["a", "b", "c", *(["z"] if week >= 8 else [])], size=rows)
        if weeks:
            start = pd.Timestamp("2026-03-02") + pd.Timedelta(weeks=week)
            frame["created"] = start + pd.to_timedelta(rng.integers(0, 7 * 86_400, rows), unit="s")
        frame["label"] = y
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("monitoring_page")
    stream(0, 3000, 1).to_parquet(root / "train.parquet")
    stream(WEEKS, 300, 2).to_parquet(root / "stream.parquet")
    train(root / "train.parquet", TrainOptions(problem="fpor", target=0.75, seed=0, val_frac=0.3), output=root / "m.st")
    return root


def _monitor(dmo, root: Path, name: str, *more: str) -> tuple[dict, str]:
    code, _, err = dmo(
        "monitor", root / "m.st", root / "stream.parquet", "--time-col", "created", "--every", "week",
        "--report", root / f"{name}.json", "--html", root / f"{name}.html", *more,
    )  # fmt: skip
    assert code == 0, err
    return json.loads((root / f"{name}.json").read_text()), (root / f"{name}.html").read_text(encoding="utf-8")


def test_the_runs_page_is_the_page_of_its_report_and_of_its_history(run: Path, dmo) -> None:
    report, page = _monitor(dmo, run, "first", "--history", run / "h.parquet")
    again, second = _monitor(dmo, run, "second")
    assert page == monitoring_page(monitoring_input([run / "first.json"]))  # what dmo report draws from the JSON
    code, _, err = dmo("report", run / "first.json", "-o", run / "later.html")
    assert code == 0 and (run / "later.html").read_text(encoding="utf-8") == page, err
    # run after run: the same bytes but the report's time of writing (the one date on the page, never the clock's)
    assert f"report written {report['written_at']}" in page.split("</header>")[0]
    assert page == second.replace(again["written_at"], report["written_at"])
    assert report["model_sha256"] == file_sha256(run / "m.st") and report["model_sha256"] in page
    code, _, err = dmo("monitor", run / "m.st", "--history", run / "h.parquet", "--html", run / "history.html")
    assert code == 0, err
    from_history = monitoring_input([run / "h.parquet"])
    assert from_history.made == f"history last written {report['written_at']}"  # its last write: this run's
    assert (run / "history.html").read_text(encoding="utf-8") == monitoring_page(from_history)
    code, _, err = dmo("report", run / "h.parquet", "-o", run / "history_later.html")
    assert code == 0 and (run / "history_later.html").read_text(encoding="utf-8") == monitoring_page(from_history)
    from_report = of_reports([report])
    for kept, reported in zip(from_history.periods, from_report.periods, strict=True):
        assert kept.name == reported.name and dict(kept.psi) == dict(reported.psi)
        assert tuple(kept.reasons) == tuple(reported.reasons) and dict(kept.unseen_rows) == dict(reported.unseen_rows)
        assert kept.estimated == reported.estimated and kept.realized == reported.realized


def test_every_feature_and_week_drift_unseen_levels_and_verdicts_are_shown(run: Path, dmo) -> None:
    report, page = _monitor(dmo, run, "content")
    chunks = report["chunks"]
    assert [chunk["chunk"] for chunk in chunks] == [f"2026-{m:02d}-{d:02d}" for m, d in _mondays()]
    assert '<body data-page="monitoring">' in page
    drift = re.search(r'<figure class="plot" id="drift">.*?<tbody>\n(.*?)</tbody>', page, re.DOTALL).group(1)
    cells = {
        row[0]: row[1:]
        for row in (re.findall(r'<td(?: class="txt")?>([^<]*)</td>', line) for line in drift.splitlines())
    }
    features = ["f0", "f1", "f2", "f3", "shop"]
    assert set(features) <= set(cells)
    past = 0
    for week, chunk in enumerate(chunks):
        drift_map = chunk["drift_map"]
        for name in features:
            marked = name in drift_map["past_limit"]
            past += marked
            assert cells[name][week] == f"{drift_map['psi'][name]:.4f}{' *' if marked else ''}"
    assert past >= 2 and "f1" in chunks[-1]["drift_map"]["past_limit"]  # the drift the stream was made with
    # the unseen shop, week by week, as the report counts it
    unseen = [chunk["drift_map"]["unseen_rows"].get("shop", 0) for chunk in chunks]
    assert unseen[:8] == [0] * 8 and all(count > 0 for count in unseen[8:])
    for chunk, count in zip(chunks, unseen):
        assert f'<tr><td class="txt">{chunk["chunk"]}</td><td>{count}</td></tr>' in page
    # every week's verdict and every reason of it
    for chunk in chunks:
        where = f"chunk {chunk['chunk']}: "
        mine = [reason[len(where) :] for reason in report["gate"]["reasons"] if reason.startswith(where)]
        verdict = "failed" if mine else "passed"
        # the period and the verdict are text (left-aligned), the rows a number (right-aligned)
        txt = '<td class="txt">'
        assert f"<tr>{txt}{chunk['chunk']}</td><td>{chunk['rows']}</td>{txt}{verdict}</td>" in page
        for reason in mine:
            assert html.escape(reason, quote=False) in page
    text = '<th scope="col" class="txt">'
    headings = f'{text}period</th><th scope="col">rows</th>{text}verdict</th>{text}reasons</th>'
    assert headings in page  # only the rows' column is right-aligned
    assert '<td class="txt prose">the ' in page  # the reasons, sentences, wrap; the period and the verdict do not
    # the rate and the metrics, estimated with intervals and realized beside
    for chunk in chunks:
        rate = chunk["positive_rate"]
        num = "<td>"
        assert f"{num}{cell_text(rate['estimate'])}</td>{num}{cell_text(rate['interval'][0])}</td>" in page
        assert f"{num}{cell_text(chunk['realized']['precision'])}</td>" in page
    assert re.findall(r'<figure class="plot" id="([^"]+)">', page) == [
        "positive-rate", "precision-by-period", "recall-by-period", "drift",
    ]  # fmt: skip


def test_the_covariate_shift_estimate_stands_beside_the_label_shift_one(run: Path, dmo) -> None:
    """Both estimates the report keeps, in each metric's figure and table, with whether the two assumptions agree;
    the rate under covariate shift (the expected positives over the rows) in the rate's; and the periods where the
    assumptions disagree named in words."""
    report, page = _monitor(dmo, run, "assumptions")
    num = "<td>"
    for chunk in report["chunks"]:
        agree = "yes" if chunk["assumptions"]["agree"] else "no"
        for metric in ("precision", "recall"):
            label, covariate = chunk["label_shift"], chunk["covariate_shift"]
            row = f'<tr><td class="txt">{chunk["chunk"]}</td>{num}{cell_text(label[metric])}</td>'
            row += "".join(f"{num}{cell_text(v)}</td>" for v in label[f"{metric}_interval"])
            row += f"{num}{cell_text(covariate[metric])}</td>"
            row += "".join(f"{num}{cell_text(v)}</td>" for v in covariate[f"{metric}_interval"])
            row += f'<td class="txt">{agree}</td>'
            assert row in page, (metric, chunk["chunk"])
        expected = (chunk["covariate_shift"]["tp"] + chunk["covariate_shift"]["fn"]) / chunk["rows"]
        assert f'{num}{cell_text(expected)}</td><td class="txt">{agree}</td>' in page  # the rate's table
    assert page.count("estimated under covariate shift") >= 3  # the rate's and each metric's legend
    apart = [chunk["chunk"] for chunk in report["chunks"] if not chunk["assumptions"]["agree"]]
    agreed = len(report["chunks"]) - len(apart)
    assert f"They agree on {agreed} of {len(report['chunks'])} period(s)" in page
    if apart:
        assert f"they disagree on {', '.join(apart[:10])}" in page


def test_the_heat_maps_title_bar_and_legends_do_not_run_into_each_other() -> None:
    """On a map of 12 periods the title stays clear of the colour bar and the bar's label inside the figure (a
    one-line title ran into the bar, and the label was cut); a period figure's legend sits below its axes, where it
    covers no point."""
    names, periods = ["channel", "amount", "age", "score", "noise"], [f"2026-01-{d:02d}" for d in range(1, 13)]
    fig = _draw(np.random.default_rng(0).uniform(0, 1, (5, 12)), names, periods, [(3, 1)])
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax, bar = fig.axes
    label = bar.yaxis.label.get_window_extent(renderer)
    assert not ax.title.get_window_extent(renderer).overlaps(bar.get_tightbbox(renderer))
    assert fig.bbox.x0 <= label.x0 and label.x1 <= fig.bbox.x1 and fig.bbox.y0 <= label.y0 and label.y1 <= fig.bbox.y1
    fig, ax = new_figure(6.0, 4.0)
    ax.plot(range(12), np.linspace(0.1, 0.9, 12), "o-", label="estimated under label shift")
    ax.plot(range(12), np.linspace(0.2, 0.8, 12), "s", label="realized (labeled rows)")
    _legend_below(fig, ax)
    fig.draw_without_rendering()
    (legend,) = fig.legends
    assert legend.get_window_extent(fig._get_renderer()).y1 <= ax.get_window_extent(fig._get_renderer()).y0


def _mondays() -> list[tuple[int, int]]:
    return [((d := pd.Timestamp("2026-03-02") + pd.Timedelta(weeks=k)).month, d.day) for k in range(WEEKS)]


def test_a_history_written_before_it_kept_every_feature_reads_without_drift(run: Path, dmo) -> None:
    """A history file of the first schema-1 columns (no drift_psi, drift_past_limit, unseen_rows, gate_reason_list)
    reads with them empty, and its page says there are no drift figures and gives the first reason it kept."""
    report, _ = _monitor(dmo, run, "old", "--history", run / "old.parquet")
    table = pq.read_table(run / "old.parquet")
    pq.write_table(table.drop_columns([name for name, _ in history.ADDED_COLUMNS]), run / "old.parquet")
    page = monitoring_page(monitoring_input([run / "old.parquet"]))
    assert "No period has drift figures" in page
    failed = next(row for row in history.read(run / "old.parquet").to_pylist() if row["gate_reasons"])
    assert failed["gate_reason_list"] is None and html.escape(failed["gate_first_reason"], quote=False) in page


def test_inputs_of_another_kind_are_refused_in_one_line(run: Path, tmp_path: Path, dmo) -> None:
    report, _ = _monitor(dmo, run, "kinds")
    evaluate = {**report, "command": "evaluate"}
    (tmp_path / "evaluate.json").write_text(json.dumps(evaluate))
    (tmp_path / "cut.json").write_text(json.dumps(report)[:-200])
    (tmp_path / "other.json").write_text(json.dumps({**report, "model_sha256": "0" * 64}))
    (tmp_path / "table.parquet").write_bytes((run / "stream.parquet").read_bytes())
    cases = {
        (tmp_path / "evaluate.json",): "the report of dmo evaluate",
        (tmp_path / "cut.json",): "is not complete JSON",
        (run / "kinds.json", tmp_path / "other.json"): "different model files",
        (tmp_path / "table.parquet",): "is not a dmo monitoring history",
        (run / "kinds.json", tmp_path / "table.parquet"): "give it alone",
    }
    for paths, message in cases.items():
        with pytest.raises(DmoError, match=message) as refused:
            monitoring_input(paths)
        assert "\n" not in str(refused.value)


def test_two_hundred_features_over_fifty_two_weeks_stay_under_the_size_limit(tmp_path: Path) -> None:
    weeks, features = 52, 200
    stream(0, 2000, 5, features=features).to_parquet(tmp_path / "train.parquet")
    stream(weeks, 60, 6, features=features, drift=0.05).to_parquet(tmp_path / "stream.parquet")
    train(tmp_path / "train.parquet", TrainOptions(problem="fpor", target=0.7, seed=0), output=tmp_path / "m.st")
    result = monitor(tmp_path / "m.st", tmp_path / "stream.parquet", time_col="created", every="week")
    assert len(result.chunks) == weeks and len(result.chunks[0].section.drift_map.psi) == features + 1
    page = monitoring_page(of_reports([json.loads(dumps(result.to_dict()))]))
    size = len(page.encode("utf-8"))
    assert size < PAGE_SIZE_LIMIT, size
    assert page.count('<tr><td class="txt">f') >= features  # every feature's row in the heat map's table
