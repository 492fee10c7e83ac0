"""Which augmented views to write (`--views weak:1,strong:2`) and their column names; no Pillow needed."""

from __future__ import annotations

from dataclasses import dataclass

from dmocli.errors import DmoError

POLICIES = ("weak", "strong")


@dataclass(frozen=True)
class View:
    """One extra feature column: policy and index, e.g. strong #1 -> column features_strong_1."""

    policy: str
    index: int

    @property
    def column(self) -> str:
        return f"features_{self.policy}_{self.index}"


def parse_views(spec: str | None) -> list[View]:
    """'weak:1,strong:2' -> [weak 0, strong 0, strong 1]."""
    if not spec:
        return []
    views = []
    for part in spec.split(","):
        name, _, count = part.strip().partition(":")
        name = name.strip().lower()
        if name not in POLICIES:
            raise DmoError(
                f"--views: unknown policy {name!r} in {spec!r} (use weak and/or strong, e.g. weak:1,strong:2)"
            )
        try:
            n = int(count) if count else 1
        except ValueError:
            raise DmoError(f"--views: count {count!r} of {name} is not an integer (e.g. weak:1,strong:2)") from None
        if n < 0 or n > 16:
            raise DmoError(f"--views: count of {name} must be between 0 and 16, got {n}")
        if any(v.policy == name for v in views):
            raise DmoError(f"--views names {name} twice in {spec!r}")
        views += [View(name, i) for i in range(n)]
    return views
