"""The norms chapter's claims (beyond the paper): thresholds as named constants, one rule per claim, and
:func:`claims`, through the one claim model (:mod:`helpers.claims`).

Two claims test Kobayashi et al. (2020) and the paper's §3.2 "no-op" reading on this model; the third is our own
hypothesis (no paper tested it), whose verdict says whether it holds: "reproduced" = it holds. Every verdict is one
of the convention's rules on a statistic with its 95 % percentile bootstrap interval (:mod:`helpers.core.bootstrap`):

- ``norm-shrink-sep``, ``-cls``, ``-punct`` (rule ``effect``): the kind's share under norms over its share under
  weights, in the layers where it gets the most weight (:func:`~helpers.norms.stats.shrink_ratio`; a ratio of sums
  over the segments, which are resampled); null :data:`NULL_RATIO` (norms follow weights), level
  :data:`SHRINK_RATIO` (ours: Kobayashi et al. say "weights large, norms small" and state no level). Its premise,
  large weights on the kind: for [SEP] and [CLS] that it is a sink of this model
  (:func:`helpers.surface.stats.sink_premise`: more than 0.25 of some layer's attention); for "." and ",", which are
  many tokens rather than one, that some layer gives them at least :data:`PUNCT_CONCENTRATION` times the share
  uniform attention would (their share of the tokens). Where the premise fails the claim is not applicable, with the
  measured share.
- ``noop-agreement`` (rule ``combined``): on the model's measured sink and its sink layers, the gradient ratio (§3's
  per-segment gradients, :func:`helpers.surface.stats.gradient_ratio_interval`) and the norm/weight share ratio, each
  an effect with null 1 and level :data:`NOOP_RATIO` (ours). A part that is undefined (no sink; no per-segment
  gradients; a NaN) leaves the row not applicable, with that reason.
- ``norms-parse`` (rule ``combined`` of ``within`` parts): our hypothesis that norm maps find no better single-head
  parser than weight maps. For each of Table 1's relations, the change in accuracy from the weight maps' best head to
  the norm maps' best head, paired on the same words (sentences resampled,
  :func:`helpers.norms.run.paired_change`), must lie in ``[CHANGE_FLOOR, IMPROVE_MARGIN]``: at most
  :data:`IMPROVE_MARGIN` points better. The hypothesis speaks of every relation, so the combination is the
  statement: it fails (not reproduced) when some relation's interval lies wholly above the margin, holds
  (reproduced) when every relation's interval lies at or below it, and is inconclusive otherwise.

>>> rows = claims(report.stats, surface.gradients, table1)             # doctest: +SKIP
>>> rows[1].id, rows[1].verdict                                        # doctest: +SKIP
('norm-shrink-cls', 'reproduced')
"""
from __future__ import annotations

import math

import numpy as np

from helpers.claims import (Claim, Judged, claim, combined, effect, interval_text, judged_or_undefined, not_applicable,
                            within)
from helpers.norms.stats import CAUSAL_ABSENT, KIND_NAMES, NormStats, shrink_ratio, sink, top_layers
from helpers.surface.stats import gradient_ratio, gradient_ratio_interval, sink_premise

# Named thresholds of the verdicts below (each ours: neither Clark et al. nor Kobayashi et al. state a level).
NULL_RATIO = 1.0       # the null of every ratio here: norms (or gradients) follow weights (other tokens) exactly
SHRINK_RATIO = 0.5     # "small norms": the norm share at most half the weight share
NOOP_RATIO = 0.5       # "no-op": gradient (or norm share) of the sink at most half that of other tokens (weights)
IMPROVE_MARGIN = 1.0   # points of accuracy by which norm maps must beat weight maps to count as better
CHANGE_FLOOR = -100.0  # the lowest change in accuracy there is (points): the low end of norms-parse's range
PUNCT_CONCENTRATION = 2.0  # "large weights" on . and ,: a layer's share at least this many times uniform attention's
SHRINK_KINDS: tuple[str, ...] = ("sep", "cls", "punct")  # the token kinds of the shrink claims, in order
SECTION = "beyond §3.2"
KOBAYASHI = "Kobayashi et al. (2020), §4: weights large, norms small"


# ----------------------------------------------------------------------------------- rules
# One rule per claim, on plain numbers (tested on both sides of every boundary in tests/unit/test_claims.py).


def judge_shrink(ratio: float, interval) -> Judged:
    """Large weights come with small norms: the norm/weight share ratio and its interval, an effect with null
    :data:`NULL_RATIO` and level :data:`SHRINK_RATIO` (:func:`helpers.claims.effect`: a ratio whose interval holds
    1 is never "partly"). Raises :class:`helpers.claims.Undefined` on a NaN."""
    return effect(ratio, interval, null=NULL_RATIO, paper=SHRINK_RATIO, name="norm/weight share ratio")


def judge_noop(gradient: float, gradient_interval, norm: float, norm_interval) -> Judged:
    """Gradients and norms both mark attention to the sink as a no-op: the two ratios, each an effect with null
    :data:`NULL_RATIO` and level :data:`NOOP_RATIO`, combined (:func:`helpers.claims.combined`)."""
    return combined(effect(gradient, gradient_interval, null=NULL_RATIO, paper=NOOP_RATIO, name="gradient ratio"),
                    effect(norm, norm_interval, null=NULL_RATIO, paper=NOOP_RATIO, name="norm/weight share ratio"))


def judge_parse(changes) -> Judged:
    """Our hypothesis, norm maps find no better single-head parser: ``changes`` ``[(relation, change, interval)]``
    (points, paired on the same words), each a ``within`` part on ``[CHANGE_FLOOR, IMPROVE_MARGIN]``, combined."""
    changes = list(changes)
    if not changes:
        raise ValueError("judge_parse: no relation to compare")
    return combined(*(within(change, interval, low=CHANGE_FLOOR, high=IMPROVE_MARGIN, name=relation)
                      for relation, change, interval in changes))


def punct_premise(layer_share: np.ndarray, uniform: float) -> str | None:
    """The premise of ``norm-shrink-punct``: ``None`` when some layer's mean weight share of "." and ","
    (``layer_share`` ``[layer]``) is at least :data:`PUNCT_CONCENTRATION` times ``uniform``, the share uniform
    attention gives them; else the reason the claim is not applicable, with the measured shares.

    >>> print(punct_premise(np.array([0.08, 0.09]), 0.07))
    ". or ," get no large weights in this model: at most 0.09 of any layer's attention, against 0.07 under uniform attention (large: at least 2 times that)
    """
    top = float(np.nanmax(layer_share)) if np.size(layer_share) else float("nan")
    if not (math.isfinite(top) and math.isfinite(uniform)):
        return '". or ," have no measured share to set against uniform attention (no per-segment values kept)'
    if top >= PUNCT_CONCENTRATION * uniform:
        return None
    return (f'". or ," get no large weights in this model: at most {top:.2f} of any layer\'s attention, against '
            f"{uniform:.2f} under uniform attention (large: at least {PUNCT_CONCENTRATION:g} times that)")


def shrink_premise(stats: NormStats, kind: str) -> str | None:
    """The premise of ``norm-shrink-<kind>`` (large weights on ``kind``): ``None`` when it holds, else the reason."""
    if kind == "punct":
        return punct_premise(stats.layer_share("weights", kind), stats.uniform_share(kind))
    return sink_premise({kind: stats.layer_share("weights", kind)}, kind)


def ratio_interval(stats: NormStats, kind: str, layers) -> tuple[float, float]:
    """The 95 % interval of :func:`~helpers.norms.stats.shrink_ratio` over the resampled segments (NaN ends without
    per-segment values)."""
    if stats.segments is None:
        return float("nan"), float("nan")
    return stats.segments.ratio_interval(kind, layers)


def improved_relations(table1: list[dict]) -> list[str]:
    """The relations of :func:`helpers.norms.run.table1_comparison` whose accuracy under norm maps beats that
    under weight maps by at least :data:`IMPROVE_MARGIN` points."""
    return [row["relation"] for row in table1 if row["change"] >= IMPROVE_MARGIN]


def parse_groups(table1: list[dict]) -> dict[str, list[str]]:
    """The relations of ``table1`` by where their paired change's interval lies against :data:`IMPROVE_MARGIN`:
    ``"better"`` (wholly above it: norm maps better beyond doubt), ``"within"`` (at or below it) and
    ``"undecided"`` (across it); a row without an interval is in none."""
    out: dict[str, list[str]] = {"better": [], "within": [], "undecided": []}
    for row in table1:
        iv = row.get("change_interval")
        if iv is None:
            continue
        out["better" if iv[0] > IMPROVE_MARGIN else "within" if iv[1] <= IMPROVE_MARGIN else "undecided"].append(row["relation"])
    return out


def _layers(layers) -> str:
    return ", ".join(str(int(l) + 1) for l in layers)


def _no_segments(stats: NormStats) -> str | None:
    return None if stats.segments is not None else "no per-segment shares were kept: the ratio has no interval"


def no_per_segment_gradients(grads: dict, kind: str) -> bool:
    """Whether the §3 gradients ``grads`` lack the per-segment values of ``kind`` and of other tokens that the
    gradient ratio's interval resamples (``grads["per_segment"]``)."""
    per = grads.get("per_segment") or {}
    return per.get(kind) is None or per.get("other") is None


def claims(stats: NormStats, grads: dict | None = None, table1: list[dict] | None = None) -> list[Claim]:
    """The chapter's claims from :func:`helpers.norms.run.run_norms`'s statistics (with their per-segment
    values), the surface chapter's gradients (``grads``, optional) and
    :func:`helpers.norms.run.table1_comparison` (``table1``, optional), each verdict from its rule above."""
    out = []
    for kind in SHRINK_KINDS:
        cid, text = f"norm-shrink-{kind}", f"large weights on {KIND_NAMES[kind]} come with small norms"
        paper = f"{KOBAYASHI} (no level stated; ours: ratio ≤ {SHRINK_RATIO:g})"
        reason = (CAUSAL_ABSENT[kind] if stats.causal and kind in CAUSAL_ABSENT
                  else shrink_premise(stats, kind) or _no_segments(stats))
        if reason:
            out.append(not_applicable(cid, SECTION, text, paper, reason))
            continue
        layers = top_layers(stats, kind)
        ratio, interval = shrink_ratio(stats, kind, layers), ratio_interval(stats, kind, layers)
        w = stats.layer_share("weights", kind)[layers].mean()
        n = stats.layer_share("norms", kind)[layers].mean()
        out.append(claim(cid, SECTION, text, paper,
                         f"share {w:.2f} under weights, {n:.2f} under norms (ratio {interval_text(ratio, interval, '.2f')}"
                         f"; layers {_layers(layers)})", ratio,
                         judged_or_undefined(judge_shrink, ratio, interval), resampled="segments", n=stats.n_segments))
    if grads is not None:
        out.append(_noop_claim(stats, grads))
    if table1:
        out.append(_parse_claim(table1))
    return out


def _noop_claim(stats: NormStats, grads: dict) -> Claim:
    kind, layers = sink(stats)
    text = f"gradients and norms both mark attention to {KIND_NAMES[kind]} as a no-op"
    paper = f"§3.2 (gradients, for [SEP]); Kobayashi et al. (norms); no level stated (ours: both ratios ≤ {NOOP_RATIO:g})"
    premise = sink_premise({kind: stats.layer_share("weights", kind)}, kind)
    reason = (f"no sink to test: {premise}" if premise
              else "no per-segment gradients: the §3 gradients keep only their means, so the gradient ratio has no "
                   "interval" if no_per_segment_gradients(grads, kind) else _no_segments(stats))
    if reason:
        return not_applicable("noop-agreement", SECTION, text, paper, reason)
    g, g_interval = gradient_ratio(grads, kind, layers), gradient_ratio_interval(grads, kind, layers)
    r, r_interval = shrink_ratio(stats, kind, layers), ratio_interval(stats, kind, layers)
    return claim("noop-agreement", SECTION, text, paper,
                 f"layers {_layers(layers)}: gradient ratio {interval_text(g, g_interval, '.2f')}, norm/weight share "
                 f"ratio {interval_text(r, r_interval, '.2f')}", g,
                 judged_or_undefined(judge_noop, g, g_interval, r, r_interval), resampled="segments",
                 n=stats.n_segments)


def _parse_claim(table1: list[dict]) -> Claim:
    better = improved_relations(table1)
    changed = [row["relation"] for row in table1 if not row["same_head"]]
    changes = [(row["relation"], row["change"], row.get("change_interval")) for row in table1]
    judged = judged_or_undefined(judge_parse, changes)
    groups = parse_groups(table1)
    above, open_ = groups["better"], groups["undecided"]
    top = max(table1, key=lambda row: row["change"])
    return claim("norms-parse", "beyond §4.2", "norm maps find no better single-head parser than weight maps (Table 1)",
                 "not tested (weights only); ours: no relation better by more than "
                 f"{IMPROVE_MARGIN:g} point", f"{len(better)} of {len(table1)} relations improve by ≥{IMPROVE_MARGIN:g} "
                 f"point ({', '.join(better) or 'none'}); best head changes for {len(changed)}; largest change "
                 f"{top['relation']} {interval_text(top['change'], top.get('change_interval'), '+.1f')} points; "
                 f"better beyond doubt: {', '.join(above) or 'none'}; undecided: {', '.join(open_) or 'none'}",
                 float(len(better)), judged, resampled="sentences", n=table1[0].get("sentences"))
