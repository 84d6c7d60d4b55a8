"""The minimal-pairs chapter's claims (beyond the paper): thresholds as named constants, one rule per claim
(:mod:`helpers.claims`: :func:`~helpers.claims.effect` parts on paired intervals over pairs, :func:`~helpers.claims.combined`).

Clark et al. find heads by where they attend; they never ask whether the model uses them for the grammar their
relation carries. Each claim here is that reading, tested on BLiMP's minimal pairs with the heads removed:

- ``pairs-det-agreement``: removing the det head (§4.2, best on GUM dev) lowers the margin on determiner-noun agreement
  more than removing the other heads of its layer does, more than removing the other relations' heads does, and
  more than it lowers the margin on the other phenomena;
- ``pairs-subject-verb-agreement``: the same for the nsubj, aux and cop heads together on subject-verb agreement;
- ``pairs-coref-anaphora``: the same for the coreference head (§4.3) on anaphor agreement and binding.

Each part is an effect (:func:`~helpers.claims.judge`): the difference of the changes in mean margin (nats), its
95 % interval from a bootstrap over pairs (paired where both sides are the same pairs), against the null 0 and the
level :data:`RELATIVE_DROP` of the full model's mean margin on the target phenomena (the claim's direction: a drop).
"Reproduced" = every part's interval below 0 and its estimate at that level; "inconclusive" where an interval holds
both 0 and that level.

>>> rows = claims(summary)                                             # doctest: +SKIP
"""
from __future__ import annotations

from helpers import paper
from helpers.claims import Claim, Undefined, claim, combined, effect, judged_or_undefined, not_applicable

SYNTAX_SECTION = "beyond §4.2"  # the §4.2 heads put to minimal pairs
COREF_SECTION = "beyond §4.3"   # the §4.3 head put to minimal pairs
# A removal "hurts" a phenomenon more than a comparison does when the difference of the two changes in mean margin
# reaches 10 % of the full model's mean margin on that phenomenon (the level each part's effect is judged against).
RELATIVE_DROP = 0.10
PARTS = (("same_layer", "its layer's other heads"), ("others", "the other relations' heads"),
         ("off_target", "the other phenomena"))
MISSING_PART = {"same_layer": "its layer has no other head", "others": "no other paper head was found",
                "off_target": "no paradigm of another phenomenon was chosen"}

CLAIMS = {  # group -> (id, section, claim, what the paper says)
    "det": ("pairs-det-agreement", SYNTAX_SECTION,
            "removing the det head hurts determiner-noun agreement more than same-layer heads, the other relations' "
            "heads, and the other phenomena",
            f"not tested: §4.2 finds a det head by attention alone ({paper.TABLE1['det'].head}, "
            f"{paper.TABLE1['det'].accuracy} %)"),
    "sva": ("pairs-subject-verb-agreement", SYNTAX_SECTION,
            "removing the nsubj, aux and cop heads hurts subject-verb agreement more than same-layer heads, the other "
            "relations' heads, and the other phenomena",
            f"not tested: §4.2 finds nsubj ({paper.TABLE1['nsubj'].head}) and aux ({paper.TABLE1['aux'].head}) heads "
            "by attention alone"),
    "coref": ("pairs-coref-anaphora", COREF_SECTION,
              "removing the coreference head hurts anaphor agreement and binding more than same-layer heads, the "
              "relation heads of §4.2, and the other phenomena",
              f"not tested: §4.3 finds a coreference head by attention alone ({paper.COREF_HEAD.value}, "
              f"{paper.TABLE2[paper.COREF_HEAD_ROW].all} %)"),
}


def _text(estimate: dict) -> str:
    lo, hi = estimate["interval"]
    return f"{estimate['value']:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def group_claim(group: str, entry: dict | None, *, reason: str | None = None) -> Claim:
    """The claim of ``group`` from its :func:`helpers.minimal_pairs.run.group_summary` ``entry`` (``None``: the heads
    were not looked up); ``reason``: why the model scores no pair (then the claim is not applicable)."""
    cid, section, text, said = CLAIMS[group]
    if reason:
        return not_applicable(cid, section, text, said, reason)
    if entry is None:
        return not_applicable(cid, section, text, said, "the paper's heads were not looked up (--no-heads)")
    if entry.get("missing"):
        return not_applicable(cid, section, text, said, entry["missing"])
    base = entry["base_margin"]["value"]
    targets = " and ".join(t.replace("_", " ") for t in entry["targets"])
    if base is None or not base > 0:
        shown = "undefined" if base is None else f"{base:.2f} nats"
        return not_applicable(cid, section, text, said, f"the model does not prefer the grammatical sentences of "
                                                        f"{targets} (mean margin {shown}): nothing to remove")
    level = -RELATIVE_DROP * base
    parts = []
    for key, name in PARTS:
        if entry.get(key) is None:
            return not_applicable(cid, section, text, said, f"nothing to compare with {name}: {MISSING_PART[key]}")
        d = entry[key]["difference"]
        parts.append(judged_or_undefined(effect, d["value"], d["interval"], null=0.0, paper=level, name=name))
    undefined = next((p for p in parts if isinstance(p, Undefined)), None)
    judged = undefined if undefined is not None else combined(*parts)
    heads = ", ".join(entry["heads"])
    removed = entry["removed"]
    ours = (f"{'head' if len(entry['heads']) == 1 else 'heads'} {heads} removed: margin {_text(removed)} nats on "
            f"{targets} ({removed['n']} pairs); beyond {PARTS[0][1]} {_text(entry['same_layer']['difference'])}, "
            f"beyond {PARTS[1][1]} {_text(entry['others']['difference'])}, beyond {PARTS[2][1]} "
            f"{_text(entry['off_target']['difference'])} (level {level:+.2f})") if undefined is None else ""
    return claim(cid, section, text, said, ours, entry["same_layer"]["difference"]["value"], judged,
                 resampled="pairs", n=removed["n"])


def claims(summary: dict) -> list[Claim]:
    """The chapter's claims from :func:`helpers.minimal_pairs.run.summarise`, one per group, in order."""
    reason = summary.get("reason")
    groups = summary.get("groups")
    out = []
    for group in CLAIMS:
        if reason or groups is None:
            out.append(group_claim(group, None, reason=reason))
        elif group not in groups:
            cid, section, text, said = CLAIMS[group]
            out.append(not_applicable(cid, section, text, said, "its heads were not found in the §4.2 and §4.3 runs"))
        else:
            out.append(group_claim(group, groups[group]))
    return out
