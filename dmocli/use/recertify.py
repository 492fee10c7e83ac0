"""What becomes of a model's `--confidence` certificate when `dmo threshold` moves its operating point (issue 46:
certificates stay true through every step). The certificate was about the old threshold, so a new one keeps it
only by being certified again: at the confidence asked (--confidence), else at the one MODEL stores, the default,
so that a certified model stays certified or the run ends with exit 3 and the ways out. `--no-confidence` (or a
problem with no bound to certify, ofbs) drops it instead, and the new file's info says so (`dropped_confidence`),
as the report and the summary do: `dmo info` never shows a certificate the file no longer has, nor hides one it
lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dmocli.errors import UnreachableTarget, option_hint
from dmocli.models.decision import Certificate

DROPPED = "dropped_confidence"  # the model file's info key and the report's: the level of the certificate dropped


@dataclass(frozen=True, kw_only=True)
class Recertified:
    """The confidence the new threshold is certified at (None: none), whether it is MODEL's own (not asked for),
    and the level of MODEL's certificate this run drops (None: none dropped)."""

    confidence: float | None
    inherited: bool
    dropped: float | None


def recertified(
    certificate: Certificate, confidence: float | None, *, no_confidence: bool, bounded: bool
) -> Recertified:
    """The certificate a re-threshold asks for: `confidence` as given; else MODEL's own, unless `no_confidence` or
    the problem searched has no bound (`bounded` False: ofbs), where MODEL's is dropped."""
    if confidence is not None:
        return Recertified(confidence=confidence, inherited=False, dropped=None)
    stored = certificate.confidence
    if stored is None:
        return Recertified(confidence=None, inherited=False, dropped=None)
    if no_confidence or not bounded:
        return Recertified(confidence=None, inherited=False, dropped=stored)
    return Recertified(confidence=stored, inherited=True, dropped=None)


def noted(info: Mapping[str, Any], dropped: float | None) -> dict[str, Any]:
    """The new file's info with the note of a dropped certificate (this run's; an earlier run's note goes, as the
    certificate it spoke of is no longer the file's)."""
    kept = {key: value for key, value in info.items() if key != DROPPED}
    return kept if dropped is None else {**kept, DROPPED: dropped}


def report_fields(recertify: Recertified) -> dict[str, Any]:
    """The threshold report's `dropped_confidence`, present only where a certificate was dropped."""
    return {} if recertify.dropped is None else {DROPPED: recertify.dropped}


def with_way_out(refusal: UnreachableTarget | None, recertify: Recertified) -> UnreachableTarget | None:
    """A refusal (exit 3) of a certificate MODEL's confidence asked for, not the user: it names the other way out,
    dropping the certificate."""
    if refusal is None or not recertify.inherited:
        return refusal
    drop = option_hint("--no-confidence", "no_confidence=True")
    return UnreachableTarget(
        f"{refusal}; the confidence {recertify.confidence:g} is MODEL's own certificate: pass {drop} to move the "
        "threshold without one (dmo info then says it was dropped)",
        refusal.best_achievable,
    )
