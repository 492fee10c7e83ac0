"""Which columns of a table are features, and of what kind: numbers, text levels to one-hot encode, or one
embedding list column; columns that only look like features (ids, numbers written for people, the label's
twin) are refused here, before anything is fitted."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

import pyarrow as pa

from dmocli.errors import DmoError

MAX_CATEGORICAL_LEVELS = 1000
ID_LIKE_MIN_LEVELS = 20  # above this, a string column with a distinct value in most rows is refused as id-like
# A number written for people: a percent sign, a currency symbol or thousands separators ("12.5%", "$1,234").
_DECORATED_NUMBER = re.compile(r"[-+(]?[$€£¥]?\s?[-+]?(?:\d{1,3}(?:[,' ]\d{3})+|\d+)(?:[.,]\d+)?\s?%?\)?")
_DECORATION = re.compile(r"[%$€£¥]|\d[,' ]\d{3}(?:\D|$)")


OFFSET_PREFIX = "log_accept_"  # `dmo subsample` columns (per-class log acceptance): training offsets, never features


def refuse_decorated_numbers(column: str, levels: set[str]) -> None:
    """Refuse a text column of numbers written for people ("12.5%", "$1,234", "1 234"): one-hot, each value
    would be a level of its own and the number itself lost. Only a column of many such levels: a few ("10%",
    "20%") may be real categories."""
    if len(levels) <= ID_LIKE_MIN_LEVELS:
        return
    decorated = [v for v in levels if _DECORATED_NUMBER.fullmatch(v.strip()) and _DECORATION.search(v)]
    if len(decorated) >= 0.9 * len(levels):
        raise DmoError(
            f"string column '{column}' holds numbers written as text (e.g. {min(decorated)!r}); convert it "
            "to numbers (drop the %, currency sign or thousands separators), or --drop it"
        )


def is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t)


def is_string(t: pa.DataType) -> bool:
    """Text, plain or dictionary-encoded (pandas `category` of strings). A dictionary of numbers is numeric:
    arrow writers (polars, Spark) dictionary-encode numbers for compression, and parquet decodes them anyway."""
    if pa.types.is_dictionary(t):
        return is_string(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def is_numeric(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return is_numeric(t.value_type)
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)


EXTRACT_KEYS = frozenset({"path", "row"})  # the key columns `dmo extract` writes beside `features`


@dataclass
class ColumnPlan:
    """Which columns become features, decided from the schema alone."""

    numeric: list[str]
    categorical: list[str]
    embedding: str | None


def plan_columns(
    schema: pa.Schema, label_col: str, drop: Iterable[str] = (), embedding_col: str | None = None
) -> ColumnPlan:
    """Numeric columns, string columns (one-hot), or one embedding list column.

    With an embedding column the table is a feature file (as `dmo extract`
    writes): only the embedding is used; other list columns are extra views.
    """
    drop = set(drop)
    missing = [c for c in drop if c not in schema.names]
    if missing:
        raise DmoError(f"--drop names column(s) not in the data: {', '.join(missing)}")
    if label_col not in schema.names:
        spaced = [name for name in schema.names if name.strip() == label_col.strip()]
        if spaced:  # a header written as "x1, x2, label": the names keep the space after each comma
            raise DmoError(
                f"no label column '{label_col}', but there is {spaced[0]!r} (with spaces); rename the "
                f"column, or pass --label-col {spaced[0]!r}"
            )
        raise DmoError(
            f"no label column '{label_col}' in the data (columns: {', '.join(map(repr, schema.names[:12]))}); "
            "name it with --label-col"
        )
    if label_col in drop:
        raise DmoError(f"--drop names the label column '{label_col}'; choose another label with --label-col")
    candidates = [
        f for f in schema if f.name != label_col and f.name not in drop and not f.name.startswith(OFFSET_PREFIX)
    ]
    twins = [f.name for f in candidates if f.name.casefold() == label_col.casefold()]
    if twins:  # most likely a copy of the label (target leakage), never a feature to take without a word
        raise DmoError(
            f"column {twins[0]!r} differs from the label column {label_col!r} only by case, so it is "
            f"likely a copy of the label; --drop {twins[0]} (or name the label with --label-col)"
        )
    nameless = [f.name for f in candidates if not f.name.strip()]
    if nameless:  # pandas' to_csv() writes the row index under an empty header: the row number as a feature
        raise DmoError(
            f"a column has no name ({nameless[0]!r}; pandas writes its row index so with to_csv()); write "
            f"the file with index=False, or --drop {nameless[0]!r}"
        )
    if embedding_col is not None:
        if embedding_col not in schema.names or not is_list(schema.field(embedding_col).type):
            raise DmoError(f"--embedding-col {embedding_col!r} is not a list column of the data")
        if not is_numeric(schema.field(embedding_col).type.value_type):
            raise DmoError(f"--embedding-col {embedding_col!r} holds {schema.field(embedding_col).type}, not numbers")
        return ColumnPlan([], [], embedding_col)
    lists = [f.name for f in candidates if is_list(f.type) and is_numeric(f.type.value_type)]
    if lists:
        others = [f.name for f in candidates if not is_list(f.type)]
        if "features" in lists and not set(others) - EXTRACT_KEYS:
            return ColumnPlan([], [], "features")  # `dmo extract` output: the vector, beside its key and view columns
        if len(lists) == 1 and not others:
            return ColumnPlan([], [], lists[0])
        # An embedding replaces every other column; never choose that silently.
        raise DmoError(
            f"list column(s) {', '.join(lists)} beside other columns ({', '.join(others[:6]) or 'none'}); "
            "give --embedding-col NAME to train on one vector column alone, or --drop the list columns"
        )
    numeric, categorical, unusable = [], [], []
    for f in candidates:
        if is_numeric(f.type):
            numeric.append(f.name)
        elif is_string(f.type):
            categorical.append(f.name)
        else:
            unusable.append(f"{f.name} ({f.type})")
    undecoded = [f.name for f in candidates if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    if undecoded and len(undecoded) == len(unusable):  # pyarrow reads CSV text that is not UTF-8 as bytes
        raise DmoError(
            f"column(s) {', '.join(undecoded[:6])} hold bytes, not text: a CSV saved as Latin-1 or "
            "Windows-1252 reads so (re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8); binary data cannot "
            "be a feature (--drop them)"
        )
    if unusable:
        raise DmoError(f"cannot use column(s) {', '.join(unusable)} as features; remove them with --drop")
    if not numeric and not categorical:
        raise DmoError("no feature columns: the data has only the label column (add numeric or string feature columns)")
    return ColumnPlan(numeric, categorical, None)
