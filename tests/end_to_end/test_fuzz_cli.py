"""Fuzz `dmo check`, `train`, `evaluate` and `predict` in this process with small generated tables (odd column
names, mixed, broken and empty cells, labels present, absent, constant, empty or many-valued; CSV in several
dialects and encodings, parquet with many column types) and combinations of options and solvers.

Whatever the input, a command ends with exit 0, 2 (bad input, with a `dmo: ` line naming the fix) or 3 (target
unreachable), never 1 (an unexpected error) and never a traceback; and `dmo check` passes nothing train refuses.
CI runs FUZZ_EXAMPLES (600) examples, derandomized so every run draws the same ones; DMO_FUZZ_EXAMPLES=2000 hunts
with more, DMO_FUZZ_SEED=N with other ones.
"""

from __future__ import annotations

import csv
import gzip
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_dmo
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FUZZ_EXAMPLES = int(os.environ.get("DMO_FUZZ_EXAMPLES", "600"))
FUZZ_SEED = os.environ.get("DMO_FUZZ_SEED")  # a hunt draws other examples with another seed
# Options `dmo check` accepts and ignores (its --help lists them apart): train may refuse what they ask of the data.
IGNORED_BY_CHECK = ("--cv=", "--val=", "--val-frac=", "--gamma=")
INT64 = (-(2**63), 2**63 - 1)
AFTER_LAST_ROW = {"--json", "--strict", "--max-unseen"}  # predict options `-o -` refuses
MESSY = st.sampled_from([False, False, True])  # a third of tables and option sets messy; tidy ones get further

NAMES = ["label", "Label", "label ", " label", "", " ", "a", "a", "x,y", 'q"uote', "ünï", "名前", "id", "target"]
NAMES += ["is_fraud", "0", "nan", "NaN", "a b", "-x", "--drop", "=1", "\t", "a\nb", "__offset_0", "features"]
LEVELS = ["a", "b", "B", " b ", "é", "x y", "A", "a,b", 'q"q', "1", "", "yes", "No"]
ODD_CELLS = ["$1,234", "1e999", "-1e999", "NaN", "nan", "inf", "-inf", "\x00", "a\x00b", "1\x00", "N/A", "null"]
ODD_CELLS += ["None", "TRUE", "1,5", "=1+1", "+1", "-", " ", "\n", '"', "ø", "0x1F", "1_000", "１２", "1" * 400]
ODD_CELLS += ["x" * 5000, "9" * 30, "\r", "\ufeff1", "2024-01-02", "12:30", "[1, 2]", "1 2"]
LABEL_PAIRS = [(0, 1), (1, 2), ("yes", "no"), (True, False), ("fraud", "ok"), (0.0, 1.0), ("1", "0"), (-1, 1)]
LABEL_MODES = ["binary", "binary", "binary", "absent", "constant", "empty", "multi", "mixed"]
MESSY_KINDS = ["int", "float", "text", "bool", "mixed", "odd", "empty", "long", "float32", "category", "date"]
MESSY_KINDS += ["timestamp", "decimal", "list", "bytes"]
TIDY_KINDS = ["int", "float", "text", "bool", "float32", "category"]
TIDY_NAMES = ["a", "b", "x,y", 'q"uote', "ünï", "名前", "a b", "-x", "--drop", "=1", "id", "nan", "0", "f 1"]
# Each solver with parameters that train it in a blink (and the options it needs), the default weighted most.
SOLVERS = [
    ("wce", "linear", ("max-iter=20",), ()),
    ("wce", "linear", ("max-iter=20",), ()),
    ("wce", "linear", ("max-iter=20",), ()),
    ("wce", "gbdt", ("rounds=5",), ()),
    ("wce", "mlp", ("max-epochs=2",), ("--width=4", "--depth=1")),
    ("fofo", "linear", (), ()),
    ("ofo", "linear", (), ()),
    ("lr", "linear", (), ()),
    ("ero", "linear", ("outer=2", "inner-steps=10"), ()),
    ("sigmoid-f1", "linear", ("steps=20",), ()),
    ("lagrangian", "linear", ("steps=20",), ()),
    ("lus", "linear", ("max-iter=20",), ("--gamma=2",)),
    ("adsh", "linear", ("epochs=1", "steps-per-epoch=2"), ()),
    ("fixmatch", "linear", ("epochs=1", "steps-per-epoch=2"), ()),
]
STREAMING = {"fofo", "ofo", "lr"}
SEMI_SUPERVISED = {"adsh", "fixmatch"}
OFBS_ONLY = STREAMING | {"sigmoid-f1"}


@dataclass(frozen=True)
class Column:
    """A column as generated: its cells are Python values, None an empty cell."""

    name: str
    kind: str
    cells: tuple


@dataclass(frozen=True)
class Table:
    """A generated table and how it is written: parquet, or CSV with a delimiter, an encoding, line endings and
    perhaps gzip."""

    columns: tuple[Column, ...]
    n_rows: int
    fmt: str  # parquet, csv, csv.gz or tsv
    encoding: str = "utf-8"
    newline: str = "\n"
    delimiter: str = ","

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def file_name(self, stem: str) -> str:
        return f"{stem}.{self.fmt}"


@dataclass(frozen=True)
class Case:
    """One fuzz example: a training table, a second table (for --val, evaluate and predict), and each command's
    options; `@NAME` in an option's value is the file NAME in the example's folder."""

    train_table: Table
    other_table: Table
    train_args: tuple[str, ...]
    evaluate_args: tuple[str, ...]
    predict_args: tuple[str, ...]


def cell_values(kind: str, messy: bool) -> st.SearchStrategy:
    """Non-empty cells of one column kind; mixed draws from several kinds, so a column's type is anyone's guess.
    Tidy numbers are finite and of a moderate size."""
    ints = st.integers(-1000, 1000)
    floats = st.floats(-1e6, 1e6)
    if messy:
        ints |= st.sampled_from([INT64[0], INT64[1], 2**64, 10**30, -(10**30)])
        floats = st.floats(allow_nan=True, allow_infinity=True)
    texts = st.sampled_from(LEVELS)
    kinds = {
        "int": ints,
        "float": floats,
        "float32": floats,
        "text": texts,
        "category": texts,
        "bool": st.booleans(),
        "mixed": ints | floats | texts | st.booleans(),
        "odd": st.sampled_from(ODD_CELLS) | floats,
        "empty": st.none(),
        "long": st.text(max_size=40) | st.just("y" * 140_000),  # over the csv module's 131,072-character cell limit
        "date": st.dates(),
        "timestamp": st.datetimes(),
        "decimal": st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-1e6, max_value=1e6),
        "list": st.lists(floats, max_size=3),
        "bytes": st.binary(max_size=4),
    }
    return kinds[kind]


@st.composite
def column_cells(draw: st.DrawFn, values: st.SearchStrategy, n_rows: int, most_holes: int | None = None) -> tuple:
    """n_rows cells with some of them emptied (none, a few, or all)."""
    cells = draw(st.lists(values, min_size=n_rows, max_size=n_rows))
    holes = draw(st.sets(st.integers(0, n_rows - 1), max_size=most_holes)) if n_rows else set()
    return tuple(None if row in holes else cell for row, cell in enumerate(cells))


def label_values(mode: str, pair: tuple) -> st.SearchStrategy:
    """Label cells for a label that is two-valued (the pair), constant, empty, many-valued or of mixed types."""
    if mode == "binary":
        return st.sampled_from(pair)
    if mode == "constant":
        return st.sampled_from([0, 1, "yes", True])
    if mode == "empty":
        return st.none()
    if mode == "multi":
        return st.sampled_from([0, 1, 2]) | st.sampled_from(["a", "b", "c", "d"])
    return st.sampled_from([0, 1, "1", "yes", 1.0, True, " 1"])


@st.composite
def written_as(draw: st.DrawFn, columns: list[Column], n_rows: int, messy: bool) -> Table:
    """The columns in a file format: parquet, or CSV of some delimiter, encoding (messy: perhaps not UTF-8) and
    line ending."""
    fmt = draw(st.sampled_from(["parquet", "parquet", "csv", "csv", "csv.gz", "tsv"]))
    if fmt == "parquet":
        return Table(tuple(columns), n_rows, fmt)
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", *(["latin-1", "utf-16"] if messy else [])]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    delimiter = "\t" if fmt == "tsv" else draw(st.sampled_from([",", ",", ";", "|"]))
    return Table(tuple(columns), n_rows, fmt, encoding, newline, delimiter)


@st.composite
def messy_tables(draw: st.DrawFn) -> Table:
    """A table of 0-40 rows and 0-6 columns of any names and cells, one of them perhaps a label."""
    n_rows = draw(st.integers(0, 40))
    label_mode = draw(st.sampled_from(LABEL_MODES))
    n_features = draw(st.integers(0, 6 if label_mode == "absent" else 5))
    names = draw(st.lists(st.sampled_from(NAMES) | st.text(max_size=6), min_size=n_features, max_size=n_features))
    kinds = draw(st.lists(st.sampled_from(MESSY_KINDS), min_size=n_features, max_size=n_features))
    columns = [
        Column(name, kind, draw(column_cells(cell_values(kind, True), n_rows))) for name, kind in zip(names, kinds)
    ]
    if label_mode != "absent":
        name = draw(st.sampled_from(["label", "label", "label", "target", "Label", "y"]))
        cells = draw(column_cells(label_values(label_mode, draw(st.sampled_from(LABEL_PAIRS))), n_rows))
        columns.insert(draw(st.integers(0, len(columns))), Column(name, "label", cells))
    return draw(written_as(columns, n_rows, messy=True))


@st.composite
def tidy_tables(draw: st.DrawFn) -> Table:
    """A table train may well take: 6-40 rows, a two-valued label (a row or two perhaps unlabeled), 1-5 distinctly
    named features with finite numbers, text or booleans, and a few empty cells, in UTF-8."""
    n_rows = draw(st.integers(6, 40))
    names = draw(st.lists(st.sampled_from(TIDY_NAMES), min_size=1, max_size=5, unique=True))
    kinds = draw(st.lists(st.sampled_from(TIDY_KINDS), min_size=len(names), max_size=len(names)))
    columns = [
        Column(name, kind, draw(column_cells(cell_values(kind, False), n_rows, most_holes=2)))
        for name, kind in zip(names, kinds)
    ]
    label_name = draw(st.sampled_from(["label", "label", "target", "y"]))
    pair = draw(st.sampled_from(LABEL_PAIRS))
    most_unlabeled = draw(st.sampled_from([0, 0, 2]))
    cells = pair + draw(column_cells(label_values("binary", pair), n_rows - 2, most_unlabeled))  # both classes seen
    columns.insert(draw(st.integers(0, len(columns))), Column(label_name, "label", cells))
    return draw(written_as(columns, n_rows, messy=False))


def tables(messy: bool) -> st.SearchStrategy:
    """Messy tables to be refused with a good message, or tidy ones to get through training."""
    return messy_tables() if messy else tidy_tables()


@st.composite
def other_tables(draw: st.DrawFn, train: Table) -> Table:
    """The table --val, evaluate and predict read: the training table again (in the same file format or another),
    fresh rows of its columns, its columns with one missing or reordered, or an unrelated table."""
    how = draw(st.sampled_from(["same", "same file", "fresh", "fresh", "missing", "reordered", "unrelated"]))
    if how == "unrelated":
        return draw(tables(messy=draw(MESSY)))
    if how == "same file":
        return train
    if how == "same":
        return draw(written_as(list(train.columns), train.n_rows, messy=False))
    n_rows = draw(st.integers(0, 40))
    columns = [Column(c.name, c.kind, draw(column_cells(like(c), n_rows))) for c in train.columns]
    if how == "missing" and columns:
        del columns[draw(st.integers(0, len(columns) - 1))]
    if how == "reordered":
        columns = draw(st.permutations(columns))
    return draw(written_as(columns, n_rows, messy=False))


def like(column: Column) -> st.SearchStrategy:
    """Cells of the kind a column holds, for fresh rows of it: a label's are those seen in it."""
    if column.kind != "label":
        return cell_values(column.kind, messy=True)
    seen = sorted({cell for cell in column.cells if cell is not None}, key=repr)
    return st.sampled_from(seen) if seen else st.none()


def option_names(table: Table) -> st.SearchStrategy:
    """A column name for an option: one of the table's (a user can type it; a NUL byte cannot be an argument) or
    one it does not have."""
    typable = [name for name in table.names if "\x00" not in name]
    return st.sampled_from(typable + ["nope", "label", ""])


def optional(flag: str, values: st.SearchStrategy) -> st.SearchStrategy:
    """`flag=VALUE` or nothing; the = form, as a value such as `-x` or `--drop` is a column name, not a flag."""
    return st.none() | values.map(lambda value: f"{flag}={value}")


@st.composite
def messy_options(draw: st.DrawFn, table: Table, other: str) -> list[str]:
    """train's options with values in and out of range, named columns there or not, files there or not."""
    numbers = st.sampled_from(["0.5", "0.9", "0.1", "0", "1", "1.5", "-0.1", "nan", "inf", "0.999999"])
    chosen = [
        draw(optional("--problem", st.sampled_from(["fpor", "frop", "ofbs", "multiclass", "FPOR", "x"]))),
        draw(optional("--target", numbers)),
        draw(optional("--beta", st.sampled_from(["1", "0.5", "2", "0", "-1", "nan", "1e308"]))),
        draw(optional("--label-col", option_names(table))),
        draw(optional("--positive", st.sampled_from(["1", "0", "yes", "no", "True", "1.0", "a", "zzz", ""]))),
        draw(optional("--impute", st.sampled_from(["median", "none", "mean"]))),
        draw(optional("--cv", st.sampled_from(["0", "2", "5", "-1", "1"]))),
        draw(optional("--confidence", st.sampled_from(["0.9", "0.5", "0.99", "1", "0", "1.5"]))),
        draw(optional("--new-rows", st.sampled_from(["10", "inf", "0", "-5", "1e18", "x"]))),
        draw(optional("--seed", st.sampled_from(["0", "7", "-1", str(2**40)]))),
        draw(optional("--val", st.sampled_from([f"@{other}", "@missing.csv", f"@{table.file_name('train')}"]))),
        draw(optional("--val-frac", st.sampled_from(["0.3", "0.5", "0", "1", "-0.2"]))),
        draw(optional("--embedding-col", option_names(table))),
        draw(optional("--cv-transfer", st.sampled_from(["ensemble", "apply", "rank", "x"]))),
        draw(st.sampled_from([None, None, "--fold-case", "--drop-unlabeled", "--no-adjust"])),
    ]
    drops = draw(st.lists(option_names(table), max_size=2))
    return [arg for arg in chosen if arg is not None] + [f"--drop={name}" for name in drops]


@st.composite
def tidy_options(draw: st.DrawFn, table: Table, other: str, solver: str) -> list[str]:
    """train's options with sound values the solver takes: a target for a constrained problem, the label named
    when it is not `label`, a positive class among the label's values, the other table as --val, unlabeled rows
    dropped where the solver cannot use them."""
    problem = draw(st.sampled_from([None, "ofbs"] if solver in OFBS_ONLY else [None, "fpor", "frop", "ofbs"]))
    held_out = [f"--val=@{other}"] if solver in STREAMING else [f"--val=@{other}", "--val-frac=0.3"]
    held_out += [] if solver in STREAMING | SEMI_SUPERVISED else ["--cv=0", "--cv=2", "--cv=3"]
    label = next((column for column in table.columns if column.kind == "label"), None)
    label_name = None if label is None or label.name == "label" else label.name
    positives = sorted({str(cell) for cell in label.cells if cell is not None}) if label else []
    features = [column.name for column in table.columns if column.kind != "label" and "\x00" not in column.name]
    target = draw(st.sampled_from(["0.5", "0.8", "0.2", "0.95"]))
    chosen = [
        f"--problem={problem}" if problem else None,
        f"--target={target}" if problem in ("fpor", "frop") else None,
        draw(optional("--beta", st.sampled_from(["0.5", "1", "2"]))),
        f"--label-col={label_name}" if label_name else None,
        draw(optional("--positive", st.sampled_from(positives))) if positives else None,
        draw(st.sampled_from(["--impute=median", "--impute=median", "--impute=none", None])),
        draw(st.sampled_from([None, None, *held_out])),
        draw(st.sampled_from([None, None, "--confidence=0.9"])) if problem in ("fpor", "frop") else None,
        draw(optional("--seed", st.sampled_from(["0", "7"]))),
        draw(optional("--drop", st.sampled_from(features))) if features else None,
        draw(st.sampled_from([None, None, "--cv-transfer=apply", "--cv-transfer=rank"])),
        "--drop-unlabeled" if solver not in SEMI_SUPERVISED and label and None in label.cells else None,
    ]
    return [arg for arg in chosen if arg is not None]


@st.composite
def train_options(draw: st.DrawFn, table: Table, other: str, messy: bool) -> list[str]:
    """train's options, messy or tidy, and a solver with a model and parameters that train in a blink."""
    solver, model, params, extra = draw(st.sampled_from(SOLVERS))
    args = draw(messy_options(table, other) if messy else tidy_options(table, other, solver))
    return [*args, f"--solver={solver}", f"--model={model}", *extra, *(f"--param={param}" for param in params)]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A training table, train's options, and evaluate's and predict's on a second table."""
    train = draw(tables(messy=draw(MESSY)))
    other = draw(other_tables(train))
    both = draw(st.sampled_from([[], ["--json"], ["--strict"], ["--max-unseen=0.5"], ["--json", "--strict"]]))
    evaluate = both + draw(st.sampled_from([[], ["--report=@r.json"]]))
    id_col = draw(optional("--id-col", option_names(other)))
    output = draw(st.sampled_from(["@p.csv", "@p.parquet", "@p.tsv", "@p.csv.gz", "-"]))
    predict = [*both, f"--output={output}"] + ([id_col] if id_col else [])
    train_args = draw(train_options(train, other.file_name("other"), messy=draw(MESSY)))
    return Case(train, other, tuple(train_args), tuple(evaluate), tuple(predict))


def text_cell(value: object) -> str:
    """How a cell is typed into a CSV file: empty for a missing cell, Python's spelling otherwise."""
    return "" if value is None else str(value)


def write_csv(table: Table, path: Path) -> None:
    """The table as CSV text in its dialect: a header, then one line per row (a blank line for a row of no
    columns); characters its encoding lacks become '?'."""
    opener = gzip.open if table.fmt == "csv.gz" else open
    with opener(path, "wt", newline="", encoding=table.encoding, errors="replace") as handle:
        writer = csv.writer(handle, delimiter=table.delimiter, lineterminator=table.newline)
        writer.writerow(table.names)
        for row in range(table.n_rows):
            writer.writerow([text_cell(column.cells[row]) for column in table.columns])


def arrow_array(column: Column) -> pa.Array:
    """Cells as the arrow type a writer would give them: bool, int64, float64 (float32 and dictionary-encoded text
    for those kinds) when all fit, the type arrow infers for dates, decimals, lists and bytes, else text."""
    cells = column.cells
    present = [cell for cell in cells if cell is not None]
    if present and all(isinstance(cell, bool) for cell in present):
        return pa.array(cells, pa.bool_())
    if all(isinstance(cell, int) and not isinstance(cell, bool) and INT64[0] <= cell <= INT64[1] for cell in present):
        return pa.array(cells, pa.int64())
    if all(isinstance(cell, (int, float)) and not isinstance(cell, bool) for cell in present):
        values = np.array([np.nan if cell is None else float(cell) for cell in cells])
        with np.errstate(over="ignore"):
            values = values.astype(np.float32) if column.kind == "float32" else values
        return pa.array(values, mask=np.array([cell is None for cell in cells], dtype=bool))
    if column.kind in ("date", "timestamp", "decimal", "list", "bytes"):
        return pa.array(cells)
    text = pa.array([None if cell is None else str(cell) for cell in cells], pa.string())
    return text.dictionary_encode() if column.kind == "category" else text


def write_table(table: Table, folder: Path, stem: str) -> Path:
    """Write the table in its format under folder; duplicate column names are kept, as both formats allow."""
    path = folder / table.file_name(stem)
    if table.fmt == "parquet":
        arrays = [arrow_array(column) for column in table.columns]
        pq.write_table(pa.Table.from_arrays(arrays, names=table.names), path)
    else:
        write_csv(table, path)
    return path


def in_folder(args: tuple[str, ...], folder: Path) -> list[str]:
    """The options with each `=@NAME` value made the path of NAME in the example's folder."""
    return [arg.replace("=@", f"={folder}{os.sep}", 1) for arg in args]


def assert_clean(result: tuple[int, str, str], args: list[str]) -> int:
    """A command ends in exit 0, 2 or 3, with no traceback, and a refusal names itself on a `dmo: ` line (check
    lists the problems it found on stdout instead, as its report)."""
    code, out, err = result
    shown = " ".join(map(repr, args))
    assert code in (0, 2, 3), f"dmo {shown} exited {code}:\n{err}"
    assert "Traceback" not in err, f"dmo {shown} printed a traceback:\n{err}"
    if code:
        said = any(line.startswith("dmo: ") for line in err.splitlines()) or (args[0] == "check" and out.strip())
        assert said, f"dmo {shown} ended {code} without saying why:\n{err}"
    event(f"{args[0]} exit {code}")  # --hypothesis-show-statistics: how far the examples get
    return code


def run_case(dmo: Callable[..., tuple[int, str, str]], case: Case, folder: Path) -> None:
    """check and train on the training table (check promises every problem train would refuse the data for, so
    train refuses nothing it passed, save for the options check ignores); with a model, evaluate and predict on
    the other table, which take the training file itself."""
    data = write_table(case.train_table, folder, "train")
    other = write_table(case.other_table, folder, "other")
    model = folder / "m.safetensors"
    options = in_folder(case.train_args, folder)
    check = ["check", str(data), *options, f"--output={model}"]
    checked = assert_clean(dmo(*check), check)
    train = ["train", str(data), *options, f"--output={model}"]
    result = dmo(*train)
    trained = assert_clean(result, train)
    if not any(arg.startswith(IGNORED_BY_CHECK) for arg in case.train_args):
        assert not (checked == 0 and trained == 2), f"dmo check passed what dmo {' '.join(train)} refused:\n{result[2]}"
    if trained != 0:
        return
    evaluate = ["evaluate", str(model), str(other), *in_folder(case.evaluate_args, folder)]
    evaluated = dmo(*evaluate)
    predict = ["predict", str(model), str(other), *in_folder(case.predict_args, folder)]
    predicted = dmo(*predict)
    codes = assert_clean(evaluated, evaluate), assert_clean(predicted, predict)
    if case.other_table == case.train_table:
        assert codes[0] == 0, f"dmo {' '.join(evaluate)} refused the training file:\n{evaluated[2]}"
        assert codes[1] == 0 or not sound_predict_options(case), f"dmo {' '.join(predict)}:\n{predicted[2]}"


def sound_predict_options(case: Case) -> bool:
    """Whether predict's options are all right for the training file: an --id-col it has, and with `-o -` no
    --json (it would print where the predictions go) nor drift judged after the last row is out."""
    options = dict(arg.split("=", 1) if "=" in arg else (arg, "") for arg in case.predict_args)
    id_col = options.get("--id-col")
    to_stdout = options["--output"] == "-"
    return (id_col is None or id_col in case.train_table.names) and not (to_stdout and set(options) & AFTER_LAST_ROW)


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=FUZZ_SEED is None,
)
@seed(int(FUZZ_SEED or 0))
@given(case=cases())
def test_generated_tables_and_options_never_end_in_an_unexpected_error(dmo, case: Case):
    with tempfile.TemporaryDirectory() as folder:
        run_case(dmo, case, Path(folder))


# Regression tests for what the fuzzing found: each ended in exit 1 ("unexpected error"), or check passed it.


def test_an_integer_column_past_2_53_with_an_empty_cell_is_taken(dmo, tmp_path):
    """An int64 column with a null is cast to float64 for NaN; arrow's safe cast refused -2**63 (ArrowInvalid)."""
    data = tmp_path / "big.csv"
    data.write_text("a,target\n-9223372036854775808,0\n1,1\n2,0\n3,1\n,0\n")
    options = ["--label-col", "target", "--impute", "median", "--cv", "0"]
    assert dmo("check", data, *options)[0] == 0
    code, _, err = dmo("train", data, *options, "-o", tmp_path / "m.safetensors")
    assert code == 0, err
    assert dmo("predict", tmp_path / "m.safetensors", data, "-o", tmp_path / "p.csv")[0] == 0


@pytest.mark.parametrize("solver", ["wce", "fofo"])
@pytest.mark.parametrize("column", ["label", "a", "nope"])
def test_an_embedding_col_that_is_no_list_of_numbers_is_refused_in_one_line(dmo, tmp_path, solver, column):
    """The feature survey read the named column as vectors anyway (ArrowNotImplementedError, KeyError)."""
    data = tmp_path / "e.parquet"
    pq.write_table(pa.table({"label": [0, 1, 0, 1, 0, 1], "a": [1, 2, 3, 4, 5, 6]}), data)
    options = ["--embedding-col", column, "--solver", solver]
    for command in (["check", data], ["train", data, "-o", tmp_path / "m.safetensors"]):
        code, _, err = dmo(*command, *options)
        assert code == 2, err
    assert f"--embedding-col {column!r} is not a list column of the data" in err
    assert "no usable feature columns" not in err


@pytest.mark.parametrize("header", ["ünï,label", 'label,"a\nb",\x80'])
@pytest.mark.parametrize("name", ["l.csv", "l.csv.gz"])
def test_a_csv_header_that_is_not_utf8_is_refused_with_the_fix(dmo, tmp_path, name, header):
    """Arrow reads a Latin-1 header, and its column names then failed to decode (UnicodeDecodeError); also where
    the name that is not UTF-8 follows a quoted name holding a line break (found by the fuzz test)."""
    rows = "".join(f"{i % 2}" + ",0" * header.count(",") + "\n" for i in range(4))
    text = f"{header}\n{rows}".encode("latin-1")
    data = tmp_path / name
    data.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    for command in ("check", "train"):
        code, _, err = dmo(command, data)
        assert code == 2 and "not UTF-8" in err and "iconv -f latin1 -t utf-8" in err, err


def test_a_header_that_is_not_utf8_on_standard_input_is_refused_with_the_fix(tmp_path):
    """The same header piped in: the streaming reader of standard input failed alike."""
    data = tmp_path / "l.csv"
    data.write_bytes("ünï,label\n1,0\n2,1\n3,0\n4,1\n".encode("latin-1"))
    proc = run_dmo("train", "-", "--solver", "fofo", "-o", tmp_path / "m.safetensors", stdin=data)
    assert proc.returncode == 2 and "standard input: it holds text that is not UTF-8" in proc.stderr, proc.stderr


@pytest.mark.parametrize("labels", [[[1.0], [0.0], [1.0], [2.0]], [{"x": 1}, {"x": 2}, {"x": 1}, {"x": 2}]])
@pytest.mark.parametrize("solver", ["wce", "fofo"])
def test_a_label_column_of_lists_or_structs_is_refused_in_one_line(dmo, tmp_path, labels, solver):
    """Counting such labels failed in arrow (value_counts has no kernel for them) before their type was checked."""
    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": [0, 1, 2, 3], "label": labels}), data)
    for command in (["check", data], ["train", data, "-o", tmp_path / "m.safetensors"]):
        code, _, err = dmo(*command, "--solver", solver)
        assert code == 2, err
    assert "label column" in err and "labels must be integers, booleans, floats or text" in err


@pytest.mark.parametrize("solver", ["adsh", "fixmatch"])
def test_check_refuses_a_semi_supervised_solver_without_unlabeled_rows_as_train_does(dmo, tmp_path, solver):
    """check passed the data, and train then refused it."""
    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"label": [0] * 7 + [1], "a": list(range(8))}), data)
    code, out, _ = dmo("check", data, "--solver", solver)
    assert code == 2 and f"solver {solver} needs unlabeled rows (missing labels) and the data has none" in out
    code, _, err = dmo("train", data, "--solver", solver, "-o", tmp_path / "m.safetensors")
    assert code == 2 and "needs unlabeled rows" in err


def test_predict_takes_the_training_file_whose_text_feature_holds_its_own_name(dmo, tmp_path):
    """predict reads the features alone, and the level `a` of column `a` was taken for a repeated header line,
    where train and evaluate, reading every column, took the file."""
    data = tmp_path / "d.csv"
    data.write_text("label,a\n" + "".join(f"{int(row == 1)},{'ab'[row % 2]}\n" for row in range(12)))
    assert dmo("train", data, "--cv", "0", "-o", tmp_path / "m.safetensors")[0] == 0
    code, _, err = dmo("predict", tmp_path / "m.safetensors", data, "-o", tmp_path / "p.csv")
    assert code == 0, err
