"""The full-sweep fingerprint: every level and control of every knob at seeds 0-59, byte for byte.

Each pinned bundle is serialised as `generate --json` prints it, with the hash fields (task id,
engine, vocabulary and generator hashes, the N12 pin that holds them) masked, so a source-byte
move of the generator hash leaves it alone while any change to task content or to the pin
ledger's verdicts fails it, naming the arm or contrast. Rewrite the golden file only for a
deliberate content change: `python scripts/update_golden.py --sweep-fingerprint`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from poisson_tasks import golden
from poisson_tasks.arms import ArmSpec, all_arms, arm_id
from poisson_tasks.bundle import TaskBundle, digest
from poisson_tasks.generator import assemble, generate
from poisson_tasks.generator.assemble import BUILDERS
from poisson_tasks.generator.draft import Draft
from poisson_tasks.generator.scenario import Scenario
from poisson_tasks.golden import SweepFingerprint, fingerprint_differences, sweep_fingerprint
from poisson_tasks.pins import PinReport
from poisson_tasks.verifier import EpisodeVerdict, verify

STORED = Path(__file__).parent / "golden" / "sweep_fingerprint.json"
_UNHASHED = ("task_id", "pins")
_FIX = "python scripts/update_golden.py --sweep-fingerprint, only if the change is deliberate"


def _stored() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(STORED.read_text(encoding="utf-8"))
    return doc


def _stored_part(now: SweepFingerprint) -> dict[str, Any]:
    """The stored fingerprint cut down to the arms and contrasts of a partial sweep."""
    doc = _stored()
    return {
        "seeds": doc["seeds"],
        "arms": {k: doc["arms"][k] for k in now.arms},
        "verdicts": {k: doc["verdicts"][k] for k in now.verdicts},
        "contrasts": {k: doc["contrasts"][k] for k in now.contrasts},
    }


def test_the_full_sweep_is_byte_identical() -> None:
    now = sweep_fingerprint()
    stored = _stored()
    assert len(now.arms) == sum(len(all_arms(k)) for k in BUILDERS) == 45
    assert len(BUILDERS) == 9
    changed = fingerprint_differences(now, stored)
    assert not changed, "the sweep's content changed:\n" + "\n".join(changed) + "\n" + _FIX
    assert now.sweep == stored["sweep"], _FIX


def _one_byte_off(target: str, seed: int) -> Callable[..., TaskBundle]:
    """seal(), except one byte of one task's system prompt differs."""
    real = assemble.seal

    def seal(spec: ArmSpec, sc: Scenario, draft: Draft, *, controls: bool = True) -> TaskBundle:
        bundle = real(spec, sc, draft, controls=controls)
        if arm_id(spec) != target or sc.seed != seed:
            return bundle
        text = bundle.system_prompt
        changed = text[:-1] + ("!" if text[-1] != "!" else "?")
        assert len(changed.encode()) == len(text.encode())
        return bundle.model_copy(update={"system_prompt": changed})

    return seal


def test_one_byte_of_one_task_fails_it_naming_the_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator that moves one byte of depth:d3 at seed 17 is caught, and only that arm named."""
    monkeypatch.setattr(assemble, "seal", _one_byte_off("depth:d3", 17))
    now = sweep_fingerprint(knobs=("depth",))
    changed = fingerprint_differences(now, _stored_part(now))
    arms_named = [line.split(":", 2)[:2] for line in changed if line.startswith("arm ")]
    assert arms_named == [["arm depth", "d3"]]
    # A system prompt is not judged, so the verdicts stand; a changed observation would move them.
    assert not [line for line in changed if line.startswith("verdict ")]


def test_a_changed_verdict_fails_it_naming_the_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    real = golden.verify

    def verify_one_off(bundle: TaskBundle, *args: Any, **kwargs: Any) -> EpisodeVerdict:
        verdict = real(bundle, *args, **kwargs)
        if bundle.arm_id != "spread:p2" or bundle.seed != 3 or verdict.outcome != "passed":
            return verdict
        return verdict.model_copy(update={"calls": verdict.calls + 1})

    monkeypatch.setattr(golden, "verify", verify_one_off)
    now = sweep_fingerprint(knobs=("spread",))
    assert fingerprint_differences(now, _stored_part(now)) == [
        f"verdict spread:p2: now {now.verdicts['spread:p2'][:12]}, "
        f"stored {_stored()['verdicts']['spread:p2'][:12]}"
    ]


def test_a_changed_pin_verdict_fails_it_naming_the_contrast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = golden.check_pins

    def check_pins(bundles: dict[str, TaskBundle], **kwargs: Any) -> PinReport:
        report = real(bundles, **kwargs)
        if report.seed != 31:
            return report
        first = report.rows[0]
        flipped = "violated" if first.verdict != "violated" else "held"
        rows = [first.model_copy(update={"verdict": flipped}), *report.rows[1:]]
        return report.model_copy(update={"rows": rows})

    monkeypatch.setattr(golden, "check_pins", check_pins)
    now = sweep_fingerprint(knobs=("spread",))
    changed = fingerprint_differences(now, _stored_part(now))
    assert [line.split(":")[0] for line in changed] == ["contrast spread|eval|strict"]


def test_a_hash_left_in_a_field_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Masking is checked: a field that carries a hash the mask missed stops the fingerprint."""
    real = assemble.seal

    def seal(spec: ArmSpec, sc: Scenario, draft: Draft, *, controls: bool = True) -> TaskBundle:
        bundle = real(spec, sc, draft, controls=controls)
        return bundle.model_copy(update={"system_filler": bundle.generator_hash})

    monkeypatch.setattr(assemble, "seal", seal)
    with pytest.raises(AssertionError, match="is not masked"):
        sweep_fingerprint(knobs=("spread",), seeds=1)


def test_task_id_is_the_digest_of_the_bundles_fields() -> None:
    """seal() digests plain forms of the fields; they must give the model-walking digest's bytes.

    With controls=False the bundle has no negative controls, yet the same task id.
    """
    for knob in BUILDERS:
        for spec in all_arms(knob):
            for seed in (0, 7, 199):
                bundle = generate(spec, seed)
                fields = {
                    k: getattr(bundle, k) for k in TaskBundle.model_fields if k not in _UNHASHED
                }
                assert bundle.task_id == digest(fields), (spec.id, seed)
                lean = generate(spec, seed, controls=False)
                assert lean.negative_controls == {} and lean.task_id == bundle.task_id
                assert lean.model_copy(update={"negative_controls": {}}) == lean
                full = lean.model_copy(update={"negative_controls": bundle.negative_controls})
                assert full.canonical() == bundle.canonical()


def test_assembled_is_model_construct() -> None:
    bundle = generate("depth:d3", 5)
    verdict = verify(bundle, [[c] for c in bundle.reference_calls], True, False)
    controls = bundle.negative_controls
    made_calls = [controls[k].turns[0][0] for k in controls if k.startswith("malformed_call")]
    for made in (bundle, verdict, *controls.values(), *made_calls):
        values = {k: getattr(made, k) for k in type(made).model_fields}
        again = type(made).model_construct(**values)
        assert again == made
        assert list(again.__dict__) == list(made.__dict__)
        assert again.model_fields_set == made.model_fields_set
        assert repr(again) == repr(made)
