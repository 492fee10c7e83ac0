"""Messy real-world data that must still train correctly: label whitespace, Hive-partitioned directories,
files whose numeric types differ, semicolon CSVs, columns with a large mean and a tiny spread, and
categorical features with missing values. Each is checked against what the clean data gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import load_file

from dmocli.errors import DmoError
from dmocli.models.modelfile import read_metadata
from dmocli.prep.columns import ColumnPlan, plan_columns
from dmocli.prep.features import Preprocessor, RunningMoments, column_moments
from dmocli.prep.labels import LabelSpec, infer_label_spec, stray_classes


def weights(model: Path) -> dict[str, np.ndarray]:
    return load_file(str(model))


def test_text_labels_differing_only_by_whitespace_are_one_class_and_blank_is_missing():
    labels = pa.array(["yes", " yes", "no ", "no", "  ", None, "no\t"])
    spec = infer_label_spec(labels, "label", positive=None, binary=True)  # the minority, yes, is the positive class
    assert spec.classes == ["no", "yes"] and spec.positive == "yes" and spec.counts == [3, 2]
    assert spec.encode(labels).tolist() == [1, 1, 0, 0, -1, -1, 0]
    assert infer_label_spec(labels, "label", positive=" yes ", binary=True).positive == "yes"


def test_a_nameless_column_such_as_a_pandas_index_is_refused_unless_dropped(tmp_path):
    frame = make_binary_frame(n=120, seed=5)
    frame.to_csv(tmp_path / "d.csv")  # index=True: an empty header, then 0..119
    proc = run_dmo("train", tmp_path / "d.csv", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "a column has no name (''; pandas" in proc.stderr and "index=False" in proc.stderr
    run_dmo("train", tmp_path / "d.csv", "--drop", "", "-o", tmp_path / "m.st", check=True)
    assert "" not in read_metadata(tmp_path / "m.st")["preprocessing"]["numeric"]


def test_a_label_column_with_spaces_in_its_name_is_pointed_at():
    schema = pa.schema([("x1", pa.float64()), (" x2", pa.float64()), (" label", pa.int64())])  # "x1, x2, label"
    with pytest.raises(DmoError, match=r"there is ' label' \(with spaces\).*--label-col ' label'"):
        plan_columns(schema, "label")
    assert plan_columns(schema, " label").numeric == ["x1", " x2"]


def test_a_stray_label_that_makes_a_binary_task_multiclass_is_warned_about(tmp_path):
    """One mistyped label among 300 turns two classes into three; the run says so (dmo check too), and a class
    of real size does not."""
    frame = make_binary_frame(n=300, seed=4)
    frame["label"] = np.where(frame["label"] == 1, "yes", "no")
    frame.loc[7, "label"] = "yse"
    frame.to_csv(tmp_path / "d.csv", index=False)
    proc = run_dmo("train", tmp_path / "d.csv", "-o", tmp_path / "m.st", "--json", check=True)
    expected = "label class(es) 'yse' (1 row) of 300 labeled rows make this a 3-class problem"
    assert expected in proc.stderr and any(expected in w for w in json.loads(proc.stdout)["warnings"])
    assert expected in run_dmo("check", tmp_path / "d.csv").stderr + run_dmo("check", tmp_path / "d.csv").stdout
    frame.loc[frame.index[:30], "label"] = "maybe"
    frame.to_csv(tmp_path / "three.csv", index=False)
    assert "make this a" not in run_dmo("train", tmp_path / "three.csv", "-o", tmp_path / "t.st", check=True).stderr


def test_a_missing_value_code_as_label_is_warned_about_however_many_rows_carry_it(tmp_path):
    """-999 in 1 % of the rows is an export's missing-value code, not a class: a class of 30 rows would not be
    warned about, a code of nines is."""
    frame = make_binary_frame(n=3000, seed=4)
    frame.loc[frame.index[::100], "label"] = -999
    frame.to_parquet(tmp_path / "d.parquet")
    proc = run_dmo("train", tmp_path / "d.parquet", "-o", tmp_path / "m.st", check=True)
    assert "label class(es) -999 (30 rows) of 3000 labeled rows make this a 3-class problem" in proc.stderr
    assert stray_classes({k: 50 for k in range(101)}) == []  # among many classes, 99 is a class like the others
    assert stray_classes({0: 900, 1: 100, 2: 60, 99: 40}) == []  # a code beside three classes: not the cause


def test_classes_differing_only_in_case_are_refused(tmp_path):
    """yes/Yes/no was a 3-class model with a warning; refused now (tests/prep/test_label_case_variants.py)."""
    frame = make_binary_frame(n=300, seed=3)
    frame["label"] = np.where(frame["label"] == 1, np.where(np.arange(300) % 4 == 0, "Yes", "yes"), "no")
    frame.to_parquet(tmp_path / "d.parquet")
    proc = run_dmo("train", tmp_path / "d.parquet", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "differ only in case: 'Yes'" in proc.stderr, proc.stderr


@pytest.mark.parametrize("binary", [True, False])
def test_a_negative_zero_label_is_the_zero_class(binary):
    """np.round(-0.2) is -0.0: equal to 0.0, but another key to arrow's hashing (value_counts, index_in)."""
    values = [0.0, -0.0, 1.0, -0.0, None, float("nan")] + ([] if binary else [2.0])
    labels = pa.array(values, type=pa.float64())
    spec = infer_label_spec(labels, "label", positive=None, binary=binary)
    assert spec.classes == ([0.0, 1.0] if binary else [0.0, 1.0, 2.0])
    assert spec.counts[0] == 3 and sum(spec.counts) == len(values) - 2
    assert spec.encode(labels).tolist()[:4] == [0, 0, 1, 0]


def test_whitespace_labels_train_the_same_binary_model_as_clean_ones(tmp_path):
    frame = make_binary_frame(n=300, seed=11)
    clean = frame.assign(label=np.where(frame["label"] == 1, "yes", "no"))
    messy = clean.assign(label=[f" {v}" if i % 3 == 0 else v for i, v in enumerate(clean["label"])])
    for name, table in (("clean", clean), ("messy", messy)):
        table.to_csv(tmp_path / f"{name}.csv", index=False)
        run_dmo("train", tmp_path / f"{name}.csv", "-o", tmp_path / f"{name}.st", check=True)
    a, b = weights(tmp_path / "clean.st"), weights(tmp_path / "messy.st")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    report = json.loads(run_dmo("evaluate", tmp_path / "clean.st", tmp_path / "messy.csv", "--json", check=True).stdout)
    assert report["splits"]["data"]["n"] == 300 and report["problem"] == "ofbs"


def test_hive_partition_directories_are_columns_in_every_command(tmp_path):
    frame = make_binary_frame(n=400, seed=12)
    region = np.where(np.arange(400) % 2 == 0, "eu", "us")
    root = tmp_path / "hive"
    for value in ("eu", "us"):
        for year in (2024, 2025):
            rows = frame[(region == value) & ((np.arange(400) // 2) % 2 == year - 2024)]
            folder = root / f"region={value}" / f"year={year}"
            folder.mkdir(parents=True)
            pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), folder / "part-0.parquet")
    for solver in ("wce", "fofo"):
        model = tmp_path / f"{solver}.st"
        report = json.loads(run_dmo("train", root, "--solver", solver, "-o", model, "--json", check=True).stdout)
        assert report["n_features"] == 4 + 2 + 1  # f0..f3, region=eu/us one-hot, year as a number
        preprocessing = read_metadata(model)["preprocessing"]
        assert preprocessing["categorical"] == {"region": ["eu", "us"]}
        assert preprocessing["numeric"][-1] == "year"
    sub = tmp_path / "sub.parquet"
    run_dmo("subsample", root, "--gamma", "2", "-o", sub, check=True)
    schema = pq.read_schema(sub)
    assert schema.field("region").type == pa.string() and schema.field("year").type == pa.int64()


def test_parquet_files_with_differing_types_and_order_train_like_one_uniform_file(tmp_path):
    """int64 in one file and float64 in the other (whole numbers, some past 2^53 like nanosecond times);
    string vs large_string vs dictionary text; columns in another order: read as one float64 / string table."""
    frame = make_binary_frame(n=300, seed=13).astype({"f0": np.float64})
    frame["f0"] = np.round(frame["f0"] * 4)
    frame["stamp"] = 1.7e18 + np.arange(300) * 1024.0  # exact in float64, and in int64
    frame["shop"] = np.where(np.arange(300) % 3 == 0, "north", "south")
    (tmp_path / "parts").mkdir()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    head = table.slice(0, 150)
    head = head.set_column(0, "f0", head.column("f0").cast(pa.int64()))
    head = head.set_column(head.schema.get_field_index("stamp"), "stamp", head.column("stamp").cast(pa.int64()))
    head = head.set_column(head.schema.get_field_index("shop"), "shop", head.column("shop").cast(pa.large_string()))
    tail = table.slice(150)
    tail = tail.set_column(tail.schema.get_field_index("shop"), "shop", tail.column("shop").dictionary_encode())
    pq.write_table(head, tmp_path / "parts" / "a.parquet")
    pq.write_table(tail.select(list(reversed(tail.schema.names))), tmp_path / "parts" / "b.parquet")
    pq.write_table(table, tmp_path / "whole.parquet")
    for solver in ("wce", "fofo"):
        run_dmo("train", tmp_path / "parts", "--solver", solver, "-o", tmp_path / f"p_{solver}.st", check=True)
        run_dmo("train", tmp_path / "whole.parquet", "--solver", solver, "-o", tmp_path / f"w_{solver}.st", check=True)
        a, b = weights(tmp_path / f"p_{solver}.st"), weights(tmp_path / f"w_{solver}.st")
        assert all(np.array_equal(a[k], b[k]) for k in a), solver


def test_semicolon_and_decimal_comma_csvs_read_like_a_comma_csv(tmp_path):
    frame = make_binary_frame(n=200, seed=14).round(4)
    frame.to_csv(tmp_path / "comma.csv", index=False)
    frame.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    frame.to_csv(tmp_path / "european.csv", index=False, sep=";", decimal=",")  # 0,1234;1,5;...
    quoted = frame.rename(columns={"f0": "f0, raw"})  # a comma inside a quoted name does not make it comma-separated
    quoted.to_csv(tmp_path / "quoted.csv", index=False, sep=";")
    run_dmo("train", tmp_path / "quoted.csv", "-o", tmp_path / "quoted.st", check=True)
    assert read_metadata(tmp_path / "quoted.st")["preprocessing"]["numeric"][0] == "f0, raw"
    for name in ("comma", "semi", "european"):
        run_dmo("train", tmp_path / f"{name}.csv", "-o", tmp_path / f"{name}.st", check=True)
    a = weights(tmp_path / "comma.st")
    for name in ("semi", "european"):
        b = weights(tmp_path / f"{name}.st")
        assert all(np.array_equal(a[k], b[k]) for k in a), name


def _late_value_csv(path: Path, late: str, rows: int = 150_000) -> Path:
    """A CSV over arrow's 1 MB inference block whose column `count` holds integers until `late`, 3 rows before
    the end."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=rows).round(3), (rng.random(rows) < 0.2).astype(int)
    counts = [str(i % 7) for i in range(rows)]
    counts[-3] = late
    path.write_text("count,x,label\n" + "".join(f"{c},{a},{b}\n" for c, a, b in zip(counts, x, y)))
    assert path.stat().st_size > 1 << 20
    return path


def test_a_csv_integer_column_with_a_decimal_far_down_is_read_as_float(tmp_path):
    """The streaming reader infers types from the first 1 MB: `2.5` at the end failed every command."""
    from dmocli.data import reading

    data = _late_value_csv(tmp_path / "late.csv", "2.5")
    assert reading.read_table(data).column("count").type == pa.float64()
    rows = [b.num_rows for b in reading.iter_batches(data, 65536)]  # learns float64 on the way: every row once
    assert sum(rows) == 150_000
    assert {b.column("count").type for b in reading.iter_batches(data, 65536)} == {pa.float64()}  # known from the start
    proc = run_dmo("train", data, "--solver", "fofo", "-o", tmp_path / "m.st", "--json", check=True)
    assert json.loads(proc.stdout)["online"]["n"] == 150_000


def test_text_far_down_a_csv_number_column_is_named_when_streaming(tmp_path):
    data = _late_value_csv(tmp_path / "marker.csv", "?")
    proc = run_dmo("train", data, "--solver", "fofo", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "column 'count' reads as int64 in its first rows but holds '?' at line 149999" in proc.stderr
    assert run_dmo("train", data, "--solver", "fofo", "--drop", "count", "-o", tmp_path / "m.st").returncode == 0
    # in memory every row is seen before the types are fixed: the column is text, as in a parquet file
    from dmocli.data import reading

    assert reading.read_table(data).column("count").type == pa.string()


def test_model_files_from_before_trimming_match_text_as_they_were_trained():
    """A model written before labels and levels were trimmed has no `trim_text` key: it keeps exact matching,
    so its predictions do not change under it."""
    pre = Preprocessor.from_dict({"numeric": [], "categorical": {"shop": [" south", "north"]}, "mean": [], "scale": []})
    X, levels = pre.transform(pa.table({"shop": [" south", "south", "north"]}))
    assert not pre.trim_text and X.tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]] and levels.unseen == {"shop": 1}
    labels = LabelSpec.from_dict({"column": "label", "classes": ["no", " yes"], "positive": " yes"})
    assert labels.encode(pa.array([" yes", "no", " yes"])).tolist() == [1, 0, 1]
    with pytest.raises(DmoError, match="neither class"):  # not trimmed to " yes": matched exactly, as trained
        labels.encode(pa.array(["yes"]))
    with pytest.raises(DmoError, match="'No', 'Yes' in column 'label' are neither class"):  # every one named
        labels.encode(pa.array(["No", "no", "Yes", "No"]))
    numeric = LabelSpec.from_dict({"column": "label", "classes": [0, 1], "positive": 1})
    with pytest.raises(DmoError, match="value\\(s\\) 2, 7 in column"):
        numeric.encode(pa.array([0, 7, 2, 1, 7]))
    assert LabelSpec.from_dict(
        infer_label_spec(pa.array(["a", " b", "b"]), "label", positive=None, binary=True).to_dict()
    ).trim_text


def test_scale_of_a_column_with_a_large_mean_and_tiny_spread_is_exact():
    """E[x^2] - mean^2 gives 0 (a 'constant' column, scale 1) or noise for 1e8 +- 0.1; the merged
    centred sums give numpy's two-pass std, batch boundaries or not."""
    rng = np.random.default_rng(0)
    x = 1e8 + 0.1 * rng.normal(size=10_000)
    table = pa.table({"x": x, "label": rng.integers(0, 2, x.size)})
    plan = ColumnPlan(numeric=["x"], categorical=[], embedding=None)
    pre = Preprocessor.fit(table.to_batches(max_chunksize=777), plan)
    assert abs(pre.scale[0] / x.std() - 1) < 1e-6
    assert abs(pre.mean[0] - x.mean()) < 1e-6
    huge = pa.table({"x": 1e40 * (1 + 0.1 * rng.normal(size=1000)), "label": rng.integers(0, 2, 1000)})
    fitted = Preprocessor.fit(huge.to_batches(), plan)  # its raw values exceed float32, its standardized ones do not
    X, _ = fitted.transform(huge)
    assert np.isfinite(X).all() and abs(X.std() - 1) < 1e-3
    moments = RunningMoments(1)
    for chunk in np.array_split(x, [1, 10, 5000]):
        moments.add(*map(np.array, zip(column_moments(chunk))))
    assert abs(np.sqrt(moments.m2[0] / moments.count[0]) / x.std() - 1) < 1e-9


def test_categorical_levels_ignore_surrounding_whitespace_and_missing_ones_are_counted(tmp_path):
    frame = make_binary_frame(n=200, seed=15)
    frame["shop"] = np.where(np.arange(200) % 2 == 0, "north", "south")
    frame.loc[10:19, "shop"] = " north "
    frame.loc[:9, "shop"] = None
    frame.loc[20:24, "shop"] = "  "  # blank: missing, like an empty CSV cell
    frame.to_parquet(tmp_path / "d.parquet")
    for solver in ("wce", "fofo"):
        report = json.loads(
            run_dmo(
                "train", tmp_path / "d.parquet", "--solver", solver, "-o", tmp_path / "m.st", "--json", check=True
            ).stdout
        )
        assert report["missing_levels"] == {"shop": 15} and report["unseen_levels"] == {}
        assert read_metadata(tmp_path / "m.st")["preprocessing"]["categorical"] == {"shop": ["north", "south"]}


def test_text_columns_keep_their_levels_whatever_a_csv_makes_of_them(tmp_path):
    """ "001" and "True" in a CSV read as 1 and true: trained on parquet text, every row matched no level."""
    frame = make_binary_frame(n=300, seed=31)
    rng = np.random.default_rng(31)
    frame["code"] = np.where(frame["label"] == 1, "010", rng.choice(["001", "002"], len(frame)))
    frame["flag"] = np.where(rng.random(len(frame)) < 0.5, "True", "False")
    frame.to_parquet(tmp_path / "d.parquet")
    frame.to_csv(tmp_path / "d.csv", index=False)
    run_dmo("train", tmp_path / "d.parquet", "-o", tmp_path / "m.st", check=True)
    scored = {
        name: json.loads(run_dmo("evaluate", tmp_path / "m.st", tmp_path / name, "--json", check=True).stdout)
        for name in ("d.parquet", "d.csv")
    }
    # the same rows scored alike (the calibration figures, continuous, to float rounding of the parsed values)
    calibrations = [scored[name]["splits"]["data"].pop("calibration") for name in ("d.csv", "d.parquet")]
    assert calibrations[0] == pytest.approx(calibrations[1], rel=1e-6)
    assert scored["d.csv"]["splits"] == scored["d.parquet"]["splits"] and scored["d.csv"]["unseen_levels"] == {}
    with_val = json.loads(
        run_dmo(
            "train", tmp_path / "d.parquet", "--val", tmp_path / "d.csv", "-o", tmp_path / "v.st", "--json", check=True
        ).stdout
    )
    calibrations = [with_val["splits"][name].pop("calibration") for name in ("val", "train")]
    assert calibrations[0] == pytest.approx(calibrations[1], rel=1e-6)
    assert with_val["splits"]["val"] == with_val["splits"]["train"] and with_val["val_unseen_levels"] == {}
    # a parquet column that is numbers where the model had text is refused, not scored as all-unseen
    frame.assign(code=frame["code"].astype(int)).to_parquet(tmp_path / "int.parquet")
    proc = run_dmo("evaluate", tmp_path / "m.st", tmp_path / "int.parquet")
    assert proc.returncode == 2 and "code (int64) are not text" in proc.stderr


def test_columns_of_another_kind_than_the_model_used_are_refused_by_name():
    vector = pa.array([[0.1, 0.2], [0.3, 0.4]], type=pa.list_(pa.float32(), 2))
    embedding = Preprocessor.fit(
        [pa.record_batch({"features": vector, "label": [0, 1]})], ColumnPlan([], [], "features"), impute="none"
    )
    for bad in (pa.array([1.0, 2.0]), pa.array([["a"], ["b"]])):
        with pytest.raises(DmoError, match="not a list of numbers"):
            embedding.check_columns(pa.schema([("features", bad.type)]))
    onehot = Preprocessor.fit(
        [pa.record_batch({"code": ["a", "b"], "label": [0, 1]})], ColumnPlan([], ["code"], None), impute="none"
    )
    for kind in (pa.struct([("a", pa.int64())]), pa.binary(), pa.bool_()):
        with pytest.raises(DmoError, match="are not text"):
            onehot.check_columns(pa.schema([("code", kind)]))
    onehot.check_columns(pa.schema([("code", pa.dictionary(pa.int32(), pa.string()))]))  # pandas category: text


def test_a_copy_of_the_label_or_a_vector_beside_other_columns_is_not_taken_silently():
    from dmocli.prep.columns import plan_columns

    with pytest.raises(DmoError, match="only by case"):
        plan_columns(pa.schema([("x", pa.float64()), ("Label", pa.int64()), ("label", pa.int64())]), "label")
    vector = pa.list_(pa.float32(), 4)
    with pytest.raises(DmoError, match="--embedding-col"):  # a strong scalar beside `features` was ignored
        plan_columns(pa.schema([("features", vector), ("strong", pa.float64()), ("label", pa.int64())]), "label")
    # a dictionary of numbers (compression, as polars and Spark write) is a number, not a one-hot text column
    plan = plan_columns(pa.schema([("n", pa.dictionary(pa.int32(), pa.int64())), ("label", pa.int64())]), "label")
    assert plan.numeric == ["n"] and plan.categorical == []


def test_label_columns_of_odd_arrow_types(tmp_path):
    """uint64 classes above 2**63 - 1 and half-float labels crashed (exit 1); decimal or date labels got a
    message about a model that did not exist yet; duplicate column names crashed or blamed the file."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 2))
    big = np.uint64(2**63 + 7)
    classes = np.array([np.uint64(1), np.uint64(2), big], dtype=np.uint64)[rng.integers(0, 3, 300)]
    pq.write_table(
        pa.table({"a": x[:, 0], "b": x[:, 1], "label": pa.array(classes, pa.uint64())}), tmp_path / "u.parquet"
    )
    run_dmo("train", tmp_path / "u.parquet", "-o", tmp_path / "u.st", check=True)  # 3 classes: multiclass
    run_dmo("predict", tmp_path / "u.st", tmp_path / "u.parquet", "-o", tmp_path / "u.pred.parquet", check=True)
    predicted = pq.read_table(tmp_path / "u.pred.parquet").column("predicted")
    assert predicted.type == pa.uint64() and set(predicted.to_pylist()) <= {1, 2, int(big)}
    half = pa.array(rng.integers(0, 3, 300).astype(np.float16))
    pq.write_table(pa.table({"a": x[:, 0], "label": half}), tmp_path / "h.parquet")
    report = json.loads(run_dmo("train", tmp_path / "h.parquet", "--json", "-o", tmp_path / "h.st", check=True).stdout)
    assert report["problem"] == "multiclass" and report["splits"]["train"]["n"] == 300
    pq.write_table(
        pa.table({"a": x[:, 0], "label": pa.array(rng.integers(0, 2, 300)).cast(pa.decimal128(19, 0))}),
        tmp_path / "d.parquet",
    )
    for command in (
        ["train", tmp_path / "d.parquet", "-o", tmp_path / "d.st"],
        ["subsample", tmp_path / "d.parquet", "--gamma", "2", "-o", tmp_path / "d.sub.parquet"],
    ):
        proc = run_dmo(*command)
        assert proc.returncode == 2 and "labels must be integers, booleans, floats or text" in proc.stderr
    twice = pa.Table.from_arrays(
        [pa.array(x[:, 0]), pa.array(x[:, 1]), pa.array(rng.integers(0, 2, 300))], names=["x", "x", "label"]
    )
    pq.write_table(twice, tmp_path / "twice.parquet")
    for solver in ("wce", "fofo"):
        proc = run_dmo("train", tmp_path / "twice.parquet", "--solver", solver, "-o", tmp_path / "t.st")
        assert proc.returncode == 2 and "names column(s) 'x' more than once" in proc.stderr, proc.stderr


def test_a_late_decimal_keeps_one_type_through_subsample_and_is_named_in_an_id_column(tmp_path):
    data = _late_value_csv(tmp_path / "late.csv", "2.5")
    run_dmo("subsample", data, "--gamma", "4", "-o", tmp_path / "s.parquet", check=True)
    assert pq.read_schema(tmp_path / "s.parquet").field("count").type == pa.float64()
    run_dmo("train", data, "--solver", "fofo", "--drop", "count", "-o", tmp_path / "m.st", check=True)
    # a new process: this one has learned the column's type from the runs above (csv_dialect's cache)
    proc = run_dmo("predict", tmp_path / "m.st", data, "--id-col", "count", "-o", tmp_path / "p.parquet", process=True)
    assert (
        proc.returncode == 2
        and "--id-col 'count' changes type" in proc.stderr
        and not (tmp_path / "p.parquet").exists()
    )


def test_late_values_in_european_bom_and_concatenated_csvs(tmp_path):
    from dmocli.data import reading

    plain = _late_value_csv(tmp_path / "plain.csv", "2.5")
    european = tmp_path / "european.csv"  # ; and decimal comma, with a byte-order mark as Excel writes it
    european.write_bytes(b"\xef\xbb\xbf" + plain.read_text().replace(",", ";").replace(".", ",").encode())
    assert sum(b.num_rows for b in reading.iter_batches(european)) == 150_000
    assert {b.column("count").type for b in reading.iter_batches(european)} == {pa.float64()}
    joined = tmp_path / "joined.csv"  # two files concatenated with their headers
    text = plain.read_text()
    joined.write_text(text + text)
    with pytest.raises(DmoError, match="repeats the header"):
        sum(b.num_rows for b in reading.iter_batches(joined))


def test_a_csv_that_repeats_its_header_is_refused_not_learned_as_text(tmp_path):
    """Two CSV files joined with their headers: read as data, the repeat made every column text and 'label' a
    class, and train exited 0. Now every reader (file, streaming, standard input) names the repeated line."""
    frame = make_binary_frame(n=150, seed=2)
    text = frame.to_csv(index=False)
    (tmp_path / "twice.csv").write_text(text + text)
    for args in (
        ["train", tmp_path / "twice.csv"],
        ["train", tmp_path / "twice.csv", "--solver", "fofo"],
        ["train", "-", "--solver", "fofo"],
    ):
        proc = run_dmo(*args, "-o", tmp_path / "m.st", stdin=tmp_path / "twice.csv" if "-" in args else None)
        assert proc.returncode == 2 and "data row 151 of" in proc.stderr and "repeats the header line" in proc.stderr
        assert not (tmp_path / "m.st").exists()


def test_a_symbol_among_number_labels_is_refused_as_a_missing_label_marker(tmp_path):
    frame = make_binary_frame(n=200, seed=4)
    frame["label"] = frame["label"].astype(str).where(np.arange(200) % 13 != 0, "?")
    frame.to_csv(tmp_path / "q.csv", index=False)
    proc = run_dmo("train", tmp_path / "q.csv", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "holds '?' in 16 rows beside the number classes ['0', '1']" in proc.stderr
    frame["label"] = np.where(frame["label"] == "1", "+", "-")  # symbols alone are names: +/- classes train
    spec = infer_label_spec(pa.array(frame["label"]), "label", positive=None, binary=True)
    assert spec.classes == ["+", "-"] or spec.classes == ["-", "+"]


def test_string_view_text_is_text(tmp_path):
    """polars and DuckDB write string_view columns: the same model as from plain strings, byte for byte."""
    frame = make_binary_frame(n=200, seed=6)
    frame["color"] = np.where(frame["f0"] > 0, "red", "blue")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, tmp_path / "plain.parquet")
    index = table.schema.get_field_index("color")
    pq.write_table(table.set_column(index, "color", table["color"].cast(pa.string_view())), tmp_path / "view.parquet")
    for name in ("plain", "view"):
        run_dmo("train", tmp_path / f"{name}.parquet", "-o", tmp_path / f"{name}.st", check=True)
    assert (tmp_path / "plain.st").read_bytes() == (tmp_path / "view.st").read_bytes()
    run_dmo("predict", tmp_path / "plain.st", tmp_path / "view.parquet", "-o", tmp_path / "p.parquet", check=True)


def test_csv_text_that_is_not_utf8_is_named_with_the_fix(tmp_path):
    frame = make_binary_frame(n=120, seed=7)
    frame["city"] = np.where(frame["f0"] > 0, "Besançon", "Zürich")
    (tmp_path / "latin1.csv").write_bytes(frame.to_csv(index=False).encode("latin-1"))
    (tmp_path / "utf16.csv").write_bytes(frame.to_csv(index=False).encode("utf-16"))
    for name in ("latin1", "utf16"):
        proc = run_dmo("train", tmp_path / f"{name}.csv", "-o", tmp_path / "m.st")
        assert proc.returncode == 2 and "UTF-8" in proc.stderr and "iconv" in proc.stderr, proc.stderr
        assert "--drop" not in proc.stderr or name == "latin1"


def test_nameless_trailing_columns_are_refused_with_a_fix_that_works(tmp_path):
    frame = make_binary_frame(n=100, seed=8)
    lines = frame.to_csv(index=False).splitlines()
    (tmp_path / "excel.csv").write_text("".join(line + ",,\n" for line in lines))
    proc = run_dmo("train", tmp_path / "excel.csv", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "has 2 columns without a name in its header" in proc.stderr


def test_a_decimal_comma_first_seen_past_the_sniffed_lines_still_makes_numbers(tmp_path):
    """A ';' file whose first 60 rows hold whole numbers: its later 0,25 made the column text (one-hot levels
    "1" and "1,0"). The rest of the file decides the decimal mark when the first lines cannot."""
    frame = make_binary_frame(n=300, seed=9)
    features = [c for c in frame.columns if c != "label"]
    for column in features:
        frame[column] = [f"{v:.0f}" if i < 60 else f"{v:.3f}".replace(".", ",") for i, v in enumerate(frame[column])]
    frame.to_csv(tmp_path / "late.csv", sep=";", index=False)
    run_dmo("train", tmp_path / "late.csv", "-o", tmp_path / "m.st", check=True)
    meta = read_metadata(tmp_path / "m.st")["preprocessing"]
    assert meta["numeric"] == features and not meta.get("categorical")


def test_numbers_written_for_people_are_refused_not_one_hot_encoded(tmp_path):
    """'-11.6%' in 300 distinct values of 600 rows passed the id-like rule (over half the rows) and became 300
    one-hot levels; a few percent levels stay categories."""
    frame = make_binary_frame(n=600, seed=12)
    frame["growth"] = [f"{v:.1f}%" for v in np.round(frame["f0"] * 10, 1) % 30]
    frame.to_csv(tmp_path / "pct.csv", index=False)
    proc = run_dmo("train", tmp_path / "pct.csv", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "string column 'growth' holds numbers written as text" in proc.stderr
    frame["growth"] = np.where(frame["f0"] > 0, "10%", "20%")
    frame.to_csv(tmp_path / "bins.csv", index=False)
    run_dmo("train", tmp_path / "bins.csv", "-o", tmp_path / "m.st", check=True)


def test_csv_lines_that_do_not_fit_the_header_are_named_with_a_fix(tmp_path):
    text = make_binary_frame(n=50, seed=13).to_csv(index=False)
    (tmp_path / "titled.csv").write_text("sep=,\n" + text)  # Excel's separator line above the header
    (tmp_path / "ragged.csv").write_text(text + "1,2,3,4,5,6\n")
    titled = run_dmo("train", tmp_path / "titled.csv", "-o", tmp_path / "m.st")
    assert titled.returncode == 2 and "line 2 has 5 fields where the header (line 1) has 2" in titled.stderr
    assert "delete the title, comment or `sep=` lines" in titled.stderr
    ragged = run_dmo("train", tmp_path / "ragged.csv", "-o", tmp_path / "m.st")
    assert ragged.returncode == 2 and "line 52 has 6 fields where the header (line 1) has 5" in ragged.stderr


def test_a_repeated_header_past_the_first_batch_is_named_by_its_data_row(tmp_path):
    rng = np.random.default_rng(14)
    rows = ["color,size,label"] + [
        f"{rng.choice(['red', 'blue'])},{rng.choice(['s', 'm', 'l'])},{rng.choice(['yes', 'no'], p=[0.2, 0.8])}"
        for _ in range(70_000)
    ]
    rows.insert(69_001, rows[0])  # after data row 69,000: in the stream's second 64k-row batch
    (tmp_path / "text.csv").write_text("\n".join(rows) + "\n")
    proc = run_dmo("train", tmp_path / "text.csv", "--solver", "fofo", "-o", tmp_path / "m.st")
    assert proc.returncode == 2 and "data row 69001 of" in proc.stderr, proc.stderr


def test_the_late_decimal_mark_is_not_decided_by_a_thousands_group(tmp_path):
    from dmocli.data.csv_dialect import csv_dialect

    head = "a\tlabel\n" + "".join(f"{i}\t{i % 2}\n" for i in range(60))
    (tmp_path / "thousands.tsv").write_text(head + "65,366\t1\n1,5\t0\n")  # 65,366 is skipped; 1,5 decides
    assert csv_dialect(tmp_path / "thousands.tsv").decimal_point == ","
    (tmp_path / "only.tsv").write_text(head + "65,366\t1\n")
    assert csv_dialect(tmp_path / "only.tsv").decimal_point == "."
