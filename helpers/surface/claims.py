"""Paper §3's claims: thresholds as named constants, one rule of :mod:`helpers.claims` per claim, and :func:`claims`.

Every statistic of §3 is a mean over segments, so every interval resamples the segments (1,000 bootstrap
replicates: :class:`~helpers.surface.stats.SegmentReplicates` for the attention statistics,
:func:`~helpers.surface.stats.gradient_ratio_interval` for the gradients). A discrete statement ("some head puts
more than half of its attention on the previous token", "the broadest layer is the first") is judged by the share
of replicates in which it holds (rule ``share``); a level ("more than 90 %", "attends broadly") by whether the
interval lies in its range (rule ``within``); the gradients' "very small" as an effect against no effect (rule
``effect``, null 1).

A claim about a role of [SEP] (it attends to itself; attention to it is a no-op) is judged on [SEP] only where
[SEP] is a sink of this model (:func:`~helpers.surface.stats.sink_premise`: more than
:data:`~helpers.surface.stats.SINK_SHARE` of some layer's attention); otherwise it is not applicable, with the
measured share, and the same claim is judged in a row of its own on the model's measured sink
(:func:`~helpers.surface.stats.measured_sink`: [CLS] or [SEP] for an encoder, the first position for a decoder).
The paper's numbers come from :mod:`helpers.paper`; the definitions the statistics share ("more than half on one
position", "broad attention", "a sink") live in :mod:`helpers.surface.stats`.
"""
from __future__ import annotations

import numpy as np

from helpers import paper
from helpers.claims import (NOT_APPLICABLE, Claim, Judged, claim, effect, interval_text, judged_or_undefined,
                            not_applicable, share, within)
from helpers.core import bootstrap
from helpers.core.labels import heads_phrase
from helpers.surface.run import SurfaceReport
from helpers.surface.stats import (BROAD_ENTROPY_FRACTION, SINK_NAMES, SPECIALIST_THRESHOLD, SegmentReplicates,
                                   SurfaceStats, cls_entropy_fraction, cls_entropy_fraction_replicates, gradient_ratio,
                                   gradient_ratio_interval, measured_sink, self_attention, self_attention_replicates,
                                   share_broadest_layer, share_some_head_above, share_some_layer_above, sink_layers,
                                   sink_premise)

# Named thresholds of the rules below (see :func:`claims`).
PAPER_SECTION = "§3"  # the paper section of these claims (the record's ``paper``), and its subsections:
POSITION, SPECIAL_TOKENS, BROAD = (f"{PAPER_SECTION}.{k}" for k in (1, 2, 3))  # position, [SEP], broad attention
RESAMPLED = "segments"                       # the unit every interval of §3 resamples
SEP_MAJORITY = paper.SEP_MAJORITY.value      # §3.2: "over half of BERT's attention in layers 6-10 focuses on [SEP]"
SEP_SELF = paper.SEP_SELF_ATTENTION.value    # §3.2: heads at [SEP] attend to [SEP] "more than 90%"
SELF_RANGE = (SEP_SELF, 1.0)                 # ... a share: more than the paper's level, at most all of it
GRADIENT_NULL = 1.0       # no effect: attention to the token weighs on the loss as much as attention to other tokens
GRADIENT_SMALL = 0.5      # §3.2 "very small" (the paper gives no number; ours): below half of other tokens'
# [CLS] attends "broadly" at or above BROAD_ENTROPY_FRACTION of the uniform entropy (helpers.surface.stats: the
# authors' 3.8 nats of log 128, the threshold of the §6 behaviours too), at most all of it.
CLS_BROAD_RANGE = (BROAD_ENTROPY_FRACTION, 1.0)
FIRST_POSITION = "the first position"  # a decoder's sink candidate: BOS, or the first word's first token


# ----------------------------------------------------------------------------------- the rules
# One rule per claim, on plain numbers (tested on both sides of every boundary in tests/unit/test_claims.py).


def position_heads(share_holding: float, best: float) -> Judged:
    """§3.1 (previous or next token): the share of segment resamples in which some head puts more than
    :data:`~helpers.surface.stats.SPECIALIST_THRESHOLD` of its attention there (rule ``share``); ``best`` is the
    strongest head's mean (the estimate shown)."""
    return share(share_holding, estimate=best, name="some head above the threshold")


def sep_layers(share_holding: float, top: float) -> Judged:
    """§3.2: the share of resamples in which some layer gives more than :data:`SEP_MAJORITY` of its attention
    to [SEP] (rule ``share``); ``top`` is the largest layer mean."""
    return share(share_holding, estimate=top, name="some layer above the paper's share")


def self_attended(estimate: float, interval) -> Judged:
    """§3.2: at the token, heads attend to its own kind "more than 90 %": the interval of the share within
    :data:`SELF_RANGE` (rule ``within``)."""
    low, high = SELF_RANGE
    return within(estimate, interval, low=low, high=high, name="self-attention")


def broadest_is_first(share_holding: float, broadest: int) -> Judged:
    """§3.3: the share of resamples in which layer 1 has the highest mean entropy (rule ``share``); ``broadest``
    is the 1-based broadest layer of the whole sample."""
    return share(share_holding, estimate=float(broadest), name="layer 1 the broadest")


def cls_broad(fraction: float, interval) -> Judged:
    """§3.3: the last layer's entropy from [CLS] as a fraction of the uniform entropy, its interval within
    :data:`CLS_BROAD_RANGE` (rule ``within``)."""
    low, high = CLS_BROAD_RANGE
    return within(fraction, interval, low=low, high=high, name="entropy from [CLS] over uniform")


def gradient_small(ratio: float, interval) -> Judged:
    """§3.2: the gradient for attention to the token over that for other tokens, an effect below
    :data:`GRADIENT_NULL` (no effect) with :data:`GRADIENT_SMALL` as the level of "very small" (rule ``effect``)."""
    return effect(ratio, interval, null=GRADIENT_NULL, paper=GRADIENT_SMALL, name="gradient ratio")


# ----------------------------------------------------------------------------------- claims


def claims(report: SurfaceReport, *, n_boot: int | None = None) -> list[Claim]:
    """The §3 claims of ``report`` (its statistics with each segment's values, and its gradients, if any), each
    verdict from its rule above with the segments resampled (``n_boot`` replicates, default
    :data:`helpers.core.bootstrap.BOOTSTRAP`). On causal statistics (a decoder's) those about what a causal map
    does not have (the next token, [SEP], the row of [CLS]) are "not applicable", with the reason; so is a claim
    about a role of [SEP] where [SEP] is not a sink of the model, and one whose statistic is undefined (NaN)."""
    stats, grads = report.stats, report.gradients
    boot = SegmentReplicates(stats, n_boot=n_boot)
    shares = _layer_shares(stats)
    out = [
        _position("prev-token-heads", "prev", "previous", paper.PREV_TOKEN_HEADS, paper.PREV_TOKEN_LAYERS, stats, boot),
        _position("next-token-heads", "next", "next", paper.NEXT_TOKEN_HEADS, paper.NEXT_TOKEN_LAYERS, stats, boot),
        _sep_attention(stats, boot),
        _sep_self(stats, boot, shares),
        _sink_self(stats, boot, shares),
        _broad_lower(stats, boot),
        _cls_broad(stats, boot),
    ]
    if grads is not None:
        out += [_sep_gradient(stats, grads, shares), _sink_gradient(stats, grads, shares)]
    return out


def _layer_shares(stats: SurfaceStats) -> dict[str, np.ndarray]:
    """``{kind: [layer]}``: each layer's mean share of attention to [CLS] (a decoder's first position) and to
    [SEP] (absent from a decoder)."""
    return {k: stats.layer_means(k) for k in ("cls", "sep") if k not in stats.undefined}


def sink_of(stats: SurfaceStats) -> tuple[str, str]:
    """``(kind, name)``: the model's measured sink (:func:`~helpers.surface.stats.measured_sink` of [CLS] and [SEP],
    a decoder's first position alone), what the rows ``sink-*`` are judged on, and its name in words."""
    shares = _layer_shares(stats)
    kind = measured_sink(shares, tuple(shares))
    return kind, _sink_name(stats, kind)


def evidence(c: Claim) -> str:
    """What a §3 claim's rule read, as the predicate of a sentence whose subject is the claim's statement or
    statistic, for the chapter's prose: the share of the resamples in which the statement holds (rule ``share``),
    the estimate with its 95 % interval (``within``, ``effect``), or why the claim is not applicable (with the
    statistic, where it was measured).

    >>> evidence(claim("x", "§3.1", "c", "p", "o", 1.0, share(0.97), resampled="segments", n=40))
    'holds in 97% of the resamples of the 40 segments'
    """
    j = c.judged
    if j is None:
        measured = "" if c.value is None else f"is {c.value:.3f}, but "
        return f"{measured}is not judged here: {c.reason}"
    if j.rule == "share":
        return f"holds in {j.share:.0%} of the resamples of the {c.n} {c.resampled}"
    lo, hi = j.interval
    return f"is {j.estimate:.3f}, 95% interval [{lo:.3f}, {hi:.3f}] over {c.n} resampled {c.resampled}"


def _premise_fails(cid: str, text: str, paper_text: str, reason: str, value: float, measured: str) -> Claim:
    """A claim about a role of [SEP] where [SEP] is not a sink of the model: not applicable, with the ``reason``;
    its statistic is still measured and kept (``value``, and ``measured`` in words), judged by no rule."""
    return Claim(cid, SPECIAL_TOKENS, text, paper_text, f"not applicable: {reason} (measured: {measured})", value,
                 NOT_APPLICABLE, reason)


def _sink_name(stats: SurfaceStats, kind: str) -> str:
    return FIRST_POSITION if stats.causal and kind == "cls" else SINK_NAMES[kind]


def _position(cid: str, statistic: str, word: str, heads: paper.Reported, layers: paper.Reported,
              stats: SurfaceStats, boot: SegmentReplicates) -> Claim:
    text = f"heads with >{SPECIALIST_THRESHOLD:.0%} attention on the {word} token"
    paper_text = f"{heads.value} (layers {', '.join(str(layer) for layer in layers.value)})"
    if statistic in stats.undefined:
        return not_applicable(cid, POSITION, text, paper_text, stats.undefined[statistic])
    found = stats.heads_above(statistic)
    holding = share_some_head_above(boot, statistic)
    return claim(cid, POSITION, text, paper_text,
                 f"{heads_phrase(found)}; some head in {holding:.0%} of resamples", float(len(found)),
                 position_heads(holding, float(stats.per_head[statistic].max())), resampled=RESAMPLED,
                 n=stats.n_segments)


def _sep_attention(stats: SurfaceStats, boot: SegmentReplicates) -> Claim:
    cid, text = "sep-attention-middle-layers", "some layers give over half their attention to [SEP]"
    first, last = paper.SEP_MAJORITY_LAYERS.value
    paper_text = f"layers {first}-{last} of {paper.N_LAYERS.value}"
    if "sep" in stats.undefined:
        return not_applicable(cid, SPECIAL_TOKENS, text, paper_text, stats.undefined["sep"])
    layers = stats.layer_means("sep")
    top = float(layers.max())
    holding = share_some_layer_above(boot, "sep", SEP_MAJORITY)
    return claim(cid, SPECIAL_TOKENS, text, paper_text,
                 f"max layer mean {top:.2f} (layer {int(layers.argmax()) + 1}); some layer above "
                 f"{SEP_MAJORITY:.0%} in {holding:.0%} of resamples", top, sep_layers(holding, top),
                 resampled=RESAMPLED, n=stats.n_segments)


def _self_claim(cid: str, text: str, paper_text: str, kind: str, stats: SurfaceStats,
                boot: SegmentReplicates) -> Claim:
    estimate, n_top = self_attention(stats, kind)
    interval = bootstrap.percentile_interval(self_attention_replicates(boot, kind))
    judged = judged_or_undefined(self_attended, estimate, interval)
    return claim(cid, SPECIAL_TOKENS, text, paper_text,
                 f"{interval_text(estimate, interval, '.2f')} (mean over the {n_top} layers with most "
                 f"{SINK_NAMES[kind]} attention)",
                 estimate, judged, resampled=RESAMPLED, n=stats.n_segments)


def _sep_self(stats: SurfaceStats, boot: SegmentReplicates, shares: dict) -> Claim:
    cid, text = "sep-self-attention", f"at [SEP], heads attend >{SEP_SELF:.0%} to [SEP]"
    paper_text = f">{SEP_SELF:.0%}"
    if "sep_sep" in stats.undefined:
        return not_applicable(cid, SPECIAL_TOKENS, text, paper_text, stats.undefined["sep_sep"])
    reason = sink_premise(shares, "sep")
    if reason:
        estimate, n_top = self_attention(stats, "sep")
        return _premise_fails(cid, text, paper_text, f"{reason}; the claim is judged on the measured sink instead "
                              "(sink-self-attention)", estimate, f"{estimate:.2f} in the {n_top} layers with most "
                              "[SEP] attention")
    return _self_claim(cid, text, paper_text, "sep", stats, boot)


def _sink_self(stats: SurfaceStats, boot: SegmentReplicates, shares: dict) -> Claim:
    cid = "sink-self-attention"
    kind, name = sink_of(stats)
    text = f"at this model's measured sink ({name}), heads attend >{SEP_SELF:.0%} to it (§3.2's [SEP] claim)"
    paper_text = f">{SEP_SELF:.0%}, for [SEP]"
    if stats.causal:
        return not_applicable(cid, SPECIAL_TOKENS, text, paper_text, stats.undefined["cls_cls"])
    reason = sink_premise(shares, kind, name=name)
    if reason:
        return not_applicable(cid, SPECIAL_TOKENS, text, paper_text, reason)
    return _self_claim(cid, text, paper_text, kind, stats, boot)


def _broad_lower(stats: SurfaceStats, boot: SegmentReplicates) -> Claim:
    broadest = int(stats.layer_means("entropy").argmax()) + 1
    holding = share_broadest_layer(boot, 0)
    return claim("broad-attention-lower-layers", BROAD, "the broadest heads are in the lowest layers",
                 f"layer {paper.BROADEST_LAYER.value} (Figure 4)",
                 f"highest mean entropy in layer {broadest}; layer 1 in {holding:.0%} of resamples", float(broadest),
                 broadest_is_first(holding, broadest), resampled=RESAMPLED, n=stats.n_segments)


def _cls_broad(stats: SurfaceStats, boot: SegmentReplicates) -> Claim:
    cid, text = "cls-broad-last-layer", "[CLS] attends broadly in the last layer"
    paper_text = f"{paper.CLS_ENTROPY_LAST_LAYER.value} nats ({paper.SEGMENT_TOKENS.value}-token segments)"
    if "entropy_cls" in stats.undefined:
        return not_applicable(cid, BROAD, text, paper_text, stats.undefined["entropy_cls"])
    cls_last = float(stats.layer_means("entropy_cls")[-1])
    fraction = cls_entropy_fraction(stats)
    interval = bootstrap.percentile_interval(cls_entropy_fraction_replicates(boot))
    return claim(cid, BROAD, text, paper_text,
                 f"{cls_last:.2f} nats, uniform {stats.uniform_entropy:.2f}: {interval_text(fraction, interval, '.2f')}"
                 " of uniform",
                 cls_last, judged_or_undefined(cls_broad, fraction, interval), resampled=RESAMPLED,
                 n=stats.n_segments)


def _gradient_claim(cid: str, text: str, paper_text: str, kind: str, name: str, layers: np.ndarray, where: str,
                    grads: dict) -> Claim:
    if grads.get("per_segment") is None:
        raise ValueError("the §3 gradient intervals need each segment's gradients (grads['per_segment']): read them "
                         "with helpers.surface.run.run_surface, which keeps them")
    ratio = gradient_ratio(grads, kind, layers)
    interval = gradient_ratio_interval(grads, kind, layers)
    mine, other = (float(np.mean(np.asarray(grads[k])[layers])) for k in (kind, "other"))
    return claim(cid, SPECIAL_TOKENS, text, paper_text,
                 f"ratio {interval_text(ratio, interval, '.2f')} ({where}: {name} {mine:.2e} vs other {other:.2e})",
                 ratio, judged_or_undefined(gradient_small, ratio, interval), resampled=RESAMPLED,
                 n=len(grads["per_segment"]["other"]))


def _sep_gradient(stats: SurfaceStats, grads: dict, shares: dict) -> Claim:
    cid, text = "sep-gradient-small", "gradients for attention to [SEP] are small where [SEP] attention is high"
    paper_text = f"very small from layer {paper.SEP_GRADIENT_SMALL_FROM.value} on"
    if "sep" in stats.undefined or grads.get("sep") is None:
        return not_applicable(cid, SPECIAL_TOKENS, text, paper_text,
                              stats.undefined.get("sep", "the gradients have no [SEP]"))
    n_layers = len(shares["sep"])
    upper = np.arange(n_layers // 2, n_layers)
    reason = sink_premise(shares, "sep")
    if reason:
        ratio = gradient_ratio(grads, "sep", upper)
        return _premise_fails(cid, text, paper_text, f"{reason}; the claim is judged on the measured sink instead "
                              "(sink-gradient-small)", ratio, f"ratio {ratio:.2f} in the upper layers")
    return _gradient_claim(cid, text, paper_text, "sep", "[SEP]", upper, "upper layers", grads)


def _sink_gradient(stats: SurfaceStats, grads: dict, shares: dict) -> Claim:
    cid = "sink-gradient-small"
    kind, name = sink_of(stats)
    text = f"gradients for attention to this model's measured sink ({name}) are small where it takes most attention"
    paper_text = f"very small from layer {paper.SEP_GRADIENT_SMALL_FROM.value} on, for [SEP]"
    reason = sink_premise(shares, kind, name=name)
    if reason:
        return not_applicable(cid, SPECIAL_TOKENS, text, paper_text, reason)
    layers = sink_layers(shares[kind])
    where = f"layers {', '.join(str(layer + 1) for layer in layers)}"
    return _gradient_claim(cid, text, paper_text, kind, name, layers, where, grads)
