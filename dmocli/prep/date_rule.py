"""How `--dates parts` turns one date column into numeric parts, as fitted on the training rows and stored in the
model file: the order of day and month in numeric text, whether it holds times of day, the reference day of
`days_since`, the parts kept, and the parts dropped because every training row had the same value.

A part with one value in training (`month` when the training rows are all January) teaches a model nothing, and
takes another value as soon as a later month arrives: it is dropped, with one warning naming it. The trend parts
(dates.TREND_PARTS: `year`, `days_since`) take values no later period matches; they are made only under
`--dates parts,trend`, and a rule names them (`trends`) so what reads the model can expect them to drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dmocli.prep import dates
from dmocli.prep.columns import is_string


@dataclass
class DateRule:
    """One date column's reading and parts. `parts` None: a model file written before parts were chosen, which
    made every part (dates.asked_parts with trend) and is read the same way still. `constant`: the parts left out,
    each with its one training value (for the warning, and for `dmo check`'s report)."""

    column: str
    order: str | None
    with_time: bool
    reference: str
    parts: tuple[str, ...] | None = None
    constant: dict[str, float] = field(default_factory=dict)

    @property
    def kept(self) -> tuple[str, ...]:
        """The parts the column becomes, in dates.PARTS order."""
        return self.parts if self.parts is not None else dates.asked_parts(with_time=self.with_time, trend=True)

    @property
    def outputs(self) -> list[str]:
        return [f"{self.column}.{part}" for part in self.kept]

    @property
    def trends(self) -> list[str]:
        """The outputs that move with time itself (dates.TREND_PARTS): drift expected of them, not a change."""
        return [f"{self.column}.{part}" for part in self.kept if part in dates.TREND_PARTS]

    def warning(self) -> str | None:
        """The one warning naming the parts dropped as constant, with their values and what would make them vary."""
        if not self.constant:
            return None
        names = [f"{self.column}.{part}" for part in self.constant]
        values = ", ".join(f"{value:g}" for value in self.constant.values())
        # days_since varies as soon as any other part does: its own span is named only when it is alone
        spans = [dates.SPANS[part] for part in self.constant if part != "days_since"] or [dates.SPANS["days_since"]]
        one = len(names) == 1
        return (
            f"{_listed(names)} {'is' if one else 'are'} the same in every training row ({values}): dropped; train on "
            f"rows spanning more than one {_listed(spans)} to use {'it' if one else 'them'}"
        )

    def values(self, column: pa.Array) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The parts of each row of a (dictionary-decoded) column, and the rows holding a value that is no date as
        this rule reads them."""
        if is_string(column.type):
            text = dates.read_text(column)
            micros, ok = dates.instants(text, self.order)
            bad = text.present & ~ok
        else:
            micros, ok = dates.typed_instants(column)
            bad = np.zeros(len(column), dtype=bool)
        found = dates.parts(micros, ok, with_time=self.with_time, reference_day=dates.day_number(self.reference))
        return {f"{self.column}.{part}": found[part] for part in self.kept}, bad

    def to_dict(self) -> dict[str, Any]:
        """The rule as stored: its parts always (a file without them is one written before they were chosen)."""
        stored = {"column": self.column, "order": self.order, "with_time": self.with_time, "reference": self.reference}
        return {**stored, "parts": list(self.kept), "constant": self.constant}

    @classmethod
    def from_dict(cls, item: Any) -> "DateRule":
        """A stored rule, every value checked (a ValueError names the malformed one): its parts known ones, each
        once, in dates.PARTS order (hour and minute only with times of day); its constant parts others, each with a
        finite value."""
        if item["order"] not in (*dates.ORDERS, None) or not isinstance(item["with_time"], bool):
            raise ValueError(f"preprocessing.derive has a malformed date rule: {item!r}")
        dates.day_number(item["reference"])  # raises on anything but an ISO date
        parts, constant = item.get("parts"), item.get("constant", {})
        possible = dates.asked_parts(with_time=item["with_time"], trend=True)
        if parts is not None and (not isinstance(parts, list) or parts != [p for p in possible if p in parts]):
            raise ValueError(f"preprocessing.derive has a date rule with malformed parts: {item!r}")
        if not isinstance(constant, dict) or not all(
            part in possible and part not in (parts or ()) and _finite(value) for part, value in constant.items()
        ):
            raise ValueError(f"preprocessing.derive has a date rule with malformed constant parts: {item!r}")
        kept = None if parts is None else tuple(parts)
        return cls(str(item["column"]), item["order"], item["with_time"], item["reference"], kept, dict(constant))


def _finite(value: Any) -> bool:
    """A plain finite number (not a bool, NaN, an infinity or an integer past any date's part)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300


def _listed(names: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
