"""The norms chapter's claims (beyond the paper): thresholds as named constants, one verdict rule per
claim, and :func:`claims`, through the one claim model (:mod:`helpers.claims`).

Two claims test Kobayashi et al. (2020) and the paper's §3.2 "no-op" reading on this model; the third is
our own hypothesis (no paper tested it), whose verdict says whether it holds: "reproduced" = it holds.

>>> rows = claims(report.stats, surface.gradients, table1)             # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                        # doctest: +SKIP
('norm-shrink-sep', 'reproduced')
"""
from __future__ import annotations

from helpers.claims import Claim, Verdict, not_applicable, verdict
from helpers.norms.stats import CAUSAL_ABSENT, KIND_NAMES, NormStats, shrink_ratio, sink, top_layers
from helpers.surface.stats import gradient_ratio

# Named thresholds of the verdicts below.
SHRINK_RATIO = 0.5     # "small norms": the norm share is at most half the weight share
NOOP_RATIO = 0.5       # "no-op": gradient (or norm share) of the sink at most half that of other tokens
IMPROVE_MARGIN = 1.0   # points of accuracy by which norm maps must beat weight maps to count as better
PARSE_PARTLY = 0.25    # "partly": norm maps improve at most this share of the Table-1 relations
SHRINK_KINDS: tuple[str, ...] = ("sep", "cls", "punct")  # the token kinds of the shrink claims, in order


# ----------------------------------------------------------------------------------- claims
# One rule per claim, on plain numbers (tested on both sides of every threshold in tests/unit/test_claims.py).


def verdict_shrink(ratio: float) -> Verdict:
    """Large weights come with small norms: the norm share is at most :data:`SHRINK_RATIO` of the weight
    share (reproduced), or below it at all (partly); an unknown ratio (NaN) is not reproduced."""
    return verdict(ratio <= SHRINK_RATIO, ratio < 1)


def verdict_noop(gradient: float, norm: float) -> Verdict:
    """Gradients and norms both mark attention to the sink as a no-op: both ratios at most :data:`NOOP_RATIO`
    (reproduced), or one of them (partly)."""
    return verdict(gradient <= NOOP_RATIO and norm <= NOOP_RATIO, gradient <= NOOP_RATIO or norm <= NOOP_RATIO)


def verdict_parse(n_better: int, n_relations: int) -> Verdict:
    """Our hypothesis, norm maps find no better single-head parser: no relation improves by
    :data:`IMPROVE_MARGIN` points (reproduced: it holds), at most :data:`PARSE_PARTLY` of them (partly)."""
    return verdict(n_better == 0, n_better <= n_relations * PARSE_PARTLY)


def improved_relations(table1: list[dict]) -> list[str]:
    """The relations of :func:`helpers.norms.run.table1_comparison` whose accuracy under norm maps beats that
    under weight maps by at least :data:`IMPROVE_MARGIN` points."""
    return [row["relation"] for row in table1 if row["change"] >= IMPROVE_MARGIN]


def claims(stats: NormStats, grads: dict | None = None, table1: list[dict] | None = None) -> list[Claim]:
    """The chapter's claims from :func:`helpers.norms.run.run_norms`'s statistics, the surface chapter's
    gradients (``grads``, optional) and :func:`helpers.norms.run.table1_comparison` (``table1``, optional),
    each verdict from its rule above."""
    out = []
    for kind in SHRINK_KINDS:
        if stats.causal and kind in CAUSAL_ABSENT:
            out.append(not_applicable(f"norm-shrink-{kind}", "beyond §3.2",
                                      f"large weights on {KIND_NAMES[kind]} come with small norms",
                                      "Kobayashi et al. (2020), §4: weights large, norms small", CAUSAL_ABSENT[kind]))
            continue
        layers = top_layers(stats, kind)
        ratio = shrink_ratio(stats, kind, layers)
        w = stats.layer_share("weights", kind)[layers].mean()
        n = stats.layer_share("norms", kind)[layers].mean()
        out.append(Claim(f"norm-shrink-{kind}", "beyond §3.2", f"large weights on {KIND_NAMES[kind]} come with small norms",
                         "Kobayashi et al. (2020), §4: weights large, norms small",
                         f"share {w:.2f} under weights, {n:.2f} under norms (ratio {ratio:.2f}; layers "
                         f"{', '.join(str(l + 1) for l in layers)})", ratio, verdict_shrink(ratio)))
    if grads is not None:
        kind, layers = sink(stats)
        g, r = gradient_ratio(grads, kind, layers), shrink_ratio(stats, kind, layers)
        out.append(Claim("noop-agreement", "beyond §3.2", f"gradients and norms both mark attention to {KIND_NAMES[kind]} as a no-op",
                         "§3.2 (gradients, for [SEP]); Kobayashi et al. (norms)",
                         f"layers {', '.join(str(l + 1) for l in layers)}: gradient ratio {g:.2f}, norm/weight share ratio {r:.2f}",
                         g, verdict_noop(g, r)))
    if table1:
        better = improved_relations(table1)
        changed = [row["relation"] for row in table1 if not row["same_head"]]
        out.append(Claim("norms-parse", "beyond §4.2", "norm maps find no better single-head parser than weight maps (Table 1)",
                         "not tested (weights only)",
                         f"{len(better)} of {len(table1)} relations improve by ≥{IMPROVE_MARGIN:g} point "
                         f"({', '.join(better) or 'none'}); best head changes for {len(changed)}",
                         float(len(better)), verdict_parse(len(better), len(table1))))
    return out

