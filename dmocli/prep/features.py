"""Turning table columns into a float32 feature matrix, the same way at train and predict time.

The fitted Preprocessor is stored in the model file as JSON: column names,
categorical levels, standardization statistics and imputation values, so a
model applied to new data reproduces training's encoding exactly.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data.arrow_numpy import text_array, to_numpy
from dmocli.errors import DmoError
from dmocli.prep.columns import (
    MAX_CATEGORICAL_LEVELS,
    ColumnPlan,
    is_list,
    is_numeric,
    is_string,
    refuse_problems,
    text_column_problem,
)
from dmocli.prep.derive import Derivation

RESERVOIR_ROWS = 100_000
MAX_LISTED_UNSEEN = 100  # unseen levels kept per column, with their counts, for the report


@dataclass
class LevelCounts:
    """Per categorical column, the rows encoded as all zeros: a level not seen in training, or a missing value;
    per numeric column, the missing values that --impute median filled. All are legitimate encodings, but silent,
    so the reports and warnings say how often each happened (prep/drift.py). The unseen levels themselves are
    kept too, with their row counts (at most MAX_LISTED_UNSEEN per column: a warning names a few, the report all
    of these), and which of them differ from a level the model knows only in case or surrounding spaces."""

    unseen: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    imputed: dict[str, int] = field(default_factory=dict)
    unseen_values: dict[str, dict[str, int]] = field(default_factory=dict)
    variants: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # unseen level -> the known ones

    def add(self, other: "LevelCounts") -> None:
        for mine, theirs in ((self.unseen, other.unseen), (self.missing, other.missing), (self.imputed, other.imputed)):
            for name, count in theirs.items():
                mine[name] = mine.get(name, 0) + count
        for name, tally in other.unseen_values.items():
            kept = self.unseen_values.setdefault(name, {})
            for value, count in tally.items():
                if value in kept or len(kept) < MAX_LISTED_UNSEEN:  # past the cap, only the ones listed are counted
                    kept[value] = kept.get(value, 0) + count
        for name, variants in other.variants.items():
            kept = self.unseen_values.get(name, {})
            self.variants.setdefault(name, {}).update((v, known) for v, known in variants.items() if v in kept)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-able, for a Dask worker's counts."""
        return {
            "unseen": self.unseen,
            "missing": self.missing,
            "imputed": self.imputed,
            "unseen_values": self.unseen_values,
            "variants": self.variants,
        }

    @classmethod
    def from_dict(cls, data: dict[str, dict[str, Any]]) -> "LevelCounts":
        return cls(
            data["unseen"],
            data["missing"],
            data.get("imputed", {}),
            data.get("unseen_values", {}),
            data.get("variants", {}),
        )

    def named_unseen(self, column: str) -> list[tuple[str, int]]:
        """A column's unseen levels with their row counts, the most frequent first (ties in text order)."""
        return sorted(self.unseen_values.get(column, {}).items(), key=lambda item: (-item[1], item[0]))

    def report(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """The report fields (`prefix` names another split's, e.g. "val_"): only columns where it happened."""
        return {
            f"{prefix}unseen_levels": {k: v for k, v in self.unseen.items() if v},
            f"{prefix}missing_levels": {k: v for k, v in self.missing.items() if v},
            f"{prefix}unseen_level_values": {k: dict(self.named_unseen(k)) for k, v in self.unseen_values.items() if v},
            f"{prefix}unseen_level_variants": {k: v for k, v in self.variants.items() if v},
        }


@dataclass
class Preprocessor:
    """Fitted encoding: raw columns -> standardized float32 matrix."""

    numeric: list[str] = field(default_factory=list)
    categorical: dict[str, list[str]] = field(default_factory=dict)
    embedding: str | None = None
    embedding_dim: int = 0
    mean: list[float] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)
    impute: str = "none"
    fill: list[float] = field(default_factory=list)
    trim_text: bool = True  # categorical levels matched without surrounding whitespace; False for older model files
    # One feature per categorical column holding its level's index (NaN: missing or unseen), for models that split
    # on categories themselves (gbdt: XGBoost's categorical splits); False: one 0/1 feature per level.
    categorical_codes: bool = False
    fold_case: bool = False  # --fold-case: levels matched lower-cased (`folded`), so Grocery and GROCERY are one
    # --dates parts / --parse-numbers: raw columns turned into numeric ones before this encoding (prep/derive.py);
    # `numeric` names the derived columns, `input_columns` the raw ones.
    derive: Derivation | None = None

    @property
    def input_columns(self) -> list[str]:
        if self.embedding:
            return [self.embedding]
        names = self.numeric + list(self.categorical)
        return self.derive.inputs(names) if self.derive else names

    @property
    def text_columns(self) -> list[str]:
        """The columns a CSV reader keeps as text: the one-hot ones ("001" stays "001"), and the dates and numbers
        the stored derivation reads from text (a file whose dates are all ISO would otherwise read them typed)."""
        return list(self.categorical) + (self.derive.text_sources if self.derive else [])

    def trend_features(self) -> list[str]:
        """The feature columns that move with time itself (`--dates parts,trend`'s year and days_since, and those
        of a model file written before plain `parts` left them out): no later period matches their training
        values, so their drift is expected rather than a sign the data changed."""
        trends = set(self.derive.trends()) if self.derive else set()
        return [name for name in self.numeric if name in trends]

    def derive_warnings(self) -> list[str]:
        """What the fitted derivation says of the training rows (date parts dropped as constant), for the training
        paths that fit it without `dmo check`'s survey (the streaming solvers, Dask) to say as that survey does."""
        return self.derive.warnings() if self.derive else []

    def derived(self, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
        """The batch with the stored derivation applied (dates as parts, numbers parsed); as is without one."""
        return self.derive.apply(batch) if self.derive else batch

    @property
    def n_dense(self) -> int:
        return self.embedding_dim if self.embedding else len(self.numeric)

    @property
    def n_features(self) -> int:
        if self.categorical_codes:
            return self.n_dense + len(self.categorical)
        return self.n_dense + sum(len(v) for v in self.categorical.values())

    @property
    def feature_types(self) -> list[str] | None:
        """XGBoost's feature types ("q" numeric, "c" categorical) when levels are coded, else None."""
        if not self.categorical_codes:
            return None
        return ["q"] * self.n_dense + ["c"] * len(self.categorical)

    @property
    def feature_names(self) -> list[str]:
        if self.embedding:
            return [f"{self.embedding}[{i}]" for i in range(self.embedding_dim)]
        names = list(self.numeric)
        for col, levels in self.categorical.items():
            names += [col] if self.categorical_codes else [f"{col}={level}" for level in levels]
        return names

    # ---- fitting -------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        batches: Iterable[pa.RecordBatch],
        plan: ColumnPlan,
        *,
        impute: str = "none",
        categorical_codes: bool = False,
        fold_case: bool = False,
        derive: Derivation | None = None,
    ) -> "Preprocessor":
        """survey, refusing every problem it finds in one message."""
        pre, problems = cls.survey(
            batches, plan, impute=impute, categorical_codes=categorical_codes, fold_case=fold_case, derive=derive
        )
        refuse_problems(problems)
        return pre

    @classmethod
    def survey(
        cls,
        batches: Iterable[pa.RecordBatch],
        plan: ColumnPlan,
        *,
        impute: str = "none",
        categorical_codes: bool = False,
        fold_case: bool = False,
        derive: Derivation | None = None,
    ) -> tuple["Preprocessor", list[str]]:
        """One pass: mean/std (merged per batch, float64), categorical levels, medians from a reservoir; and every
        problem of the columns' values (missing values without --impute, ids, dates or amounts as text, ...),
        each with its fix. With problems, the Preprocessor is not fit to use. `impute` "keep" (gbdt) leaves
        missing values to the model; `categorical_codes`, `fold_case` and `derive`: see the fields (`batches` are
        raw: the derivation, fitted by Derivation.survey, which named its values that do not read, applies here).

        The median for imputation comes from a uniform reservoir of up to
        100k rows, exact for smaller data; it keeps fitting O(1) in memory.
        """
        if impute not in {"none", "median", "keep"}:  # keep: NaN stays NaN for models that route it (gbdt)
            raise DmoError(f"--impute {impute!r} is not known (use none or median)")
        pre = cls(
            numeric=list(plan.numeric),
            embedding=plan.embedding,
            impute=impute,
            categorical_codes=categorical_codes,
            fold_case=fold_case,
            derive=derive or None,
        )
        if pre.derive:
            batches = (pre.derive.apply(batch, strict=False) for batch in batches)
        tally = _ValueTally(pre, list(plan.categorical))
        for batch in batches:  # every batch has the same columns (files that differ: dmocli.data.parquet_layout)
            tally.add(batch)
        problems = tally.fit_statistics()
        for col in plan.categorical:
            levels = tally.levels[col]
            found = text_column_problem(col, levels, tally.n_rows, capped=len(levels) > MAX_CATEGORICAL_LEVELS)
            if found:
                problems.append(found)
        pre.categorical = {c: sorted(tally.levels[c]) for c in plan.categorical}
        if pre.n_features == 0 and not problems and not tally.unreadable:
            problems.append("no usable feature columns after encoding")
        return pre, problems

    def _vectors_readable(self, schema: pa.Schema) -> bool:
        """Whether the embedding column, if there is one, is a list of numbers in `schema`; --embedding-col naming
        another column (or none) is refused by survey_columns, and reading it as vectors would fail unexplained."""
        if self.embedding is None:
            return True
        if self.embedding not in schema.names:
            return False
        kind = schema.field(self.embedding).type
        return is_list(kind) and is_numeric(kind.value_type)

    # ---- transforming --------------------------------------------------------
    def _dense(self, batch: pa.RecordBatch | pa.Table) -> np.ndarray:
        """The raw numeric or embedding values as an (n, d) array: float32 when every input is float32
        (no precision to keep beyond it, half the memory traffic), else float64; nulls become NaN.
        Numeric columns come out column-major, so each column is one contiguous write."""
        n = batch.num_rows
        if self.embedding:
            col = batch.column(self.embedding)
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            if col.null_count:
                raise DmoError(f"embedding column '{self.embedding}' has {col.null_count} missing rows; remove them")
            if pa.types.is_fixed_size_list(col.type):
                dim = col.type.list_size
            else:
                lengths = to_numpy(pc.list_value_length(col))
                dim = int(lengths[0]) if n else (self.embedding_dim or 0)  # an empty batch says nothing of it
                if n and (lengths != dim).any():
                    raise DmoError(f"embedding column '{self.embedding}' has rows of different lengths; all must match")
            if self.embedding_dim and dim != self.embedding_dim:
                raise DmoError(
                    f"embedding column '{self.embedding}' has dimension {dim}, the model expects {self.embedding_dim}"
                )
            self.embedding_dim = dim
            values = to_numpy(col.flatten(), fill=np.nan)
            dtype = np.float32 if values.dtype == np.float32 else np.float64
            return values.astype(dtype, copy=False).reshape(n, dim)
        if not self.numeric:
            return np.empty((n, 0))
        columns = [batch.column(name) for name in self.numeric]
        dtype = np.float32 if all(c.type == pa.float32() for c in columns) else np.float64
        out = np.empty((len(columns), n), dtype=dtype)
        for j, col in enumerate(columns):
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            if (
                pa.types.is_boolean(col.type)
                or pa.types.is_decimal(col.type)
                or (col.null_count and not pa.types.is_floating(col.type))
            ):  # only a float holds NaN for a null; an integer past 2**53 rounds, as numpy's conversion does
                col = col.cast(pa.float64(), safe=False)
            out[j] = to_numpy(col, fill=np.nan)  # nulls become NaN
        return out.T

    def check_columns(self, schema: pa.Schema) -> None:
        """Refuse data lacking a training column, or holding one of another kind, naming each, before any work."""
        problems = self.column_problems(schema)
        if problems:
            raise DmoError("; ".join(problems))

    def column_problems(self, schema: pa.Schema) -> list[str]:
        """Every training column that `schema` lacks or holds as another kind, as messages (empty when none)."""
        problems = []
        missing = self.missing_columns(schema)
        if missing:
            problems.append(
                f"data is missing column(s) the model was trained on: {', '.join(missing)} "
                "(use data with the training columns)"
            )
        return problems + self.kind_problems(schema)

    def missing_columns(self, schema: pa.Schema) -> list[str]:
        """The training columns `schema` does not have (its names as a set once: `schema.names` builds a list on
        each call, and a lookup in it per column was quadratic, 145 s a 500 x 5,000 CSV)."""
        names = set(schema.names)
        if self.derive:
            return [c for c in self.input_columns if not self.derive.present(c, names)]
        return [c for c in self.input_columns if c not in names]

    def kind_problems(self, schema: pa.Schema) -> list[str]:
        """The training columns `schema` has, but as another kind (text for numbers, ...), as messages."""
        problems = []

        def kind(name: str) -> str:
            return f"{name} ({schema.field(name).type})"

        def null(name: str) -> bool:
            return pa.types.is_null(schema.field(name).type)

        present = set(schema.names)
        if self.derive:  # the derived columns' sources are checked by the derivation
            problems += self.derive.kind_problems(schema)
            present -= set(self.derive.text_sources)
        numbers = [c for c in self.numeric if c in present and not (is_numeric(schema.field(c).type) or null(c))]
        texts = [kind(c) for c in numbers if is_string(schema.field(c).type)]
        others = [kind(c) for c in numbers if not is_string(schema.field(c).type)]
        if texts:
            problems.append(
                f"column(s) {', '.join(texts[:6])} hold text where the model was trained on numbers "
                "(a missing-value marker such as '?' or 'n/a' makes a CSV column text); clean or convert them"
            )
        if others:
            problems.append(
                f"column(s) {', '.join(others[:6])} are not numbers, and the model was "
                "trained on numbers there; convert them as in the training data"
            )
        # A text column that arrives as numbers or booleans would match no level: every row silently all zeros.
        levels = [
            kind(c) for c in self.categorical if c in present and not (is_string(schema.field(c).type) or null(c))
        ]
        if levels:
            problems.append(
                f"column(s) {', '.join(levels[:6])} are not text, and the model was trained on text there "
                "(one-hot levels); read or cast them as text, as in the training data"
            )
        if self.embedding is not None and self.embedding in present:
            vector = schema.field(self.embedding).type
            if not (is_list(vector) and is_numeric(vector.value_type)):
                problems.append(
                    f"column {kind(self.embedding)} is not a list of numbers, and the model was trained "
                    "on a vector there; use the feature file's vector column"
                )
        return problems

    def transform(self, batch: pa.RecordBatch | pa.Table) -> tuple[np.ndarray, LevelCounts]:
        """Float32 features and, per categorical column, how many rows had an unseen level or none."""
        self.check_columns(batch.schema)
        batch = self.derived(batch)
        fast = self._standardized_float32(batch)
        if fast is not None:
            return fast, LevelCounts()
        dense = self._dense(batch)
        offset = dense.shape[1]
        counts = LevelCounts()
        if offset and not np.isfinite(dense).all():
            if not self.embedding:
                counts.imputed = dict(zip(self.numeric, (~np.isfinite(dense)).sum(axis=0).tolist()))  # inf too
            dense = self._fill_missing(dense)
        # Column-major result: the numeric block is written column by column without a transposing copy,
        # and mini-batch row slices of it still multiply fast (BLAS takes either layout).
        out = np.zeros((self.n_features, batch.num_rows), dtype=np.float32).T
        if offset:
            inverse_scale = 1.0 / np.asarray(self.scale)
            with np.errstate(over="ignore"):  # a value far outside training's range overflows float32: named below
                if dense.dtype == np.float32:  # float32 in, float32 arithmetic (the one-pass path's values)
                    np.subtract(dense, np.asarray(self.mean, dtype=np.float32), out=out[:, :offset])
                    out[:, :offset] *= inverse_scale.astype(np.float32)
                else:  # in float64 first: a column around 1e40 standardizes to O(1), only its raw values exceed float32
                    out[:, :offset] = (dense - np.asarray(self.mean)) * inverse_scale
            overflow = np.isinf(out[:, :offset]).any(axis=0)  # NaN: a value kept missing (impute keep)
            if overflow.any():
                names = [self.feature_names[i] for i in np.flatnonzero(overflow)[:8]]
                raise DmoError(
                    f"feature column(s) {', '.join(names)} hold values too large for the model (beyond float32 once "
                    "standardized with training's mean and scale); check the units of those columns"
                )
        for col, levels in self.categorical.items():
            arr = level_text(batch.column(col), self.trim_text)
            index = pc.index_in(self._level_keys(arr), value_set=text_array(levels))
            idx = to_numpy(index, fill=-1)
            if self.categorical_codes:
                out[:, offset] = np.where(idx >= 0, idx, np.nan)
                offset += 1
            else:
                rows = np.flatnonzero(idx >= 0)
                out[rows, offset + idx[rows]] = 1.0
                offset += len(levels)
            counts.missing[col] = arr.null_count
            counts.unseen[col] = int((idx < 0).sum()) - arr.null_count
            if counts.unseen[col]:  # the unseen levels, as written, for the warning and the report to name
                unseen = pa.array((idx < 0) & arr.is_valid().to_numpy(zero_copy_only=False))
                counts.unseen_values[col], counts.variants[col] = tally_unseen(arr.filter(unseen), levels)
        return out, counts

    def _level_keys(self, text: pa.Array) -> pa.Array:
        """The text levels are matched on: as given, or `folded` under --fold-case."""
        return folded(text) if self.fold_case else text

    def _float32_views(self, batch: pa.RecordBatch | pa.Table) -> list[np.ndarray] | None:
        """The numeric columns as zero-copy numpy views when every one is float32 without nulls (the common
        large-data case, worth its own path); None otherwise, for an embedding, or once fitted categorical
        levels exist (transform must then build the wider one-hot block; fit handles levels on its own)."""
        if self.embedding or self.categorical or not self.numeric:
            return None
        columns = [batch.column(name) for name in self.numeric]
        if not all(c.type == pa.float32() and c.null_count == 0 for c in columns):
            return None
        return [to_numpy(c) for c in columns]

    def _standardized_float32(self, batch: pa.RecordBatch | pa.Table) -> np.ndarray | None:
        """The common streaming case in one pass: float32 numeric columns without nulls, each standardized
        straight from its arrow buffer into the column-major output while it is in cache (no raw copy).

        Same float32 arithmetic as the general path, so the same values. None when a column is not
        float32, has nulls, or holds NaN/inf: the general path then imputes or names the columns.
        """
        columns = self._float32_views(batch)
        if columns is None:
            return None
        mean = np.asarray(self.mean, dtype=np.float32)
        inverse_scale = (1.0 / np.asarray(self.scale)).astype(np.float32)
        out = np.empty((len(columns), batch.num_rows), dtype=np.float32)
        for j, col in enumerate(columns):
            np.subtract(col, mean[j], out=out[j])
            out[j] *= inverse_scale[j]
            if not np.isfinite(out[j]).all():
                return None
        return out.T

    def _fill_missing(self, dense: np.ndarray) -> np.ndarray:
        """NaN/inf replaced by the stored medians under --impute median; otherwise the error naming the columns."""
        bad = np.isinf(dense) if self.impute == "keep" else ~np.isfinite(dense)
        if self.impute == "keep" and not bad.any():
            return dense  # missing values stay NaN: the trees route them
        if self.impute != "median":
            names = self.feature_names
            cols = np.flatnonzero(bad.any(axis=0))
            parts = [f"{names[i]} ({int(bad[:, i].sum())} rows)" for i in cols[:8]]
            raise DmoError(
                f"features contain missing or infinite values: {', '.join(parts)}; "
                "clean them, or train (or subsample) with --impute median"
            )
        return np.where(bad, np.asarray(self.fill, dtype=dense.dtype), dense)

    def to_dict(self) -> dict[str, Any]:
        return {
            "numeric": self.numeric,
            "categorical": self.categorical,
            "embedding": self.embedding,
            "embedding_dim": self.embedding_dim,
            "mean": self.mean,
            "scale": self.scale,
            "impute": self.impute,
            "fill": self.fill,
            "trim_text": self.trim_text,
            "categorical_codes": self.categorical_codes,
            # Only when asked for: a model trained without --fold-case is written byte for byte as before it existed.
            **({"fold_case": True} if self.fold_case else {}),
            **({"derive": self.derive.to_dict()} if self.derive else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Preprocessor":
        pre = cls(**{"trim_text": False, **{k: data[k] for k in cls.__dataclass_fields__ if k in data}})
        if pre.derive is not None:  # checked value by value: a malformed rule is a ValueError naming it
            pre.derive = Derivation.from_dict(pre.derive)
        return pre


def level_text(column: pa.Array | pa.ChunkedArray, trim: bool = True) -> pa.Array:
    """A categorical column as the text its levels are matched on: decoded, without surrounding whitespace
    ("north" and "north " are one level, as they are for labels), blank text missing like an empty CSV cell.
    trim=False: a model file written before levels were trimmed matches them as it was trained."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not trim:
        return column.cast(pa.string())
    text = pc.utf8_trim_whitespace(column.cast(pa.string()))
    not_blank = pc.cast(pc.utf8_length(text), pa.bool_())  # no Python scalar: that would import pandas
    return pc.if_else(not_blank, text, pa.nulls(len(text), pa.string()))


def folded(text: pa.Array) -> pa.Array:
    """Text as --fold-case matches it, and as case/space variants are found: without surrounding whitespace,
    lower-cased (Unicode)."""
    return pc.utf8_lower(pc.utf8_trim_whitespace(text))


def case_variant_groups(levels: list[str]) -> list[list[str]]:
    """The levels that are one after `folded` (Grocery, grocery), in groups of two or more, in `levels`' order:
    each a one-hot feature of its own that the user most likely means as one."""
    return [group for group in _by_folded(levels).values() if len(group) > 1]


def tally_unseen(values: pa.Array, levels: list[str]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Unseen levels (`values`, one per row) with their row counts, the most frequent MAX_LISTED_UNSEEN, and
    which of them equal known `levels` once `folded`: a case/space variant the warning can name as such."""
    tally = pc.value_counts(values)
    counted = zip(tally.field("values").to_pylist(), tally.field("counts").to_pylist())
    kept = dict(sorted(counted, key=lambda item: (-item[1], item[0]))[:MAX_LISTED_UNSEEN])
    known = _by_folded(levels)
    names = list(kept)
    return kept, {name: known[key] for name, key in zip(names, _folded_texts(names)) if key in known}


def _by_folded(levels: list[str]) -> dict[str, list[str]]:
    """Levels grouped by their `folded` text."""
    groups: dict[str, list[str]] = {}
    for level, key in zip(levels, _folded_texts(levels)):
        groups.setdefault(key, []).append(level)
    return groups


def _folded_texts(values: list[str]) -> list[str]:
    return folded(text_array(values)).to_pylist()


def column_moments(values: np.ndarray) -> tuple[int, float, float]:
    """(count, mean, sum of squared deviations) of one column, in float64, around a shift near the mean:
    sum((x - c)^2) - (sum(x - c))^2 / n is exact to rounding when c is close to the mean, where
    E[x^2] - mean^2 loses every digit of a column such as 1e8 +- 0.1."""
    n = values.size
    if n == 0:
        return 0, 0.0, 0.0
    shift = np.float64(values.sum(dtype=np.float64) / n)
    centred = values - shift  # float64 (a float32 x - c would round each difference to 24 bits)
    s1 = float(centred.sum(dtype=np.float64))
    s2 = float(np.einsum("i,i->", centred, centred, dtype=np.float64))
    return n, float(shift) + s1 / n, s2 - s1 * s1 / n


class RunningMoments:
    """Per-column count, mean and sum of squared deviations over batches, merged pairwise (Chan, Golub and
    LeVeque): exact to rounding for any batch sizes, and O(columns) memory for a stream."""

    def __init__(self, width: int):
        self.count = np.zeros(width)
        self.mean = np.zeros(width)
        self.m2 = np.zeros(width)

    def add(self, count: np.ndarray, mean: np.ndarray, m2: np.ndarray) -> None:
        """Merge one batch's per-column moments; a huge column overflows to inf quietly (the caller refuses it)."""
        total = self.count + count
        share = np.divide(count, total, out=np.zeros_like(total), where=total > 0)
        with np.errstate(over="ignore", invalid="ignore"):
            delta = mean - self.mean
            self.m2 = self.m2 + m2 + (delta * share) * (delta * self.count)  # 0, not inf * 0, on the first batch
            self.mean = self.mean + delta * share
        self.count = total


def _reservoir_add(reservoir: list[np.ndarray], rows: np.ndarray, seen: int, rng: np.random.Generator) -> int:
    """Keep a uniform sample of at most RESERVOIR_ROWS rows across batches (Algorithm R, vectorized)."""
    held = sum(len(r) for r in reservoir)
    room = RESERVOIR_ROWS - held
    if room > 0:
        head = rows[:room]
        reservoir.append(head.copy())
        seen += len(head)
        rows = rows[room:]
    if len(rows):
        sample = np.concatenate(reservoir, axis=0)
        positions = rng.integers(0, seen + np.arange(1, len(rows) + 1))
        keep = positions < RESERVOIR_ROWS
        sample[positions[keep]] = rows[keep]
        reservoir[:] = [sample]
        seen += len(rows)
    return seen


class _ValueTally:
    """What Preprocessor.survey counts over the batches: each text column's levels, the running moments of the
    numeric features (finite values only), their NaN and inf counts, and the median reservoir; then the
    statistics fitted from them, with every problem of the values named."""

    def __init__(self, pre: Preprocessor, categorical: list[str]):
        self.pre, self.impute = pre, pre.impute
        self.levels: dict[str, set[str]] = {c: set() for c in categorical}
        self.moments: RunningMoments | None = None
        self.bad_nan: np.ndarray | None = None
        self.bad_inf: np.ndarray | None = None
        self.reservoir: list[np.ndarray] = []
        self.rng = np.random.default_rng(0)
        self.seen = 0
        self.n_rows = 0
        self.unreadable = False

    def add(self, batch: pa.RecordBatch) -> None:
        """Count one batch; a clean batch without imputation is read through zero-copy float32 views, no mask."""
        pre, impute = self.pre, self.impute
        self.n_rows += batch.num_rows
        if not pre._vectors_readable(batch.schema):  # survey_columns named the problem: nothing more to find
            self.unreadable = True
            return
        views = pre._float32_views(batch) if impute == "none" else None
        dense = pre._dense(batch) if views is None else None
        for col, levels in self.levels.items():
            if len(levels) <= MAX_CATEGORICAL_LEVELS:  # past it the column is refused: stop collecting
                levels.update(pc.unique(pre._level_keys(level_text(batch.column(col)))).drop_null().to_pylist())
        columns = views if views is not None else [dense[:, j] for j in range(dense.shape[1])]
        if not columns:
            return
        if self.moments is None:
            self.moments = RunningMoments(len(columns))
            self.bad_nan = np.zeros(len(columns), dtype=np.int64)
            self.bad_inf = np.zeros(len(columns), dtype=np.int64)
        if impute == "none":  # a clean batch needs no mask (median imputation always builds one)
            with np.errstate(over="ignore", invalid="ignore"):  # NaN/inf are counted below, huge values refused after
                stats = [column_moments(c) for c in columns]
            if all(np.isfinite(m) for _, m, _ in stats):
                self.moments.add(*map(np.array, zip(*stats)))
                return
        if dense is None:
            dense = pre._dense(batch)
        nan = np.isnan(dense)
        inf = np.isinf(dense)
        finite = ~(nan | inf)
        with np.errstate(over="ignore", invalid="ignore"):
            stats = [column_moments(dense[finite[:, j], j]) for j in range(dense.shape[1])]
        self.moments.add(*map(np.array, zip(*stats)))
        self.bad_nan += nan.sum(axis=0)
        self.bad_inf += inf.sum(axis=0)
        if impute == "median":
            self.seen = _reservoir_add(self.reservoir, np.where(finite, dense, np.nan), self.seen, self.rng)

    def fit_statistics(self) -> list[str]:
        """Set the Preprocessor's mean, scale (and median fill) from the counts; the problems of the values:
        missing or infinite ones it cannot take, empty columns, values too large to standardize."""
        problems: list[str] = []
        moments, pre, impute = self.moments, self.pre, self.impute
        if moments is None:
            return problems
        bad_nan, bad_inf = self.bad_nan, self.bad_inf
        names = pre.feature_names if pre.embedding else pre.numeric
        bad = bad_nan + bad_inf if impute == "none" else bad_inf if impute == "keep" else np.zeros_like(bad_inf)
        count = moments.count
        if bad.any():
            parts = [
                f"{names[i]} ({bad_nan[i]} NaN/null, {bad_inf[i]} inf)"
                for i in np.flatnonzero((bad > 0) & (count > 0))[:8]
            ]
            if parts:
                problems.append(
                    f"features contain missing or infinite values: {', '.join(parts)}; "
                    + ("clean them or pass --impute median" if impute == "none" else "replace the infinite values")
                )
        if (count == 0).any():
            empty = [names[i] for i in np.flatnonzero(count == 0)[:8]]
            problems.append(f"feature column(s) with no finite value: {', '.join(empty)}; remove them with --drop")
        mean = moments.mean
        with np.errstate(over="ignore", invalid="ignore"):
            std = np.sqrt(np.maximum(moments.m2 / np.maximum(count, 1), 0.0))
        huge = ~(np.isfinite(mean) & np.isfinite(std))
        if huge.any():
            problems.append(
                f"feature column(s) {', '.join(names[i] for i in np.flatnonzero(huge)[:8])} hold values too large "
                "to standardize (squares overflow double precision, beyond about 1e154); rescale them "
                "(a log, or other units) or remove them with --drop"
            )
        std[std < 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0  # constant column: centre only
        pre.mean = mean.tolist()
        pre.scale = std.tolist()
        if impute == "median":
            sample = np.concatenate(self.reservoir, axis=0)
            with warnings.catch_warnings():  # an all-NaN column: named above
                warnings.simplefilter("ignore", RuntimeWarning)
                pre.fill = np.nanmedian(sample, axis=0).tolist()
        return problems
