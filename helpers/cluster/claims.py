"""Paper §6's claims: thresholds as named constants, one verdict rule per claim, and :func:`claims`.
"""
from __future__ import annotations

from helpers.claims import Claim, Verdict, verdict
from helpers.cluster.run import ClusterResult

PAPER_SECTION = "§6"  # the paper section of these claims (the record's ``paper``)
LAYER_P = 0.05  # significance level of the layer test (one-sided permutation p-value)


def verdict_same_layer(p_value: float, ratio: float) -> Verdict:
    """§6: same-layer heads are closer than heads of different layers at significance :data:`LAYER_P`
    (reproduced), or only on average (``ratio`` of within- to between-layer distance below 1: partly)."""
    return verdict(p_value < LAYER_P, ratio < 1.0)


def claims(result: ClusterResult) -> list[Claim]:
    """The §6 claim from :func:`run_cluster`'s result, its verdict from the rule above."""
    sim = result.similarity
    return [Claim("same-layer-heads-alike", PAPER_SECTION, "heads in the same layer behave alike", "observed in Figure 6",
                  f"within/between distance {sim['ratio']:.2f}, permutation p = {sim['p_value']:.3f}",
                  float(sim["ratio"]), verdict_same_layer(sim["p_value"], sim["ratio"]))]
