"""The minimal-pairs chapter's claims (:mod:`helpers.minimal_pairs.claims`) on constructed group summaries, on both
sides of each rule: every verdict the convention allows, and every reason a claim is not applicable; each row checked
against its fields (:func:`helpers.claims.check_row`)."""
from __future__ import annotations

import pytest

from helpers.claims import check_row
from helpers.minimal_pairs.claims import CLAIMS, RELATIVE_DROP, claims, group_claim

BASE = 2.0                     # the full model's mean margin on the targets (nats)
LEVEL = -RELATIVE_DROP * BASE  # -0.2: the level each part is judged against


def est(value, lo, hi, n=40) -> dict:
    return {"value": value, "interval": [lo, hi], "n": n}


def entry(same=(-0.3, -0.5, -0.1), others=(-0.3, -0.5, -0.1), off=(-0.3, -0.5, -0.1), base=BASE) -> dict:
    """A group's summary whose three differences are ``(value, lo, hi)``."""
    return {"heads": ["24-7"], "targets": ["determiner_noun_agreement"], "relations": ["det"], "missing": None,
            "base_margin": est(base, base - 0.5, base + 0.5), "removed": est(-0.35, -0.5, -0.2),
            "same_layer": {"difference": est(*same)}, "others": {"difference": est(*others)},
            "off_target": {"difference": est(*off)}}


@pytest.mark.parametrize("parts, verdict", [
    ({}, "reproduced"),                                                  # every interval below 0, estimate <= -0.2
    ({"same": (-0.1, -0.15, -0.05)}, "partly"),                           # below 0 but short of the level
    ({"others": (-0.1, -0.3, 0.05)}, "inconclusive"),                     # holds 0 and reaches -0.2
    ({"off": (0.05, -0.1, 0.2)}, "not reproduced"),                       # holds 0, cannot reach -0.2
    ({"same": (0.3, 0.1, 0.5)}, "not reproduced"),                        # the other way: the head hurts less
    ({"same": (-0.1, -0.15, -0.05), "others": (-0.1, -0.3, 0.05)}, "inconclusive"),
])
def test_verdicts_follow_the_rules(parts, verdict):
    row = group_claim("det", entry(**parts))
    assert row.verdict == verdict
    data = row.to_json()
    check_row(data)
    assert data["rule"] == "combined" and data["resampled"] == "pairs" and data["n"] == 40
    assert [p["paper_level"] for p in data["part_rows"]] == [pytest.approx(LEVEL)] * 3
    assert [p["null"] for p in data["part_rows"]] == [0.0] * 3
    assert data["value"] == entry(**parts)["same_layer"]["difference"]["value"]
    assert "24-7 removed" in data["ours"] and "(level -0.20)" in data["ours"]


@pytest.mark.parametrize("summary_entry, reason", [
    (None, "the paper's heads were not looked up (--no-heads)"),
    ({"missing": "no paradigm of determiner_noun_agreement was chosen"}, "no paradigm of determiner_noun_agreement"),
    ({"base": -0.5}, "does not prefer the grammatical sentences of determiner noun agreement (mean margin -0.50"),
    ({"base": 0.0}, "(mean margin 0.00 nats): nothing to remove"),
    ({"drop": "off_target"}, "nothing to compare with the other phenomena: no paradigm of another phenomenon"),
    ({"drop": "same_layer"}, "nothing to compare with its layer's other heads: its layer has no other head"),
    ({"nan": True}, "undefined (NaN)"),
])
def test_not_applicable_with_its_reason(summary_entry, reason):
    if summary_entry is None:
        e = None
    elif "missing" in summary_entry:
        e = {**entry(), "missing": summary_entry["missing"]}
    elif "base" in summary_entry:
        e = entry(base=summary_entry["base"])
    elif "drop" in summary_entry:
        e = {**entry(), summary_entry["drop"]: None}
    else:
        e = entry(same=(float("nan"), -0.5, -0.1))
    row = group_claim("det", e)
    assert row.verdict == "not applicable" and reason in row.reason
    check_row(row.to_json())


def test_a_model_that_cannot_score_makes_every_claim_not_applicable():
    rows = claims({"reason": "an encoder without a masked-LM head of its own", "groups": None})
    assert [r.id for r in rows] == [c[0] for c in CLAIMS.values()]
    assert {r.verdict for r in rows} == {"not applicable"} and {r.reason for r in rows} == {
        "an encoder without a masked-LM head of its own"}


def test_a_group_without_heads_is_named():
    rows = claims({"reason": None, "groups": {"det": entry()}})
    assert [r.verdict for r in rows] == ["reproduced", "not applicable", "not applicable"]
    assert rows[1].reason == "its heads were not found in the §4.2 and §4.3 runs"
