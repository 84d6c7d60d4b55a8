"""Paper §4.2's claims: thresholds as named constants, one verdict rule per claim, and :func:`claims`.
"""
from __future__ import annotations

from helpers import paper
from helpers.claims import (
    NOT_REPRODUCED,
    Claim,
    Verdict,
    at_most_partly_if_overlaps,
    interval_text,
    verdict,
)
from helpers.syntax.run import HeadsRun, held_out_rows, table1_relations
from helpers.syntax.stats import (
    ALL,
    BOOTSTRAP,
    DIRECTIONS,
)

PAPER_SECTION = "§4.2"  # the paper section of these claims (the record's ``paper``)
SPECIALISED_MARGIN = 15  # points above the offset baseline that make a head "relation-specific"
SPECIALISED_PARTLY = 5   # points above the baseline that make it "partly" specific
GOOD_PARSER = 50         # accuracy (%) on all relations from which a single head would "do well" at syntax
DIRECTION_EXCEPTIONS = 2  # Table-1 relations allowed to go head-to-dependent ("all but pobj" in the paper, plus one)
# The relations of the claims table: the UD relation and the claim's id (stable, for the summary and `compare`).
CLAIM_RELATIONS = {"det": "det-head", "obj": "obj-head", "nmod:poss": "poss-head", "aux:pass": "auxpass-head",
                   "compound:prt": "prt-head"}


# ----------------------------------------------------------------------------------- claims
# One rule per claim, on plain numbers (tested on both sides of every threshold in tests/unit/test_claims.py).
# Every verdict rests on the head chosen on GUM dev and scored on GUM test, with its 95% bootstrap interval.


def verdict_single_head_all(accuracy: float) -> Verdict:
    """§4.2: no single head does well on all relations: reproduced while the best head's accuracy stays
    below :data:`GOOD_PARSER`."""
    return verdict(accuracy < GOOD_PARSER)


def verdict_relation_head(accuracy: float, baseline: float, interval) -> Verdict:
    """§4.2, one relation: a head beats the offset baseline by at least :data:`SPECIALISED_MARGIN`
    points (reproduced) or by more than :data:`SPECIALISED_PARTLY` (partly); "partly" at best when the
    head's 95% ``interval`` holds the baseline's accuracy."""
    gain = accuracy - baseline
    return at_most_partly_if_overlaps(verdict(gain >= SPECIALISED_MARGIN, gain > SPECIALISED_PARTLY),
                                      interval, baseline)


def verdict_specialised_heads(n_specialised: int, n_relations: int) -> Verdict:
    """§4.2: relation-specific heads (at least :data:`SPECIALISED_MARGIN` points over the baseline) for at
    least half of the Table-1 relations (reproduced) or for some (partly)."""
    return verdict(n_relations > 0 and n_specialised >= n_relations / 2, n_specialised >= 1)


def verdict_direction(n_dep_to_head: int, n_relations: int) -> Verdict:
    """§4.2: the dependent attends to its head for all but at most :data:`DIRECTION_EXCEPTIONS` of the
    Table-1 relations (reproduced), or for at least half of them (partly)."""
    return verdict(n_dep_to_head >= n_relations - DIRECTION_EXCEPTIONS, n_dep_to_head >= n_relations / 2)


def claims(test: HeadsRun, dev: HeadsRun, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> list[Claim]:
    """The §4.2 claims from a GUM-test run and a GUM-dev run (the head is chosen on ``dev``, scored on
    ``test``), each verdict from its rule above."""
    relations = table1_relations(test.scores)
    wanted = list(dict.fromkeys([*relations, *CLAIM_RELATIONS]))
    rows = {r["relation"]: r for r in held_out_rows(dev.scores, test.scores, wanted, n_boot=n_boot, seed=seed)}
    p_all = paper.TABLE1[ALL]

    def ours(row: dict) -> str:
        return (f"{interval_text(row['held_out_accuracy'], row['held_out_ci'])} ({row['dev_head']}, chosen on dev) "
                f"vs baseline {row['baseline_accuracy']:.1f}")

    out = []
    a = rows.get(ALL)
    out.append(Claim("single-head-parsing-all", PAPER_SECTION, "no single head does well at syntax overall",
                     f"{p_all.accuracy} ({p_all.head}) vs baseline {p_all.baseline}", ours(a) if a else "no words evaluated",
                     a["held_out_accuracy"] if a else None,
                     verdict_single_head_all(a["held_out_accuracy"]) if a else NOT_REPRODUCED))
    for rel, claim_id in CLAIM_RELATIONS.items():
        sd, p = paper.table1_row(rel)
        row = rows.get(rel)
        out.append(Claim(claim_id, PAPER_SECTION, f"a head specialises in {rel} (paper: {sd})",
                         f"{p.accuracy} ({p.head}) vs baseline {p.baseline}",
                         ours(row) if row else f"no {rel} words evaluated", row["held_out_accuracy"] if row else None,
                         verdict_relation_head(row["held_out_accuracy"], row["baseline_accuracy"], row["held_out_ci"])
                         if row else NOT_REPRODUCED))
    table_rows = [rows[r] for r in relations if r != ALL and r in rows]
    n_spec = sum(r["held_out_accuracy"] - r["baseline_accuracy"] >= SPECIALISED_MARGIN for r in table_rows)
    paper_rows = [v for k, v in paper.TABLE1.items() if k != ALL]
    paper_spec = sum(p.accuracy - p.baseline >= SPECIALISED_MARGIN for p in paper_rows)
    out.append(Claim("specialised-heads", PAPER_SECTION,
                     f"particular heads specialise in particular relations (≥{SPECIALISED_MARGIN} points over the baseline)",
                     f"{paper_spec} of {len(paper_rows)} relations", f"{n_spec} of {len(table_rows)} relations",
                     float(n_spec), verdict_specialised_heads(n_spec, len(table_rows))))
    n_dep = sum(r["dev_direction"] == DIRECTIONS[0] for r in table_rows)
    exceptions = paper.HEAD_TO_DEPENDENT.value
    out.append(Claim("dependent-attends-to-head", PAPER_SECTION, "for most relations the dependent attends to its head",
                     f"{len(paper_rows) - len(exceptions)} of {len(paper_rows)} relations (all but {', '.join(exceptions)})",
                     f"{n_dep} of {len(table_rows)} relations", float(n_dep), verdict_direction(n_dep, len(table_rows))))
    return out
