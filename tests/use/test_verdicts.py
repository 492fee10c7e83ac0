"""The verdicts of dmocli/use/verdicts.py on typed values: the rate's drift against the training or the adapted rate,
a trend feature never a reason, and a failed gate's message giving each kind of reason's advice."""

from __future__ import annotations

from dmocli.shift.drift_stats import FeatureDrift
from dmocli.use.verdicts import (
    MOVE_THRESHOLD,
    RETRAIN_ON_NEW,
    Reason,
    ReferenceRate,
    drift_reasons,
    gate_message,
    rate_drift,
)

TRAINING = ReferenceRate(source="training", rate=0.2, interval=[0.18, 0.22])


def _drift(name: str, psi: float, p_value: float) -> FeatureDrift:
    return FeatureDrift(name, "numeric", psi, p_value, 1000, 1000, 0.0, 0.0)


def test_a_halved_rate_drifts_from_the_training_rate_and_not_from_the_rate_it_was_adapted_to():
    assert rate_drift(0.1, [0.08, 0.12], TRAINING)[0].startswith("the positive rate moved from 0.2000 (training)")
    adapted = ReferenceRate(source="adapted", rate=0.1, interval=None)
    assert rate_drift(0.1, [0.08, 0.12], adapted) == []
    moved_again = rate_drift(0.2, [0.18, 0.22], adapted)[0]
    assert "from 0.1000 (adapted)" in moved_again and "the threshold was adapted to 0.1000" in moved_again
    # the interval adapt kept counts as the training rate's does: a move inside it is not sure
    assert rate_drift(0.13, [0.125, 0.135], ReferenceRate(source="adapted", rate=0.1, interval=[0.07, 0.13])) == []


def test_a_trend_feature_is_never_a_drift_reason():
    drifts = [_drift("created_at.days_since", 11.3, 0.0), _drift("amount", 0.6, 0.0), _drift("f1", 0.01, 0.5)]
    assert [reason.split("'")[1] for reason in drift_reasons(drifts)] == ["created_at.days_since", "amount"]
    assert [reason.split("'")[1] for reason in drift_reasons(drifts, {"created_at.days_since"})] == ["amount"]


def test_the_message_gives_every_kind_of_reasons_advice_once():
    rate = Reason("rate", "the positive rate moved", "all rows")
    target = Reason("target", "estimated precision is below the target", "all rows")
    feature = Reason("feature", "numeric 'f0' drifted", "chunk 2")
    assert gate_message([target, rate]) == (
        f"gate failed: all rows: estimated precision is below the target (and 1 more reason(s) in the report); "
        f"{MOVE_THRESHOLD}"
    )
    both = gate_message([rate, feature])
    assert both.endswith(f"; {MOVE_THRESHOLD}; {RETRAIN_ON_NEW}") and both.count("dmo threshold") == 1
    assert gate_message([feature]) == f"gate failed: chunk 2: numeric 'f0' drifted; {RETRAIN_ON_NEW}"
    own = Reason("threshold", "the threshold is above every score ...; re-target on labeled DATA")
    assert gate_message([own]) == "gate failed: the threshold is above every score ...; re-target on labeled DATA"
