"""Column planning, one-hot levels, standardization, imputation, embeddings, label handling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dmocli.errors import DmoError
from dmocli.prep.columns import plan_columns
from dmocli.prep.features import Preprocessor
from dmocli.prep.labels import infer_label_spec


def fit(table: pa.Table, impute: str = "none", **kw) -> Preprocessor:
    return Preprocessor.fit(table.to_batches(max_chunksize=7), plan_columns(table.schema, "label", **kw), impute=impute)


def test_standardization_matches_numpy_and_constant_column_is_centred():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(5, 3, 50), "b": np.full(50, 2.0), "label": rng.integers(0, 2, 50)})
    table = pa.Table.from_pandas(frame)
    pre = fit(table)
    X, _ = pre.transform(table)
    assert np.allclose(X[:, 0], (frame.a - frame.a.mean()) / frame.a.std(ddof=0), atol=1e-5)
    assert np.allclose(X[:, 1], 0.0)


def test_categorical_levels_stored_and_unseen_or_missing_level_is_all_zero_and_counted_apart():
    train = pa.table({"x": [1.0, 2.0, 3.0, 4.0], "color": ["red", "blue", "red", None], "label": [0, 1, 0, 1]})
    pre = fit(train)
    assert pre.categorical == {"color": ["blue", "red"]}
    assert pre.feature_names == ["x", "color=blue", "color=red"]
    new = pa.table({"x": [1.0, 2.0, 3.0], "color": ["green", "blue", None], "label": [0, 1, 0]})
    X, levels = pre.transform(new)
    assert levels.unseen == {"color": 1} and levels.missing == {"color": 1}
    assert X[0, 1:].tolist() == [0.0, 0.0]
    assert X[1, 1:].tolist() == [1.0, 0.0]
    assert X[2, 1:].tolist() == [0.0, 0.0]


def test_round_trip_through_dict():
    train = pa.table({"x": [1.0, 2.0, 3.0], "c": ["a", "b", "a"], "label": [0, 1, 0]})
    pre = fit(train)
    again = Preprocessor.from_dict(pre.to_dict())
    assert np.array_equal(pre.transform(train)[0], again.transform(train)[0])


def test_nan_refused_with_counts_then_median_imputation():
    table = pa.table({"x": [1.0, np.nan, 3.0, 10.0, None], "label": [0, 1, 0, 1, 0]})
    with pytest.raises(DmoError, match=r"x \(2 NaN/null, 0 inf\).*--impute median"):
        fit(table)
    pre = fit(table, impute="median")
    assert pre.fill == [3.0]
    X, _ = pre.transform(table)
    assert np.isfinite(X).all()


def test_embedding_column_is_the_feature_vector_and_views_are_ignored():
    emb = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]], type=pa.list_(pa.float32(), 2))
    table = pa.table({"features": emb, "features_weak": emb, "path": ["a", "b", "c"], "label": [0, 1, 0]})
    pre = fit(table)  # `dmo extract` output: the vector beside its key and view columns
    assert pre.embedding == "features" and pre.embedding_dim == 2
    X, _ = pre.transform(table)
    assert X.shape == (3, 2)
    # Any other column beside it would be ignored by the vector: refused, unless the vector is asked for.
    with_id = table.append_column("id", pa.array([1, 2, 3]))
    with pytest.raises(DmoError, match="--embedding-col"):
        fit(with_id)
    assert plan_columns(with_id.schema, "label", embedding_col="features").embedding == "features"


def test_id_like_string_column_refused_unless_dropped():
    n = 1500
    table = pa.table(
        {"x": np.arange(n, dtype=float), "uid": [f"u{i}" for i in range(n)], "label": [i % 2 for i in range(n)]}
    )
    with pytest.raises(DmoError, match="--drop"):
        fit(table)
    assert fit(table, drop=["uid"]).numeric == ["x"]


def test_positive_defaults_to_minority_and_multiclass_needs_positive():
    spec = infer_label_spec(pa.array(["a", "b", "b", "b"]), "label", positive=None, binary=True)
    assert spec.positive == "a"
    with pytest.raises(DmoError, match="--positive"):
        infer_label_spec(pa.array([0, 1, 2, 2]), "label", positive=None, binary=True)
    ovr = infer_label_spec(pa.array([0, 1, 2, 2]), "label", positive="2", binary=True)
    assert ovr.positive == 2 and ovr.encode(pa.array([0, 1, 2, None])).tolist() == [0, 0, 1, -1]


def test_missing_label_is_unlabeled():
    spec = infer_label_spec(pa.array([0, 1, None, 2]), "label", positive=None, binary=False)
    assert spec.classes == [0, 1, 2]
    assert spec.encode(pa.array([2, None, 0])).tolist() == [2, -1, 0]


@pytest.mark.parametrize(
    "values, fill",
    [
        (pa.array([1.5, None, 3.0, None, 5.0], pa.float64()).slice(1), np.nan),
        (pa.array([1.5, 2.5, None], pa.float32()), np.nan),
        (pa.array([1, None, 3], pa.int32()), -1),
        (pa.array([7, 8, 9, 10], pa.uint8()).slice(2), None),
        (pa.array([True, False, None, True, False, True, True, False, True]).slice(3), 0),
        (pa.chunked_array([[1.0, 2.0], [None, 4.0], []], pa.float64()), np.nan),
        (pa.array([], pa.int64()), None),
    ],
)
def test_arrow_to_numpy_matches_pyarrow_conversion(values, fill):
    """dmocli's buffer view (which avoids pyarrow's pandas import) equals pyarrow's own conversion, offsets,
    chunks and validity bitmaps included."""
    from dmocli.data.arrow_numpy import to_numpy

    got = to_numpy(values, fill=fill)
    plain = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    expected = np.array([fill if v is None else v for v in plain.to_pylist()], dtype=got.dtype)
    np.testing.assert_array_equal(got, expected)
    if not plain.null_count:
        assert got.dtype == plain.to_numpy(zero_copy_only=False).dtype


def test_arrow_to_numpy_refuses_nulls_without_a_fill():
    from dmocli.data.arrow_numpy import to_numpy

    with pytest.raises(ValueError, match="nulls"):
        to_numpy(pa.array([1.0, None]))


def test_float32_columns_standardize_the_same_on_the_one_pass_path_and_the_general_path():
    """Clean float32 columns take a fused per-column path; a NaN sends the batch down the general path
    (impute or refuse). Both must give the float32 result of (x - mean) / scale."""
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(500, 3)) * [1.0, 50.0, 0.01] + [0.0, 1000.0, -3.0]).astype(np.float32)
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "label": rng.integers(0, 2, 500)})
    plan = plan_columns(table.schema, "label", (), None)
    pre = Preprocessor.fit(table.to_batches(), plan, impute="median")
    expected = (X - np.asarray(pre.mean, np.float32)) * (1.0 / np.asarray(pre.scale)).astype(np.float32)
    fast, _ = pre.transform(table)
    np.testing.assert_array_equal(fast, expected)
    with_nan = X.copy()
    with_nan[7, 1] = np.nan
    general, _ = pre.transform(table.set_column(1, "b", pa.array(with_nan[:, 1])))
    np.testing.assert_array_equal(np.delete(general, 7, axis=0), np.delete(expected, 7, axis=0))
    assert general[7, 1] == pytest.approx((pre.fill[1] - pre.mean[1]) / pre.scale[1], rel=1e-5)


def test_float32_columns_with_nan_or_inf_are_named_when_fitting_without_impute():
    """Clean float32 batches are summed in place; a NaN or an inf must still reach the check that names it."""
    X = np.random.default_rng(4).normal(size=(300, 2)).astype(np.float32)
    X[10, 1] = np.inf
    X[11, 1] = np.nan
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "label": np.zeros(300, dtype=np.int64)})
    batches = table.to_batches(max_chunksize=100)  # the bad rows sit in the first of three batches
    with pytest.raises(DmoError, match=r"b \(1 NaN/null, 1 inf\)"):
        Preprocessor.fit(batches, plan_columns(table.schema, "label", (), None))


def _mixed_table(n: int, seed: int, levels: tuple[str, ...]) -> pa.Table:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    a[rng.random(n) < 0.1] = np.nan
    return pa.table(
        {
            "a": a,
            "b": pa.array(rng.integers(0, 9, n), pa.int32()),
            "color": rng.choice(levels, n),
            "label": rng.integers(0, 3, n),
        }
    )


def test_prepare_in_blocks_equals_the_whole_table_transform(monkeypatch):
    """features_of writes blocks of rows into one row-major array: same values and unseen counts as one
    whole-table transform, over blocks (7 rows), chunk boundaries that do not line up with them, and the
    last short block."""
    import dmocli.prep.dataset as dataset

    train = _mixed_table(200, 0, ("red", "blue", "green"))
    pre = fit(train, impute="median")
    labels = infer_label_spec(train.column("label"), "label", positive=None, binary=False)
    new = pa.concat_tables([_mixed_table(n, s, ("red", "blue", "violet")) for s, n in enumerate((30, 1, 52), 1)])
    whole, whole_levels = pre.transform(new)
    monkeypatch.setattr(dataset, "PREPARE_ROWS", 7)
    prepared = dataset.prepare(new, pre, labels)
    assert prepared.X.flags["C_CONTIGUOUS"] and prepared.X.dtype == np.float32
    np.testing.assert_array_equal(prepared.X, whole)
    assert prepared.levels == whole_levels and whole_levels.unseen["color"] > 0


def test_prepare_in_blocks_counts_every_block_in_its_error(monkeypatch):
    import dmocli.prep.dataset as dataset

    table = pa.table({"a": [1.0, np.nan, 2.0, 3.0, np.nan, np.nan, 4.0, 5.0, np.nan], "label": [0, 1] * 4 + [0]})
    pre = fit(pa.table({"a": [1.0, 2.0, 3.0], "label": [0, 1, 0]}))
    monkeypatch.setattr(dataset, "PREPARE_ROWS", 3)
    with pytest.raises(DmoError, match=r"a \(4 rows\)"):
        dataset.prepare(table, pre, infer_label_spec(table.column("label"), "label", positive=None, binary=True))


def test_variable_length_embedding_with_an_empty_chunk():
    """A parquet directory with an empty file gives an empty chunk; it must not read as dimension 0."""
    from dmocli.prep.dataset import prepare

    chunk = pa.table({"e": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64())), "label": [0, 1]})
    table = pa.concat_tables([chunk, chunk.slice(0, 0), chunk])
    pre = Preprocessor.fit(table.to_batches(), plan_columns(table.schema, "label", embedding_col="e"), impute="none")
    assert pre.embedding_dim == 2
    prepared = prepare(table, pre, infer_label_spec(table.column("label"), "label", positive=None, binary=True))
    assert prepared.X.shape == (4, 2)


def test_arrays_built_from_buffers_equal_pyarrows_own():
    from dmocli.data.arrow_numpy import repeated, text_array

    assert text_array(["north", "süd", "", "a b"]).equals(pa.array(["north", "süd", "", "a b"]))
    assert text_array([]).equals(pa.array([], pa.string()))
    assert repeated(2024, pa.int64(), 3).equals(pa.array([2024] * 3, pa.int64()))
    assert repeated("eu", pa.string(), 2).equals(pa.array(["eu", "eu"]))
    assert repeated(None, pa.string(), 2).equals(pa.array([None, None], pa.string()))
    assert len(repeated("eu", pa.string(), 0)) == 0
