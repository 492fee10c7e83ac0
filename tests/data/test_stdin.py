"""`dmo train -`: a CSV piped into the streaming solvers, read once (shell pipelines, `zcat ... | dmo train -`)."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import load_file


def _weights(path: Path) -> dict[str, np.ndarray]:
    return load_file(str(path))


@pytest.fixture(scope="module")
def piped(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stdin")
    frame = make_binary_frame(n=6000, d=4, pos_frac=0.08, seed=21).round(4)
    frame["site"] = np.where(np.arange(len(frame)) % 3 == 0, "north", "south")
    frame.to_csv(root / "rows.csv", index=False)
    (root / "rows.csv.gz").write_bytes(gzip.compress((root / "rows.csv").read_bytes()))
    return root


def pipe_into_this_process(path: Path, monkeypatch) -> None:
    """The file as this process's standard input, for commands that refuse `-` from their options alone: they
    end before reading it, so a real pipe and process (seconds of start-up) would show nothing more. Commands that
    read the pipe get a real one (run_dmo's stdin), as its being read once, unseekable, is their point."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes()), encoding="utf-8"))


def test_a_pipe_learns_what_the_file_learns_with_an_unknown_length(piped, tmp_path):
    """From a file, n is known after the pre-pass; from a pipe it is not, so FOFO runs its doubling schedule.
    The file with --param horizon=doubling is the same computation (the head holds every row here, so the
    statistics are the same rows too)."""
    out = run_dmo(
        "train", "-", "--solver", "fofo", "-o", tmp_path / "pipe.st", "--json", stdin=piped / "rows.csv", check=True
    )
    report = json.loads(out.stdout)
    assert report["data"] == "standard input" and report["online"]["n"] == 6000
    assert report["prepass"] == {"statistics": "head of standard input", "statistics_rows": 6000}
    assert report["solver_trace"]["doubling"] is True
    run_dmo(
        "train",
        piped / "rows.csv",
        "--solver",
        "fofo",
        "--param",
        "horizon=doubling",
        "-o",
        tmp_path / "file.st",
        check=True,
    )
    pipe, file = _weights(tmp_path / "pipe.st"), _weights(tmp_path / "file.st")
    assert all(np.allclose(pipe[k], file[k], rtol=1e-5, atol=1e-7) for k in file)
    # gzip on the pipe is recognised by its magic bytes: the same model
    run_dmo("train", "-", "--solver", "fofo", "-o", tmp_path / "gz.st", stdin=piped / "rows.csv.gz", check=True)
    gz = _weights(tmp_path / "gz.st")
    assert all(np.array_equal(gz[k], pipe[k]) for k in pipe)
    scored = run_dmo("evaluate", tmp_path / "pipe.st", piped / "rows.csv", "--json", check=True)
    assert json.loads(scored.stdout)["splits"]["data"]["n"] == 6000


def test_a_head_smaller_than_the_stream_fixes_statistics_and_classes(piped, tmp_path):
    out = run_dmo(
        "train",
        "-",
        "--solver",
        "ofo",
        "--param",
        "stats-rows=1000",
        "-o",
        tmp_path / "m.st",
        "--json",
        stdin=piped / "rows.csv",
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["online"]["n"] == 6000 and report["prepass"]["statistics_rows"] == 1000


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--solver", "fofo"], "give -o MODEL"),
        (["--solver", "wce", "-o", "m.st"], "only the streaming solvers"),
        (["--solver", "fofo", "--epochs", "2", "-o", "m.st"], "can be read once"),
        (["--solver", "fofo", "--adjust", "-o", "m.st"], "add --val FILE"),
        (["--solver", "fofo", "--param", "stats-rows=0", "-o", "m.st"], "stats-rows"),
    ],
)
def test_what_needs_a_second_pass_is_refused(piped, tmp_path, monkeypatch, args, needle):
    args = [str(tmp_path / a) if a == "m.st" else a for a in args]
    pipe_into_this_process(piped / "rows.csv", monkeypatch)
    proc = run_dmo("train", "-", *args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "m.st").exists()


def test_a_parquet_file_piped_in_is_named_not_parsed_as_csv(piped, tmp_path):
    parquet = tmp_path / "rows.parquet"
    make_binary_frame(n=200, seed=3).to_parquet(parquet, index=False)
    proc = run_dmo("train", "-", "--solver", "fofo", "-o", tmp_path / "m.st", stdin=parquet)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "holds a parquet file" in proc.stderr and "path" in proc.stderr
    assert not (tmp_path / "m.st").exists()


def test_late_rows_a_pipe_cannot_revisit(tmp_path):
    """Integers that turn decimal after the inferred head are read (features are floats from the start); text
    in a number column, an unseen class, or a missing label after the head are refused by name."""
    rows = 120_000  # over the 1 MB head
    rng = np.random.default_rng(3)
    x = rng.normal(size=rows).round(3)
    labels = (x + rng.normal(size=rows) > 1.5).astype(int).astype(str).tolist()
    counts = [str(i % 5) for i in range(rows)]

    def write(name: str, count: str = "2.5", label: str = "1") -> Path:
        c, lab = list(counts), list(labels)
        c[-2], lab[-2] = count, label
        path = tmp_path / name
        path.write_text("count,x,label\n" + "".join(f"{a},{b},{y}\n" for a, b, y in zip(c, x, lab)))
        return path

    ok = run_dmo(
        "train",
        "-",
        "--solver",
        "fofo",
        "-o",
        tmp_path / "ok.st",
        "--json",
        stdin=write("late_decimal.csv"),
        check=True,
    )
    assert json.loads(ok.stdout)["online"]["n"] == rows
    for name, kwargs, needle in [
        ("text.csv", {"count": "?"}, "column 'count' reads as double in its first rows but holds '?'"),
        ("unseen.csv", {"label": "7"}, "7"),
        ("unlabeled.csv", {"label": ""}, "--drop-unlabeled"),
    ]:
        proc = run_dmo(
            "train",
            "-",
            "--solver",
            "fofo",
            "--param",
            "stats-rows=10000",
            "-o",
            tmp_path / "m.st",
            stdin=write(name, **kwargs),
        )
        assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr, (name, proc.stderr)
        assert not (tmp_path / "m.st").exists()
    dropped = run_dmo(
        "train",
        "-",
        "--solver",
        "fofo",
        "--drop-unlabeled",
        "-o",
        tmp_path / "d.st",
        "--json",
        stdin=tmp_path / "unlabeled.csv",
        check=True,
    )
    assert json.loads(dropped.stdout)["online"]["n"] == rows - 1


def test_evaluate_predict_and_threshold_read_a_pipe_like_the_file(piped, tmp_path):
    model = tmp_path / "m.st"
    run_dmo("train", piped / "rows.csv", "-o", model, check=True)  # wce, in memory; `site` one-hot encoded
    refit = ["threshold", model, "--problem", "frop", "--target", "0.8", "--allow-train-rows"]  # its training rows
    for command in (["evaluate", model], refit):
        outputs = {}
        for name, data, pipe in (("file", piped / "rows.csv", None), ("pipe", "-", piped / "rows.csv.gz")):
            extra = ["-o", tmp_path / f"{name}.st"] if command[0] == "threshold" else []
            proc = run_dmo(*command[:2], data, *command[2:], *extra, "--json", stdin=pipe, check=True)
            report = json.loads(proc.stdout)
            assert report["data"] == ("standard input" if pipe else str(data))  # as train's report names it
            outputs[name] = report["splits"]["data"]
        assert outputs["pipe"] == outputs["file"], command[0]
    run_dmo("predict", model, piped / "rows.csv", "-o", tmp_path / "file.parquet", "--id-col", "site", check=True)
    run_dmo(
        "predict", model, "-", "-o", tmp_path / "pipe.parquet", "--id-col", "site", stdin=piped / "rows.csv", check=True
    )
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "pipe.parquet").equals(pq.read_table(tmp_path / "file.parquet"))


def test_commands_that_read_data_twice_name_standard_input_as_unsupported(piped, tmp_path, monkeypatch):
    for args in (
        ["subsample", "-", "--gamma", "2", "-o", tmp_path / "s.parquet"],
        ["train", piped / "rows.csv", "--val", "-", "-o", tmp_path / "w.st"],
    ):
        pipe_into_this_process(piped / "rows.csv", monkeypatch)
        proc = run_dmo(*args)
        assert proc.returncode == 2 and "standard input" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_truncated_gzip_pipe_is_one_line(piped, tmp_path):
    big = tmp_path / "big.csv"
    big.write_text("".join(piped.joinpath("rows.csv").read_text().splitlines(keepends=True)[1:]) * 40)
    big.write_text(piped.joinpath("rows.csv").read_text().splitlines(keepends=True)[0] + big.read_text())
    whole = gzip.compress(big.read_bytes())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(whole[: len(whole) // 3])
    proc = run_dmo("train", "-", "--solver", "fofo", "-o", tmp_path / "m.st", stdin=cut)
    assert proc.returncode == 2 and "standard input" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "m.st").exists()


def test_predict_writes_csv_to_standard_output(piped, tmp_path):
    """`-o -`: the predictions as CSV on standard output (the summary line on stderr), equal to the parquet
    file's; a multi-class model gets one probability column per class, as CSV has no list type."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    model = tmp_path / "m.st"
    run_dmo("train", piped / "rows.csv", "-o", model, check=True)
    run_dmo("predict", model, piped / "rows.csv", "--id-col", "site", "-o", tmp_path / "p.parquet", check=True)
    proc = run_dmo("predict", model, "-", "--id-col", "site", "-o", "-", stdin=piped / "rows.csv", check=True)
    assert "wrote 6000 predictions to standard output" in proc.stderr
    streamed = pacsv.read_csv(io.BytesIO(proc.stdout.encode()))
    expected = pq.read_table(tmp_path / "p.parquet")
    assert streamed.column_names == expected.column_names and streamed.num_rows == 6000
    assert streamed.column("site").equals(expected.column("site"))
    assert np.allclose(streamed.column("logit").to_numpy(), expected.column("logit").to_numpy(), atol=1e-6)
    assert streamed.column("decision").to_pylist() == expected.column("decision").to_pylist()
    refused = run_dmo("predict", model, piped / "rows.csv", "-o", "-", "--json")
    assert refused.returncode == 2 and "--json" in refused.stderr and refused.stdout == ""

    three = tmp_path / "three.csv"
    frame = make_binary_frame(n=600, d=3, seed=4)
    frame["label"] = np.arange(600) % 3
    frame.to_csv(three, index=False)
    run_dmo("train", three, "-o", tmp_path / "mc.st", check=True)
    out = run_dmo("predict", tmp_path / "mc.st", three, "-o", "-", check=True)
    table = pacsv.read_csv(io.BytesIO(out.stdout.encode()))
    assert table.column_names == ["predicted", "probability", "probability_0", "probability_1", "probability_2"]
    per_class = np.column_stack([table.column(f"probability_{k}").to_numpy() for k in range(3)])
    assert np.allclose(per_class.sum(axis=1), 1.0, atol=1e-5)
    # `probability` is the predicted class's (the raw logits' arg-max), read from its own column
    predicted = table.column("predicted").to_numpy()
    assert np.allclose(per_class[np.arange(600), predicted], table.column("probability").to_numpy())


def test_a_reader_that_stops_early_ends_predict_with_141(piped, tmp_path):
    import subprocess

    from conftest import dmo_command

    model = tmp_path / "m.st"
    big = tmp_path / "big.csv"
    text = piped.joinpath("rows.csv").read_text().splitlines(keepends=True)
    big.write_text(text[0] + "".join(text[1:]) * 30)
    run_dmo("train", piped / "rows.csv", "-o", model, check=True)
    command = " ".join([*dmo_command(), "predict", str(model), str(big), "-o", "-"])
    proc = subprocess.run(
        f"set -o pipefail; {command} | head -2",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=300,
    )
    # the rows head wanted, then exit 141 as for every command whose reader went away (tests/cli/test_closed_stdout.py)
    assert proc.returncode == 141 and len(proc.stdout.splitlines()) == 2 and "Traceback" not in proc.stderr, proc.stderr


def _stdin_rows(text: bytes, monkeypatch, block: int = 999) -> list:
    """The rows dmocli.data.stdin_csv reads from `text` as a stream, parsed in blocks of about `block` bytes."""
    from dmocli.data import stdin_csv

    monkeypatch.setattr(stdin_csv, "_BLOCK_BYTES", block)
    monkeypatch.setattr(stdin_csv, "_HEAD_BYTES", block)
    source = stdin_csv.open_stdin_csv(lambda name: name != "label", stream=io.BytesIO(text))
    return [row for batch in source.batches(source.schema.names) for row in batch.to_pylist()]


def test_blocks_keep_every_row_and_name_the_line_of_a_bad_value(monkeypatch):
    """Parsed block by block: CRLF line ends split between blocks, blank lines before the header and a last line
    without its line end lose nothing; a bad value in a later block is named by its line in the whole stream."""
    from dmocli.errors import DmoError

    lines = [f"{i}.5,{i % 2}" for i in range(20_000)]  # more than the 64 KB head the types come from
    text = ("\r\n\r\nx,label\r\n" + "\r\n".join(lines)).encode()
    rows = _stdin_rows(text, monkeypatch)
    assert [r["x"] for r in rows] == [i + 0.5 for i in range(20_000)]
    assert [r["label"] for r in rows] == [i % 2 for i in range(20_000)]
    lines[15_000] = "oops,1"
    with pytest.raises(DmoError, match=r"column 'x' reads as double .* holds 'oops' at line 15002"):
        _stdin_rows(("x,label\n" + "\n".join(lines) + "\n").encode(), monkeypatch)


def test_a_stream_without_line_ends_is_refused_before_memory_runs_out(monkeypatch):
    from dmocli.data import stdin_csv
    from dmocli.errors import DmoError

    monkeypatch.setattr(stdin_csv, "_LONGEST_LINE", 4096)
    with pytest.raises(DmoError, match="a line longer than .* is it a CSV file"):
        _stdin_rows(b"x,label\n1,0\n" + b"7," * 10_000, monkeypatch)  # within the head
    with pytest.raises(DmoError, match="a line longer than .* is it a CSV file"):
        _stdin_rows(b"x,label\n" + b"1,0\n" * 20_000 + b"7," * 10_000, monkeypatch)  # after it
