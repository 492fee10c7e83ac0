"""Label column handling: class names, the positive class, and integer codes.

Labels keep their original type (int, string, bool) in the model file so a
prediction can be mapped back; a missing label is an unlabeled row (code -1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dmocli.data.arrow_numpy import to_numpy
from dmocli.data.csv_dialect import is_number, is_text
from dmocli.errors import DmoError

UNLABELED = -1
MANY_CLASSES = 20  # above this, a label with a class for most rows is refused as a continuous target


def _numeric(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)


def python_value(value: Any) -> Any:
    """Numpy/arrow scalars to plain JSON-able Python values."""
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    if isinstance(value, np.generic):
        value = value.item()
    return value


@dataclass
class LabelSpec:
    """Which column holds the label, its classes, and (for binary problems) the positive class."""

    column: str
    classes: list[Any]
    positive: Any | None = None
    counts: list[int] = field(default_factory=list)
    trim_text: bool = True  # text labels compared without surrounding whitespace; False for older model files

    @property
    def binary(self) -> bool:
        return self.positive is not None

    @property
    def two_class(self) -> bool:
        """A binary model of a two-class label (not one class against the rest of several)."""
        return self.binary and self.classes[0] != f"not {self.positive}"

    @property
    def n_outputs(self) -> int:
        """1 logit for a binary (one-vs-rest) problem, K logits otherwise."""
        return 1 if self.binary else len(self.classes)

    def encode(self, labels: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Integer codes: 0/1 for binary, class index for multi-class, -1 for a missing label.

        A value not seen in training is an error for multi-class (the model has
        no logit for it) and for a two-class model ("Yes" against yes/no would
        silently score every row as a negative), and a negative for one-vs-rest.
        """
        labels = _plain(labels, self.trim_text)
        missing = _missing(labels, self.trim_text)
        if pa.types.is_null(labels.type):  # an all-empty CSV column: every row unlabeled
            return np.full(len(labels), UNLABELED, dtype=np.int64)
        self._check_type(labels.type)
        if self.binary:
            # Compared in numpy, never via an arrow scalar of the positive class: converting any Python
            # value to arrow imports pandas, a third of a second of a streaming command's start-up.
            if _numeric(labels.type):
                values = to_numpy(labels, fill=0)  # nulls: overwritten below
                codes = (values == self.positive).astype(np.int64)
                unseen = (
                    np.unique(values[~missing & ~codes.astype(bool) & (values != self.classes[0])])
                    if self.two_class
                    else []
                )
            else:
                encoded = labels.dictionary_encode()
                levels = encoded.dictionary.to_pylist()
                codes = np.zeros(len(labels), dtype=np.int64)
                if self.positive in levels:
                    codes = (to_numpy(encoded.indices, fill=-1) == levels.index(self.positive)).astype(np.int64)
                unseen = [v for v in levels if v and v not in self.classes] if self.two_class else []
                if not self.two_class:  # one-vs-rest: a case variant of the positive class is no negative
                    unseen = [v for v in levels if v != self.positive and v.casefold() == self.positive.casefold()]
            if len(unseen):
                shown = list(dict.fromkeys(python_value(v) for v in unseen))  # every one, so all are fixed at once
                values = ", ".join(repr(v) for v in shown[:10]) + (
                    f" and {len(shown) - 10} more" if len(shown) > 10 else ""
                )
                what = (
                    f"are neither class of the model ({self.classes})"
                    if self.two_class
                    else f"differ only in case from the positive class {self.positive!r} (they would count as "
                    "negatives)"
                )
                raise DmoError(
                    f"label value(s) {values} in column '{self.column}' {what}; fix the labels (case, spelling) "
                    "or retrain with them"
                )
        else:
            try:  # typed by the column: an unsigned class above 2**63 - 1 has no default (int64) arrow type
                known = pa.array(self.classes, type=labels.type if _numeric(labels.type) else None).cast(labels.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError) as exc:
                raise DmoError(
                    f"label column '{self.column}' holds {labels.type} values, which cannot hold the "
                    f"model's classes {self.classes[:5]}; convert the column to the training data's label type"
                ) from exc
            codes = to_numpy(pc.index_in(labels, value_set=known), fill=UNLABELED).astype(np.int64)
            unknown = (codes == UNLABELED) & ~missing
            if unknown.any():
                bad = labels[int(np.argmax(unknown))].as_py()
                raise DmoError(
                    f"label value {bad!r} in column '{self.column}' was not seen in training "
                    f"(known classes: {self.classes[:10]}); retrain with it or remove those rows"
                )
        codes[missing] = UNLABELED
        return codes

    def _check_type(self, kind: pa.DataType) -> None:
        """Refuse labels whose kind (numbers or booleans vs text) differs from the training labels': compared
        level by level they would never match, and every row would silently count as a negative."""
        known = self.positive if self.binary else self.classes[0]
        if isinstance(known, str) == _numeric(kind):
            raise DmoError(
                f"label column '{self.column}' holds {kind} values but the model was trained on "
                f"{'text' if isinstance(known, str) else 'numeric'} labels ({self.classes[:5]}); "
                "convert the column to the training data's label type"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "column": self.column,
            "classes": self.classes,
            "positive": self.positive,
            "counts": self.counts,
            "trim_text": self.trim_text,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LabelSpec":
        return cls(
            column=data["column"],
            classes=list(data["classes"]),
            positive=data.get("positive"),
            counts=list(data.get("counts", [])),
            trim_text=data.get("trim_text", False),
        )


def _as_array(labels: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(labels, pa.ChunkedArray):
        return labels.combine_chunks()
    return labels


def parse_positive(text: str, label_type: pa.DataType) -> Any:
    """Turn the --positive string into a value of the label column's type."""
    try:
        if pa.types.is_integer(label_type):
            return int(text)
        if pa.types.is_floating(label_type):
            return float(text)
        if pa.types.is_boolean(label_type):
            lowered = text.strip().lower()
            if lowered not in {"true", "false", "1", "0"}:
                raise ValueError(text)
            return lowered in {"true", "1"}
    except ValueError as exc:
        raise DmoError(
            f"--positive {text!r} is not a valid {label_type} value for the label column; give one of "
            "its classes as written in the data (e.g. 1, not 1.0, for integer labels)"
        ) from exc
    return text.strip()  # text labels are compared without surrounding whitespace (_plain)


def infer_label_spec(
    labels: pa.Array | pa.ChunkedArray,
    column: str,
    *,
    positive: str | None,
    binary: bool,
    counts: dict[Any, int] | None = None,
) -> LabelSpec:
    """Classes sorted by value; for a binary problem the positive class defaults to the minority.

    binary=False keeps all classes (multi-class solvers). binary=True with more
    than two classes needs --positive, which makes the problem one-vs-rest.
    `counts`: label_counts(labels) when the caller has them already (train counts
    the classes to choose the problem before it knows whether it is binary).
    """
    labels = _plain(labels)
    if counts is None:
        counts = _counts(labels)
    return label_spec_from_counts(
        list(counts), list(counts.values()), label_type=labels.type, column=column, positive=positive, binary=binary
    )


def _plain(labels: pa.Array | pa.ChunkedArray, trim: bool = True) -> pa.Array:
    """One contiguous array of the values' own type (dictionary-encoded labels decoded), text labels
    without surrounding whitespace: "yes" and " yes" (a CSV written as "a, yes") are one class, not two.
    trim=False: a model file written before labels were trimmed matches them as it was trained."""
    labels = _as_array(labels)
    if pa.types.is_dictionary(labels.type):
        labels = labels.cast(labels.type.value_type)
    if pa.types.is_float16(labels.type):  # arrow's hash kernels (value_counts, index_in) have no half floats
        labels = labels.cast(pa.float32())
    if pa.types.is_floating(labels.type):
        labels = _without_negative_zero(labels)
    if trim and is_text(labels.type):
        labels = pc.utf8_trim_whitespace(labels)
    return labels


def case_variant_problem(classes: list[Any], counts: list[int], column: str) -> str | None:
    """Text classes that differ only in case ("yes", "YES"): a label typed two ways. Refused, with or without
    --positive: beside --positive yes, the YES rows would silently train as negatives; without it a yes/no label
    would silently become a 4-class one. Classes meant apart (a letter "a" and "A") need names that differ in more
    than case. None when there are none."""
    groups: dict[str, list[int]] = {}
    for i, cls in enumerate(classes):
        if isinstance(cls, str):
            groups.setdefault(cls.casefold(), []).append(i)
    found = [members for members in groups.values() if len(members) > 1]
    if not found:
        return None
    named = "; ".join(" and ".join(f"{classes[i]!r} ({counts[i]} rows)" for i in members) for members in found[:5])
    more = f" and {len(found) - 5} more groups" if len(found) > 5 else ""
    return (
        f"label column '{column}' holds values that differ only in case: {named}{more}; write each class one way "
        "(e.g. lower-case the column), or give classes meant apart names that differ in more than case"
    )


STRAY_CLASS_ROWS = 2  # a class this small among many labeled rows is more likely a typo than a class


def is_missing_code(label: Any) -> bool:
    """A number spelled with nines only (-999, 9999, 99.0): the code many exports write for a missing value. Beside
    a binary label's two classes it is a code, however many rows carry it (stray_classes); among many classes it
    may be a class like any other."""
    if isinstance(label, str) and is_number(label):
        label = float(label)
    if isinstance(label, bool) or not isinstance(label, (int, float, np.integer, np.floating)):
        return False
    value = float(label)
    return value.is_integer() and abs(value) >= 99 and set(str(int(abs(value)))) == {"9"}


def stray_classes(counts: dict[Any, int]) -> list[str]:
    """Warnings for classes of at most STRAY_CLASS_ROWS rows beside larger ones, when they are what makes a problem
    multi-class: one mistyped or sentinel label ("rare", -999) silently turns a binary task into a K-class one,
    and nothing else would say so."""
    if len(counts) < 3:
        return []
    total = sum(counts.values())
    stray = [(cls, n) for cls, n in counts.items() if n <= STRAY_CLASS_ROWS]
    codes = [(cls, n) for cls, n in counts.items() if n > STRAY_CLASS_ROWS and is_missing_code(cls)]
    if codes and len(counts) - len(stray) - len(codes) == 2:  # a code of nines beside a binary label's classes
        stray += codes
    if not stray or len(counts) - len(stray) < 2:
        return []
    named = ", ".join(f"{cls!r} ({n} row{'s' if n > 1 else ''})" for cls, n in stray[:5])
    return [
        f"label class(es) {named} of {total} labeled rows make this a {len(counts)}-class problem; if they are "
        "typos or missing-value markers, fix them or blank them (then --drop-unlabeled leaves those rows out)"
    ]


def _refuse_marker_classes(classes: list[Any], counts: list[int], column: str) -> None:
    """Refuse a text label whose classes are numbers but for a symbol such as '?' or '-': the mark of a
    missing label, which would otherwise train a class of its own ("0", "1", "?": a three-class model)."""
    if not all(isinstance(c, str) for c in classes):
        return
    markers = [c for c in classes if not any(ch.isalnum() for ch in c)]
    numbers = [c for c in classes if c not in markers]
    if markers and numbers and all(is_number(c) for c in numbers):
        marker = markers[0]
        raise DmoError(
            f"label column '{column}' holds {marker!r} in {counts[classes.index(marker)]} rows beside the "
            f"number classes {numbers[:5]}; if {marker!r} marks a missing label, write an empty cell there "
            "(then --drop-unlabeled ignores those rows), else give the class a name"
        )


def _without_negative_zero(labels: pa.Array) -> pa.Array:
    """-0.0 equals 0.0, but arrow's hash kernels (value_counts, index_in) see another value: a class of its own,
    or "not seen in training". Rounding small negative scores (np.round(-0.2)) makes it."""
    values = labels.to_numpy(zero_copy_only=False)
    negative_zero = (values == 0) & np.signbit(values)
    if not negative_zero.any():
        return labels
    valid = labels.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(np.where(negative_zero, 0.0, values).astype(values.dtype), type=labels.type, mask=~valid)


def _missing(labels: pa.Array, trim: bool = True) -> np.ndarray:
    """Rows without a label, as a numpy mask (see _present)."""
    return ~to_numpy(_present(labels, trim))


def _present(labels: pa.Array, trim: bool = True) -> pa.Array:
    """Rows with a label, as an arrow mask without nulls: not null, not NaN in a float column (how
    pyarrow, polars and Spark may write a missing one), and not empty (or blank) text. The one rule both
    the encoding (_missing) and the class counts (_counts) apply."""
    present = pc.is_valid(labels)
    if pa.types.is_floating(labels.type):
        present = pc.and_kleene(present, pc.invert(pc.is_nan(labels)))
    elif trim and is_text(labels.type):
        present = pc.and_kleene(present, _not_blank(labels))
    return present


def _not_blank(text: pa.Array) -> pa.Array:
    """True where (trimmed) text is not empty. A length cast to bool, not a comparison with 0: a Python
    scalar in an arrow compute call imports pandas, a third of a second of streaming start-up."""
    return pc.cast(pc.utf8_length(text), pa.bool_())


def label_counts(labels: pa.Array | pa.ChunkedArray, column: str | None = None) -> dict[Any, int]:
    """Class value -> row count, missing labels (null, NaN, blank text) left out; batch counts add up for
    streaming passes. Labels of a type no class can be named in are refused first: some (lists, structs) cannot
    even be counted. `column`: the label column's name, for that message."""
    check_label_type(labels.type, column)
    return _counts(_plain(labels))


def _counts(labels: pa.Array) -> dict[Any, int]:
    """label_counts of labels already made _plain."""
    values = labels.filter(_present(labels))
    counts = pc.value_counts(values)
    return {python_value(v): int(c) for v, c in zip(counts.field("values"), counts.field("counts").to_pylist())}


def check_label_type(label_type: pa.DataType, column: str | None) -> None:
    """Refuse a label column of a type no class can be named in (decimal, date, binary, list, ...); `column`: its
    name, where the caller knows it."""
    if pa.types.is_dictionary(label_type):
        label_type = label_type.value_type
    if not (_numeric(label_type) or is_text(label_type) or pa.types.is_null(label_type)):
        named = "the label column" if column is None else f"label column '{column}'"
        raise DmoError(
            f"{named} holds {label_type} values; labels must be integers, booleans, floats or text: cast the "
            "column to one of those"
        )


def label_spec_from_counts(
    values: list[Any], freq: list[int], *, label_type: pa.DataType, column: str, positive: str | None, binary: bool
) -> LabelSpec:
    """infer_label_spec from per-class counts, so a streaming pass can count batch by batch."""
    check_label_type(label_type, column)
    if not values:
        raise DmoError(f"label column '{column}' has no labeled rows (every label is missing)")
    order = sorted(range(len(values)), key=lambda i: (str(type(values[i])), values[i]))
    classes = [values[i] for i in order]
    class_counts = [freq[i] for i in order]
    _refuse_marker_classes(classes, class_counts, column)
    variants = case_variant_problem(classes, class_counts, column)
    if variants:
        raise DmoError(variants)
    if len(classes) < 2 and (binary or positive is None):
        raise DmoError(
            f"label column '{column}' has only one class ({classes[0]!r}); "
            "a classifier needs at least two classes in the training data"
        )
    if not binary:
        n_labeled = sum(class_counts)
        if len(classes) > MANY_CLASSES and len(classes) > n_labeled / 2:
            raise DmoError(
                f"label column '{column}' has {len(classes)} distinct values in {n_labeled} labeled rows, a class "
                "for almost every row (a continuous target?); dmo trains classifiers: bin it into classes, or name "
                "the right column with --label-col"
            )
        return LabelSpec(column=column, classes=classes, positive=None, counts=class_counts)
    if positive is not None:
        pos_value = parse_positive(positive, label_type)
        if pos_value not in classes:
            raise DmoError(
                f"--positive {positive!r} does not occur in label column '{column}' (classes: {classes[:10]})"
            )
    else:
        if len(classes) > 2:
            raise DmoError(
                f"label column '{column}' has {len(classes)} classes; a binary problem needs "
                "--positive VALUE to choose the positive class (one-vs-rest)"
            )
        pos_value = classes[int(np.argmin(class_counts))] if class_counts[0] != class_counts[1] else classes[1]
    n_pos = class_counts[classes.index(pos_value)]
    n_total = sum(class_counts)
    if n_pos == n_total:
        raise DmoError(f"label column '{column}' has only the positive class; the training data needs negatives too")
    rest = [c for c in classes if c != pos_value]
    return LabelSpec(
        column=column,
        classes=[rest[0] if len(rest) == 1 else f"not {pos_value}", pos_value],
        positive=pos_value,
        counts=[n_total - n_pos, n_pos],
    )
