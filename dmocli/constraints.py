"""What values an option admits, as objects: one validator gives every refusal its message, and every
declaration can generate the values it must refuse, for the tests.

Flat `min`/`max`/`below` keys could not say "strictly between 0 and 1", "0, or at least 2, or auto", or "a whole
number of rows or inf", so each such option grew its own check. A constraint here says it once (the idea of
scikit-learn's `sklearn/utils/_param_validation.py`): `Interval` (open or closed at each end), `OneOf` (named
choices or special values), `AnyOf` (a union: any member admits), `AllOf` (every member admits), `Except`
(a value refused for a stated reason) and `Matches` (text of a pattern: `--every 7d`). `failure` is the one
validator; `invalid_values` lists values that fail.

A rule between options is an object too, listed once in a declaration's `RULES`: `Requires` (`--new-rows` needs
`--confidence`), `Exclusive` (`--adapt` or `--prior`, not both) and `When` (a rule that holds only where another
option is given, or is not). A rule reads a declaration's values by field name; an option is given when it is not
None. `Rule.failing` lists the combinations that break a rule, as `invalid_values` lists the values that break a
constraint, so the tests run each through every command that declares it.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CLOSED = ("both", "left", "right", "neither")
# The largest whole number an option admits where its declaration names no upper bound: what numpy's int64 (and
# torch's) hold, so a count, size or seed past it is refused in one line rather than overflowing where it is used
# (`--chunk-size 9223372036854775808` was an OverflowError, exit 1).
INT_MAX = 2**63 - 1


def choice_list(choices: Any) -> str:
    """`a, b or c`: how messages list the allowed values."""
    shown = [str(choice) for choice in choices]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _number(value: float) -> str:
    """A bound as messages write it: `1`, not `1.0`; `0.5`; `1e-06`."""
    return f"{value:g}" if isinstance(value, float) else str(value)


class Constraint:
    """What one option admits. `takes` says whether the value is of the kind this constraint is about (a number
    for an interval, a name for a choice), which a union uses to pick the member whose message fits."""

    def admits(self, value: Any) -> bool:
        raise NotImplementedError

    def takes(self, value: Any) -> bool:
        raise NotImplementedError

    def reason(self, value: Any) -> str:
        """Why `value` is refused, as the words after its label (`must be at least 1`)."""
        raise NotImplementedError

    def invalid(self) -> list[Any]:
        """Values this constraint refuses: just outside each closed end, at each open end, of a wrong kind."""
        raise NotImplementedError

    def example(self) -> Any:
        """A value this constraint admits (None: none found), for the combinations a rule generates: a rule
        between options is tested with each option it names given a value its own constraint admits, so the
        rule alone is what refuses."""
        return next((value for value in self.candidates() if self.admits(value)), None)

    def candidates(self) -> list[Any]:
        """Values `example` tries, in order."""
        raise NotImplementedError


@dataclass(frozen=True)
class Interval(Constraint):
    """Numbers of `kind` (int: whole numbers only; float: any finite real) from `low` to `high` (None: no
    bound; for int, INT_MAX), each end closed or open as `closed` says. `message` replaces the generated reason
    where a declaration says it better (`is outside (0, 1); give a value such as 0.8`); a whole number past
    INT_MAX always gets its own reason, as no declared message is about it."""

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"
    message: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in (int, float) or self.closed not in CLOSED:
            raise ValueError(f"Interval({self.kind!r}, closed={self.closed!r}): kind int|float, closed one of {CLOSED}")

    def takes(self, value: Any) -> bool:
        return isinstance(value, numbers.Integral if self.kind is int else numbers.Real) and not isinstance(value, bool)

    def admits(self, value: Any) -> bool:
        if not self.takes(value) or not math.isfinite(value) or self._too_large(value):
            return False
        low_closed, high_closed = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and not (value >= self.low if low_closed else value > self.low):
            return False
        return self.high is None or (value <= self.high if high_closed else value < self.high)

    def candidates(self) -> list[Any]:
        ends = [end for end in (self.low, self.high) if end is not None]
        middle = [(self.low + self.high) / 2] if len(ends) == 2 else []
        values = [*ends, *middle, *(end + step for end in ends for step in (1, -1)), 1, 0]
        return [int(value) if self.kind is int else float(value) for value in values]

    def _too_large(self, value: Any) -> bool:
        """A whole number past INT_MAX where no declared upper bound refuses it already."""
        return self.kind is int and self.high is None and value > INT_MAX

    def reason(self, value: Any) -> str:
        if self.takes(value) and self._too_large(value):
            return f"is too large: give a whole number of at most {INT_MAX}"
        if self.message is not None:
            return self.message
        if not self.takes(value):
            return f"must be {'a whole number' if self.kind is int else 'a number'}"
        if not math.isfinite(value):
            return "must be a finite number"
        low_closed, high_closed = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and self.high is not None and not (low_closed and high_closed):
            left, right = "[" if low_closed else "(", "]" if high_closed else ")"
            return f"must be in {left}{_number(self.low)}, {_number(self.high)}{right}"
        if self.low is not None and (value < self.low or (value == self.low and not low_closed)):
            if low_closed:
                return f"must be at least {_number(self.low)}"
            return "must be positive" if self.low == 0 else f"must be above {_number(self.low)}"
        return f"must be at most {_number(self.high)}" if high_closed else f"must be below {_number(self.high)}"

    def invalid(self) -> list[Any]:
        values: list[Any] = ["x"]
        if self.kind is int:
            values.append(1.5)
            if self.low is not None:
                values.append(self.low - 1 if self.closed in ("both", "left") else self.low)
            if self.high is not None:
                values.append(self.high + 1 if self.closed in ("both", "right") else self.high)
            else:
                values.append(INT_MAX + 1)
        else:
            values += [math.nan, math.inf]
            if self.low is not None:
                values.append(math.nextafter(self.low, -math.inf) if self.closed in ("both", "left") else self.low)
            if self.high is not None:
                values.append(math.nextafter(self.high, math.inf) if self.closed in ("both", "right") else self.high)
        return values


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of `values`: named choices (`linear`, `mlp`) or special values a union adds (`auto`, 0, inf)."""

    values: tuple[Any, ...]

    def takes(self, value: Any) -> bool:
        """False: a value outside a union's choices (`--cv many`) is told the whole union, not `use auto`."""
        return False

    def admits(self, value: Any) -> bool:
        try:
            return value in self.values
        except TypeError:  # an unhashable or incomparable value is no choice
            return False

    def reason(self, value: Any) -> str:
        return f"is not known (use {choice_list(self.values)})"

    def candidates(self) -> list[Any]:
        return list(self.values)

    def invalid(self) -> list[Any]:
        names = [choice for choice in self.values if isinstance(choice, str)]
        return ["not-" + names[0]] if names else ["x"]


@dataclass(frozen=True)
class Except(Constraint):
    """Any value but `values`, refused for the reason `why` (`--cv 1` leaves no fold to hold out)."""

    values: tuple[Any, ...]
    why: str

    def takes(self, value: Any) -> bool:
        return True

    def admits(self, value: Any) -> bool:
        return value not in self.values

    def reason(self, value: Any) -> str:
        return self.why

    def candidates(self) -> list[Any]:
        return []  # it admits everything but a few values, and names none: the members of its AllOf do

    def invalid(self) -> list[Any]:
        return list(self.values)


@dataclass(frozen=True)
class Matches(Constraint):
    """Text that matches `pattern` whole, ignoring case and surrounding spaces (`--every 7d`); `examples` are values
    it admits, `refused` some it does not, and `message` says what to give."""

    pattern: str
    message: str
    examples: tuple[str, ...]
    refused: tuple[str, ...]

    def takes(self, value: Any) -> bool:
        return isinstance(value, str)

    def admits(self, value: Any) -> bool:
        return isinstance(value, str) and re.fullmatch(self.pattern, value.strip().lower()) is not None

    def reason(self, value: Any) -> str:
        return self.message

    def candidates(self) -> list[Any]:
        return list(self.examples)

    def invalid(self) -> list[Any]:
        return list(self.refused)


@dataclass(frozen=True)
class AllOf(Constraint):
    """Every member admits: an interval with a hole, say. The first member that refuses gives the reason."""

    members: tuple[Constraint, ...]

    def takes(self, value: Any) -> bool:
        return all(member.takes(value) for member in self.members)

    def admits(self, value: Any) -> bool:
        return all(member.admits(value) for member in self.members)

    def reason(self, value: Any) -> str:
        """The first refusing member's reason, a declared bound's before INT_MAX's (`--new-rows` names its own
        most, 1,000,000,000, not int64's)."""
        refusing = [member for member in self.members if not member.admits(value)]
        declared = [m for m in refusing if not (isinstance(m, Interval) and m.takes(value) and m._too_large(value))]
        return (declared or refusing)[0].reason(value)

    def invalid(self) -> list[Any]:
        return [value for member in self.members for value in member.invalid() if not self.admits(value)]

    def candidates(self) -> list[Any]:
        return [value for member in self.members for value in member.candidates()]


@dataclass(frozen=True)
class AnyOf(Constraint):
    """A union: any member admits. A refused value gets the reason of the one member of its kind (`--cv -1 must
    be at least 0`), or, when none or several are, `must be DESCRIPTION` (`a number of folds K >= 2, 0 for
    none, or auto`)."""

    members: tuple[Constraint, ...]
    description: str

    def takes(self, value: Any) -> bool:
        return any(member.takes(value) for member in self.members)

    def admits(self, value: Any) -> bool:
        return any(member.admits(value) for member in self.members)

    def reason(self, value: Any) -> str:
        of_its_kind = [member for member in self.members if member.takes(value)]
        if len(of_its_kind) == 1:
            return of_its_kind[0].reason(value)
        return f"must be {self.description}"

    def invalid(self) -> list[Any]:
        return [value for member in self.members for value in member.invalid() if not self.admits(value)]

    def candidates(self) -> list[Any]:
        return [value for member in self.members for value in member.candidates()]


def failure(label: str, value: Any, constraint: Constraint | None) -> str | None:
    """The one validator: why `value` breaks `constraint`, as one message naming `label` (the flag and value as
    the user wrote them, `--width 0`), or None when it is admitted. None is always admitted (the option left
    out); a float that is not finite, and a whole number past INT_MAX (which no count, size, seed or library
    parameter takes: `--param max-depth=9223372036854775808` reached XGBoost), are refused even where nothing
    else is declared."""
    if value is None:
        return None
    if constraint is not None and not constraint.admits(value):
        return f"{label} {constraint.reason(value)}"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > INT_MAX:
        return f"{label} is too large: give a whole number of at most {INT_MAX}"
    if constraint is None and isinstance(value, float) and not math.isfinite(value):
        return f"{label} must be a finite number"
    return None


def invalid_values(constraint: Constraint) -> list[Any]:
    """Values `constraint` refuses, for tests: just outside each closed end, at each open end, a wrong kind, a
    name not among the choices (tests/cli/test_option_constraints.py checks that `admits` refuses every one)."""
    return list(dict.fromkeys(constraint.invalid()))


def any_given(values: Mapping[str, Any], names: tuple[str, ...]) -> bool:
    """Whether any option of `names` was given: every option a rule names defaults to None, its value when left
    out (and a combination a rule generates names only the options it is about)."""
    return any(values.get(name) is not None for name in names)


class Rule:
    """A rule between options of one declaration, read by field name. `broken` says whether filled values break
    it, `reason` says why in one message (`label` spells a field as the user does, `--new-rows`), and `failing`
    lists the combinations that break it, each option in it given `example(name)`, a value its own constraint
    admits, or left out (None)."""

    def broken(self, values: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def reason(self, values: Mapping[str, Any], label: Callable[[str], str]) -> str:
        raise NotImplementedError

    def failing(self, example: Callable[[str], Any]) -> list[dict[str, Any]]:
        raise NotImplementedError


@dataclass(frozen=True)
class Requires(Rule):
    """Any of `fields` given needs `needs` given too (`--new-rows` names the sample `--confidence` is about).
    `{given}` in `message` names the fields given, `--target and --beta`."""

    fields: tuple[str, ...]
    needs: str
    message: str

    def broken(self, values: Mapping[str, Any]) -> bool:
        return any_given(values, self.fields) and not any_given(values, (self.needs,))

    def reason(self, values: Mapping[str, Any], label: Callable[[str], str]) -> str:
        named = " and ".join(label(name) for name in self.fields if any_given(values, (name,)))
        return self.message.replace("{given}", named)

    def failing(self, example: Callable[[str], Any]) -> list[dict[str, Any]]:
        return [{name: example(name), self.needs: None} for name in self.fields]


@dataclass(frozen=True)
class Exclusive(Rule):
    """No field of `first` given together with one of `second` (`--adapt` and `--prior`: one rate, not two)."""

    first: tuple[str, ...]
    second: tuple[str, ...]
    message: str

    def broken(self, values: Mapping[str, Any]) -> bool:
        return any_given(values, self.first) and any_given(values, self.second)

    def reason(self, values: Mapping[str, Any], label: Callable[[str], str]) -> str:
        return self.message

    def failing(self, example: Callable[[str], Any]) -> list[dict[str, Any]]:
        return [{one: example(one), other: example(other)} for one in self.first for other in self.second]


@dataclass(frozen=True)
class When(Rule):
    """`rule` where any of `fields` is given (or, with `given=False`, where none is): `dmo threshold --new-rows`
    needs `--confidence` under `--adapt`, while a re-fit may take the confidence MODEL stores."""

    fields: tuple[str, ...]
    rule: Rule
    given: bool = True

    def broken(self, values: Mapping[str, Any]) -> bool:
        return any_given(values, self.fields) == self.given and self.rule.broken(values)

    def reason(self, values: Mapping[str, Any], label: Callable[[str], str]) -> str:
        return self.rule.reason(values, label)

    def failing(self, example: Callable[[str], Any]) -> list[dict[str, Any]]:
        combinations = []
        for combination in self.rule.failing(example):
            if self.given:
                combinations += [{**combination, name: example(name)} for name in self.fields]
            else:
                combinations.append({**combination, **dict.fromkeys(self.fields)})
        return combinations


@dataclass(frozen=True)
class Given(Rule):
    """Any of `fields` given at all: what `Chosen` refuses where another option's value has no use for them."""

    fields: tuple[str, ...]
    message: str

    def broken(self, values: Mapping[str, Any]) -> bool:
        return any_given(values, self.fields)

    def reason(self, values: Mapping[str, Any], label: Callable[[str], str]) -> str:
        return self.message

    def failing(self, example: Callable[[str], Any]) -> list[dict[str, Any]]:
        return [{name: example(name)} for name in self.fields]


@dataclass(frozen=True)
class Chosen(Rule):
    """`rule` where the option `field` is one of `choices` (or, with `chosen=False`, where it is not): `--problem
    value` needs `--gain`, which no other problem takes."""

    field: str
    choices: tuple[Any, ...]
    rule: Rule
    chosen: bool = True

    def broken(self, values: Mapping[str, Any]) -> bool:
        return (values.get(self.field) in self.choices) == self.chosen and self.rule.broken(values)

    def reason(self, values: Mapping[str, Any], label: Callable[[str], str]) -> str:
        return self.rule.reason(values, label)

    def failing(self, example: Callable[[str], Any]) -> list[dict[str, Any]]:
        value = self.choices[0] if self.chosen else None
        return [{**combination, self.field: value} for combination in self.rule.failing(example)]


def from_flat_keys(declared: Any) -> Constraint | None:
    """The constraint that flat `choices`/`min`/`max`/`below`/`positive` metadata keys (solver `--param`
    fields) declare, so they go through the same validator; None where they declare nothing."""
    if declared.get("constraint") is not None:
        return declared["constraint"]
    if declared.get("choices") is not None:
        return OneOf(tuple(declared["choices"]))
    low = 0 if declared.get("positive") else declared.get("min")
    high = declared.get("below", declared.get("max"))
    if low is None and high is None:
        return None
    closed_low = not declared.get("positive") and low is not None
    closed_high = "below" not in declared and high is not None
    closed = {(True, True): "both", (True, False): "left", (False, True): "right", (False, False): "neither"}
    return Interval(float, low, high, closed[closed_low, closed_high])
