"""Paper §6's claims: thresholds as named constants, one rule of :mod:`helpers.claims` per claim, and :func:`claims`.
"""
from __future__ import annotations

from helpers.claims import P_LEVEL, Claim, Judged, claim, effect, judged_or_undefined, not_applicable
from helpers.cluster.run import ClusterResult

PAPER_SECTION = "§6"  # the paper section of these claims (the record's ``paper``)
LAYER_P = P_LEVEL  # significance level of the layer test (one-sided permutation p-value): the one of helpers.claims
NO_LAYER_EFFECT = 1.0  # the null: heads of a layer as far apart as heads of different layers (ratio 1)
# Ours: "heads within the same layer are often fairly close to each other" (the paper states it from its Figure 6,
# with no number): same-layer heads at least this much closer (a share of the distance between layers) ...
CLOSER_BY = 0.1
SAME_LAYER_RATIO = NO_LAYER_EFFECT - CLOSER_BY  # ... a within/between distance ratio of at most 0.9
RESAMPLED = "segments"


def judge_same_layer(ratio: float, interval, p_value: float) -> Judged:
    """§6 (rule ``effect``, null 1): the mean distance between heads of the same layer over that between heads of
    different layers (``ratio``, its 95 % ``interval`` over resampled segments) reaches :data:`SAME_LAYER_RATIO`;
    the layer test's permutation ``p_value`` stands in for the interval's test of the null (``p < 0.05``)."""
    return effect(ratio, interval, null=NO_LAYER_EFFECT, paper=SAME_LAYER_RATIO, p_value=p_value,
                  name="within/between distance ratio")


def claims(result: ClusterResult) -> list[Claim]:
    """The §6 claim from :func:`run_cluster`'s result, its verdict from the rule above."""
    sim = result.similarity
    text, p_text = "heads in the same layer behave alike", "observed in Figure 6"
    interval = sim.get("ratio_interval")
    if interval is None:
        return [not_applicable("same-layer-heads-alike", PAPER_SECTION, text, p_text,
                               "the distances hold no per-segment sums to resample")]
    lo, hi = interval
    return [claim("same-layer-heads-alike", PAPER_SECTION, text, p_text,
                  f"within/between distance {sim['ratio']:.2f} [{lo:.2f}, {hi:.2f}], permutation p = {sim['p_value']:.3f}",
                  float(sim["ratio"]), judged_or_undefined(judge_same_layer, sim["ratio"], interval, sim["p_value"]),
                  resampled=RESAMPLED, n=sim.get("segments_resampled"))]
