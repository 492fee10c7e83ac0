"""Which columns of a table are features, and of what kind: numbers, text levels to one-hot encode, or one
embedding list column; columns that only look like features (ids, numbers written for people, the label's
twin) are refused here, before anything is fitted."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pyarrow as pa

from dmocli.data.arrow_numpy import text_array
from dmocli.data.csv_dialect import is_number
from dmocli.errors import DmoError
from dmocli.prep import dates, human_numbers

MAX_CATEGORICAL_LEVELS = 1000
ID_LIKE_MIN_LEVELS = 20  # above this, a string column with a distinct value in most rows is refused as id-like
# A text column this wide is one-hot encoded, but said so: it adds a feature per level.
MEDIUM_LEVELS = 50
MEDIUM_SHARE = 0.05
# A number written for people: a percent sign, a currency symbol or thousands separators ("12.5%", "$1,234").
_DECORATION = re.compile(r"[%$€£¥]|\d[,' ]\d{3}(?:\D|$)")
# A date or timestamp written as text: 2024-01-31, 2024/01/31, 31/01/2024, 01-31-24, 31.01.2024, each with an
# optional time of day ("T10:00", " 10:00:00.5Z", "+01:00").
_DATE_TEXT = re.compile(
    r"(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})"
    r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s?(?:Z|[AP]M|[+-]\d{2}:?\d{2})?)?",
    re.IGNORECASE,
)
_CURRENCY_WORD = re.compile(r"\b[A-Z]{3}\b|[()]")  # a currency code (1.234,50 EUR), accounting parentheses
WORDS_OF_FREE_TEXT = 4  # a level of this many words or more reads as prose, not as an id or a code


OFFSET_PREFIX = "log_accept_"  # `dmo subsample` columns (per-class log acceptance): training offsets, never features


def refuse_problems(problems: list[str]) -> None:
    """Every data problem found, in one error (counted when several): a user fixes them all before the next
    run, not one per run."""
    if problems:
        listed = "; ".join(f"({i}) {problem}" for i, problem in enumerate(problems, 1))
        raise DmoError(problems[0] if len(problems) == 1 else f"{len(problems)} problems: {listed}")


def is_date(t: pa.DataType) -> bool:
    """A typed date or time column (parquet's date and timestamp types; a CSV column of ISO dates reads so)."""
    if pa.types.is_dictionary(t):
        return is_date(t.value_type)
    return pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)


def date_problem(columns: list[str]) -> str:
    """One rule for every input format: a date is refused with its fix, typed or written as text. One-hot it
    would make a feature of every day; a number it is not (docs/data.md, "Dates")."""
    first = columns[0].split(" (")[0].strip("'")
    return (
        f"column(s) {', '.join(columns)} hold dates or times, which dmo does not turn into features (one-hot, "
        f"each day would be a feature of its own); --drop {first}"
        + (" (and the others)" if len(columns) > 1 else "")
        + ", or --dates parts to train on their numeric parts (year, month, weekday, hour, days since the earliest "
        "date; docs/data.md, Dates)"
    )


def text_column_problem(column: str, levels: set[str], n_rows: int, capped: bool) -> str | None:
    """What makes a text column unfit for one-hot encoding, with its fix, or None: dates written as text,
    numbers written for people ("$14.43", "12.5%"), an id, or free text. `capped`: more than
    MAX_CATEGORICAL_LEVELS levels were seen (`levels` holds the first of them)."""
    values = [v.strip() for v in levels if v.strip()]
    if not values:
        return None
    nul = _nul_problem(column, values)
    if nul:
        return nul
    example = min(values)
    # Dates and numbers both need 90% of the levels read as such, and each holds a digit: levels without digits
    # (most codes and names) skip the readers, which import pandas through pyarrow's scalars (start-up time).
    readable = sum(any(c.isdigit() for c in v) for v in values) >= 0.9 * len(values)
    text = text_array(values) if readable else None
    read_as_dates = text is not None and (dates.read_text(text).form != "").mean() >= 0.9
    if sum(bool(_DATE_TEXT.fullmatch(v)) for v in values) >= 0.9 * len(values) or read_as_dates:
        return date_problem([f"'{column}' (text such as {example!r})"])
    many = capped or (len(levels) > ID_LIKE_MIN_LEVELS and len(levels) > n_rows / 2)
    shaped = human_numbers.read_text(text).shaped if text is not None else np.zeros(len(values), dtype=bool)
    decorated = [v for v, ok in zip(values, shaped) if ok and (_DECORATION.search(v) or _CURRENCY_WORD.search(v))]
    if len(levels) > ID_LIKE_MIN_LEVELS and len(decorated) >= 0.9 * len(values):
        return (
            f"string column '{column}' holds numbers written as text, such as amounts or percentages "
            f"(e.g. {min(decorated)!r}); --parse-numbers reads them as numbers (or convert them: drop the %, "
            f"currency sign or thousands separators), or --drop {column}"
        )
    if not many:
        return None
    distinct = f"more than {MAX_CATEGORICAL_LEVELS}" if capped else str(len(levels))
    prose = [v for v in values if len(v.split()) >= WORDS_OF_FREE_TEXT]
    if len(prose) >= 0.5 * len(values):
        return (
            f"string column '{column}' holds free text ({distinct} distinct values, e.g. {min(prose)[:40]!r}); "
            f"--drop {column}, or turn it into features with `dmo extract --kind text`"
        )
    return (
        f"string column '{column}' has {distinct} distinct values in {n_rows} rows: an id (e.g. {example!r}), or "
        f"numbers made text by a marker such as '?' (one-hot, it would let the model memorize rows); --drop "
        f"{column}, or clean it"
    )


def _nul_problem(column: str, values: list[str]) -> str | None:
    """A column of numbers that a NUL byte (a damaged export) made text: one-hot, each number would be a feature
    of its own, so it is named with its cause rather than trained on."""
    damaged = [v for v in values if "\x00" in v]
    if not damaged or sum(is_number(v.replace("\x00", "").strip()) for v in values) < 0.9 * len(values):
        return None
    return (
        f"column '{column}' holds numbers, but {len(damaged)} of its values contain a NUL byte (e.g. {damaged[0]!r}), "
        f"which makes it text; remove the NUL bytes (tr -d '\\000' < IN.csv > OUT.csv), or --drop {column}"
    )


def text_column_warning(column: str, n_levels: int, n_rows: int) -> str | None:
    """A text column one-hot encoded into many features (over MEDIUM_LEVELS levels, or distinct in over
    MEDIUM_SHARE of the rows): trained, but said so, since it may be an id-like code or need grouping."""
    if n_levels > MEDIUM_LEVELS or (n_levels > ID_LIKE_MIN_LEVELS and n_levels > MEDIUM_SHARE * n_rows):
        return (
            f"text column '{column}' has {n_levels} distinct values and adds {n_levels} one-hot features; "
            f"--drop {column} if it is a code or an id, or group its rare values"
        )
    return None


NAMED_VARIANT_GROUPS = 5  # groups of case variants a warning names per column


def case_variant_warning(column: str, groups: list[list[str]]) -> str | None:
    """A text column whose levels differ only in case (`Grocery`, `grocery`; surrounding spaces are trimmed
    already): trained, each spelling a one-hot feature of its own, and a new spelling at predict time unseen. Named
    with the groups found, since the user most likely means each group as one level, and --fold-case does that."""
    if not groups:
        return None
    named = ", ".join("/".join(map(repr, group)) for group in groups[:NAMED_VARIANT_GROUPS])
    more = f" and {len(groups) - NAMED_VARIANT_GROUPS} more" if len(groups) > NAMED_VARIANT_GROUPS else ""
    return (
        f"text column '{column}' has levels that differ only in case ({named}{more}), each a one-hot feature of its "
        "own, and predict counts another spelling as unseen; --fold-case makes each group one level"
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
    """survey_columns, refusing every problem it finds in one message."""
    plan, problems = survey_columns(schema, label_col, drop, embedding_col)
    refuse_problems(problems)
    return plan


def survey_columns(
    schema: pa.Schema, label_col: str, drop: Iterable[str] = (), embedding_col: str | None = None
) -> tuple[ColumnPlan, list[str]]:
    """Numeric columns, string columns (one-hot), or one embedding list column, and every problem the schema
    shows (each with its fix), so a first run names them all. A column with a problem is left out of the plan,
    so the data checks after it (Preprocessor.survey) still look at every other column.

    With an embedding column the table is a feature file (as `dmo extract`
    writes): only the embedding is used; other list columns are extra views.
    """
    drop = set(drop)
    problems: list[str] = []
    missing = [c for c in drop if c not in schema.names]
    if missing:
        problems.append(f"--drop names column(s) not in the data: {', '.join(missing)}")
    if label_col not in schema.names:
        problems.append(_missing_label(schema, label_col, drop))
    elif label_col in drop:
        problems.append(f"--drop names the label column '{label_col}'; choose another label with --label-col")
    candidates = [
        f for f in schema if f.name != label_col and f.name not in drop and not f.name.startswith(OFFSET_PREFIX)
    ]
    twins = [f.name for f in candidates if f.name.casefold() == label_col.casefold()]
    if twins and label_col in schema.names:  # likely a copy of the label (target leakage), never taken silently
        problems.append(
            f"column {twins[0]!r} differs from the label column {label_col!r} only by case, so it is "
            f"likely a copy of the label; --drop {twins[0]} (or name the label with --label-col)"
        )
    nameless = [f for f in candidates if not f.name.strip()]
    if nameless:
        problems.append(_nameless(nameless[0], schema))
    candidates = [f for f in candidates if f.name not in twins and f.name.strip()]
    if embedding_col is not None:
        if embedding_col not in schema.names or not is_list(schema.field(embedding_col).type):
            problems.append(f"--embedding-col {embedding_col!r} is not a list column of the data")
        elif not is_numeric(schema.field(embedding_col).type.value_type):
            problems.append(f"--embedding-col {embedding_col!r} holds {schema.field(embedding_col).type}, not numbers")
        return ColumnPlan([], [], embedding_col), problems
    lists = [f.name for f in candidates if is_list(f.type) and is_numeric(f.type.value_type)]
    if lists:
        others = [f.name for f in candidates if not is_list(f.type)]
        if "features" in lists and not set(others) - EXTRACT_KEYS:
            return ColumnPlan([], [], "features"), problems  # `dmo extract` output: the vector, its key and views
        if len(lists) == 1 and not others:
            return ColumnPlan([], [], lists[0]), problems
        # An embedding replaces every other column; never choose that silently.
        problems.append(
            f"list column(s) {', '.join(lists)} beside other columns ({', '.join(others[:6]) or 'none'}); "
            "give --embedding-col NAME to train on one vector column alone, or --drop the list columns"
        )
        candidates = [f for f in candidates if f.name not in lists]
    numeric, categorical, dates, unusable = [], [], [], []
    for f in candidates:
        if is_numeric(f.type):
            numeric.append(f.name)
        elif is_string(f.type):
            categorical.append(f.name)
        elif is_date(f.type):
            dates.append(f"{f.name} ({f.type})")
        else:
            unusable.append(f)
    if dates:
        problems.append(date_problem(dates))
    undecoded = [f.name for f in unusable if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    if undecoded:  # pyarrow reads CSV text that is not UTF-8 as bytes
        problems.append(
            f"column(s) {', '.join(undecoded[:6])} hold bytes, not text: a CSV saved as Latin-1 or "
            "Windows-1252 reads so (re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8); binary data cannot "
            "be a feature (--drop them)"
        )
    others = [f"{f.name} ({f.type})" for f in unusable if f.name not in undecoded]
    if others:
        problems.append(f"cannot use column(s) {', '.join(others)} as features; remove them with --drop")
    if not numeric and not categorical and not candidates:
        problems.append(
            "no feature columns: the data has only the label column (add numeric or string feature columns)"
        )
    return ColumnPlan(numeric, categorical, None), problems


_LABEL_NAME = re.compile(r"^(is|has|was)_|label|target|class|outcome|fraud|churn|default|^y$", re.IGNORECASE)


def _missing_label(schema: pa.Schema, label_col: str, drop: set[str]) -> str:
    """No column of that name: point at a header with stray spaces, or at the columns that look like a label
    (a boolean, or a name such as is_fraud, target, class), so the fix is one option away."""
    spaced = [name for name in schema.names if name.strip() == label_col.strip()]
    if spaced:  # a header written as "x1, x2, label": the names keep the space after each comma
        return (
            f"no label column '{label_col}', but there is {spaced[0]!r} (with spaces); rename the "
            f"column, or pass --label-col {spaced[0]!r}"
        )
    likely = [
        f.name
        for f in schema
        if f.name not in drop and (pa.types.is_boolean(f.type) or _LABEL_NAME.search(f.name)) and not is_list(f.type)
    ]
    hint = ""
    if likely:  # none on a table of plain feature names: then the message lists the columns alone
        hint = f"; the likeliest: --label-col {likely[0]}" + (f" (or {', '.join(likely[1:3])})" if likely[1:] else "")
    return (
        f"no label column '{label_col}' in the data (columns: {', '.join(map(repr, schema.names[:12]))}); "
        f"name it with --label-col{hint}"
    )


def _nameless(field_: pa.Field, schema: pa.Schema) -> str:
    """A column without a name: empty and last, a trailing delimiter at the end of every line (a spreadsheet's
    export); first, most often the row index pandas' to_csv() writes under an empty header."""
    if pa.types.is_null(field_.type) or field_.name == schema.names[-1]:
        return (
            "the CSV has a trailing delimiter: every line ends with one, which makes an empty last column "
            "without a name; remove the trailing delimiters (or give that column a header and --drop it)"
        )
    return (
        f"a column has no name ({field_.name!r}; pandas writes its row index so with to_csv()); write "
        f"the file with index=False, or --drop {field_.name!r}"
    )
