"""The claims of the chapter on attention sinks (beyond the paper): thresholds as named constants, one rule per
claim, and :func:`claims`, through the one claim model (:mod:`helpers.claims`).

The claims are those of Xiao et al. (2024) and Gu et al. (2025) about decoders, and the paper's §3.2 "no-op"
reading (Clark et al. 2019) asked of the decoder's sink, measured on the shares ``alpha_1`` ``[layer, head]`` of
:mod:`helpers.sinks.stats` (weights and norms), the §3 gradients of the model's own loss and the shares without BOS.
Every verdict is one of the convention's rules, the segments resampled (:class:`~helpers.sinks.stats.SegmentShares`,
a percentile bootstrap of :mod:`helpers.core.bootstrap`):

- ``sink-upper-layers`` (rule ``share``): the upper layers' sink rate exceeds :data:`UPPER_RATE`, judged by the share
  of replicates in which it does (the rate recomputed from each replicate's mean ``alpha_1``). Neither paper states a
  level for "most heads of the upper layers": one half is ours.
- ``sink-noop-norms`` (rule ``effect``): the mean ``alpha_1`` under norms over that under weights in the sink layers
  (a ratio of sums over segments), null :data:`NULL_RATIO` (norms follow weights), level :data:`NOOP_RATIO` (ours).
- ``sink-noop-gradients`` (rule ``effect``): the §3 gradient ratio for attention to the first position over other
  tokens in the sink layers, its interval from §3's per-segment gradients
  (:func:`helpers.surface.stats.gradient_ratio_interval`); null 1, level :data:`NOOP_RATIO` (ours).
- ``sink-without-bos`` (rule ``effect``): the kept share, the sink rate without BOS over the rate with it, the two
  runs paired on the same segments; null 0 (no sink left), level :data:`KEPT_RATIO` (ours).

The no-op claims' premise is a sink: a layer whose mean ``alpha_1`` exceeds
:data:`helpers.surface.stats.SINK_SHARE`; without one they are not applicable, with the measured share. No NaN
becomes a verdict: an undefined statistic makes its claim not applicable, with the reason.

>>> rows = claims(weights, norms, grads, no_bos_weights, causal=True, segments=s, no_bos_segments=t)  # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                                                      # doctest: +SKIP
('sink-upper-layers', 'reproduced')
"""
from __future__ import annotations

import numpy as np

from helpers.claims import Claim, Judged, claim, effect, interval_text, judged_or_undefined, not_applicable, share
from helpers.core import bootstrap
from helpers.sinks.stats import EPSILON, SegmentShares, kept_replicates, sink_rate
from helpers.surface.stats import SINK_SHARE, gradient_ratio, gradient_ratio_interval, sink_layers

# Named thresholds of the verdicts below (each ours: the papers state no level for these readings).
UPPER_RATE = 0.5        # "most heads of the upper layers": a sink rate above one half in the upper half of the layers
NULL_RATIO = 1.0        # the null of the no-op ratios: norms follow weights, gradients those of other tokens
NOOP_RATIO = 0.5        # "no-op": the sink's norm share (or gradient) at most half its weight share (other tokens')
KEPT_NULL = 0.0         # the null of the kept share: without BOS no sink is left
KEPT_RATIO = 0.75       # "the first word takes the sink's role": without BOS, at least 3/4 of the sink rate with BOS
SECTION = "beyond §3.2"  # where the claims sit beside the paper: its "no-op" reading of attention to [SEP]


def upper_layers(n_layers: int) -> np.ndarray:
    """0-based indices of the upper half of ``n_layers`` layers (the middle layer of an odd count included)."""
    return np.arange(n_layers // 2, n_layers)


def sink_layers_of(weights: np.ndarray) -> np.ndarray:
    """0-based layers whose mean ``alpha_1`` over heads (weights ``[layer, head]``) exceeds
    :data:`helpers.surface.stats.SINK_SHARE`: the layers where the first position is a sink (may be none)."""
    return sink_layers(np.asarray(weights).mean(-1), SINK_SHARE)


def layer_ranges(layers) -> str:
    """0-based ``layers`` as 1-based runs: ``[3, 4, 5, 9]`` -> ``"4-6, 10"`` ("none" when empty)."""
    runs: list[list[int]] = []
    for layer in sorted(int(l) + 1 for l in layers):
        if runs and layer == runs[-1][1] + 1:
            runs[-1][1] = layer
        else:
            runs.append([layer, layer])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs) or "none"


def norm_ratio(weights: np.ndarray, norms: np.ndarray, layers: np.ndarray) -> float:
    """The mean ``alpha_1`` under norms over that under weights, in 0-based ``layers`` (NaN when none)."""
    layers = np.asarray(layers, dtype=int)
    if len(layers) == 0:
        return float("nan")
    return float(np.asarray(norms)[layers].mean() / np.asarray(weights)[layers].mean())


def no_sink_reason(weights: np.ndarray) -> str | None:
    """The premise of the no-op claims: ``None`` when some layer's mean ``alpha_1`` (weights ``[layer, head]``)
    exceeds :data:`~helpers.surface.stats.SINK_SHARE`, else the reason they are not applicable, with the measured
    share.

    >>> print(no_sink_reason(np.full((2, 3), 0.1)))
    no sink layer: the first position takes at most 0.10 of any layer's attention (a sink takes more than 0.25)
    """
    if len(sink_layers_of(weights)):
        return None
    top = float(np.asarray(weights).mean(-1).max())
    return (f"no sink layer: the first position takes at most {top:.2f} of any layer's attention (a sink takes "
            f"more than {SINK_SHARE:g})")


# ----------------------------------------------------------------------------------- rules
# One rule per claim, on plain numbers (tested on both sides of every boundary in tests/unit/test_sinks_chapter.py).


def judge_upper(holds: float, rate: float) -> Judged:
    """Most heads of the upper layers are sink heads: ``holds``, the share of replicates whose upper-layer sink rate
    exceeds :data:`UPPER_RATE` (rule ``share``; ``rate``: the full sample's)."""
    return share(holds, estimate=rate, name="upper layers' sink rate above one half")


def judge_noop(ratio: float, interval) -> Judged:
    """The sink is a no-op by this measure: the ratio (norms over weights, or the sink's gradient over other
    tokens') and its interval, an effect with null :data:`NULL_RATIO` and level :data:`NOOP_RATIO`."""
    return effect(ratio, interval, null=NULL_RATIO, paper=NOOP_RATIO, name="ratio")


def judge_kept(kept: float, interval) -> Judged:
    """Without BOS the first word takes the sink's role: the kept share of the sink rate and its paired interval,
    an effect with null :data:`KEPT_NULL` and level :data:`KEPT_RATIO`."""
    return effect(kept, interval, null=KEPT_NULL, paper=KEPT_RATIO, name="kept share of the sink rate")


# ----------------------------------------------------------------------------------- claims


def claims(weights: np.ndarray, norms: np.ndarray, grads: dict | None, no_bos_weights: np.ndarray | None, *,
           causal: bool, epsilon: float = EPSILON, segments: SegmentShares | None = None,
           no_bos_segments: SegmentShares | None = None) -> list[Claim]:
    """The chapter's claims from the model's ``alpha_1`` ``[layer, head]`` under ``weights`` and ``norms`` (with
    BOS), their per-segment values ``segments`` (for the intervals), the §3 gradients (``grads``: ``{kind: [layer],
    "per_segment": ...}``, ``None``: left out) and, for a decoder (``causal``), ``alpha_1`` without BOS
    (``no_bos_weights``, per segment ``no_bos_segments``); each verdict from its rule above. Without per-segment
    values a claim has no interval and is not applicable, saying so."""
    weights, norms = np.asarray(weights), np.asarray(norms)
    missing = None if segments is not None else "no per-segment shares were kept: no interval"
    n = None if segments is None else len(segments)
    upper = upper_layers(weights.shape[0])
    rate = sink_rate(weights[upper], epsilon)
    text, paper = ("most heads of the upper layers are sink heads",
                   f"Gu et al. (2025): sink heads (alpha_1 > {epsilon:g}) in every auto-regressive LM tested; no level "
                   f"for the upper layers (ours: rate > {UPPER_RATE:g})")
    if missing:
        out = [not_applicable("sink-upper-layers", SECTION, text, paper, missing)]
    else:
        holds = bootstrap.share_holding(segments.rate_replicates(epsilon, upper) > UPPER_RATE)
        interval = bootstrap.percentile_interval(segments.rate_replicates(epsilon, upper))
        out = [claim("sink-upper-layers", SECTION, text, paper,
                     f"sink rate {interval_text(rate, interval, '.2f')} in layers {layer_ranges(upper)} "
                     f"({sink_rate(weights, epsilon):.2f} over all layers); above {UPPER_RATE:g} in {holds:.0%} of "
                     "replicates", rate, judged_or_undefined(judge_upper, holds, rate), resampled="segments", n=n)]
    layers = sink_layers_of(weights)
    where = f"layers {layer_ranges(layers)}"
    premise = no_sink_reason(weights)

    text, paper = ("the sink is a no-op: its norm share is far below its weight share",
                   "Kobayashi et al. (2020), for [SEP] and [CLS] in BERT: weights large, norms small; no level "
                   f"(ours: ratio ≤ {NOOP_RATIO:g})")
    if premise or missing:
        out.append(not_applicable("sink-noop-norms", SECTION, text, paper, premise or missing))
    else:
        ratio, interval = norm_ratio(weights, norms, layers), segments.ratio_interval(layers)
        out.append(claim("sink-noop-norms", SECTION, text, paper,
                         f"{where}: norm/weight share ratio {interval_text(ratio, interval, '.2f')}", ratio,
                         judged_or_undefined(judge_noop, ratio, interval), resampled="segments", n=n))
    if grads is not None:
        text, paper = ("the sink is a no-op: the loss hardly depends on attention to it",
                       f"§3.2, for [SEP] in BERT: small gradients from layer 5 on; no level (ours: ratio ≤ {NOOP_RATIO:g})")
        per = grads.get("per_segment") or {}
        reason = premise or (None if per.get("cls") is not None and per.get("other") is not None else
                             "no per-segment gradients: the §3 gradients keep only their means, so the gradient "
                             "ratio has no interval")
        if reason:
            out.append(not_applicable("sink-noop-gradients", SECTION, text, paper, reason))
        else:
            g, interval = gradient_ratio(grads, "cls", layers), gradient_ratio_interval(grads, "cls", layers)
            out.append(claim("sink-noop-gradients", SECTION, text, paper,
                             f"{where}: gradient ratio {interval_text(g, interval, '.2f')} (sink over other tokens)", g,
                             judged_or_undefined(judge_noop, g, interval), resampled="segments",
                             n=len(np.asarray(per["cls"]))))
    text, paper = ("without BOS the first word takes the sink's role",
                   f"Xiao et al. (2024): the first tokens are sinks whatever they hold; no level (ours: kept share ≥ "
                   f"{KEPT_RATIO:g})")
    if not causal:
        out.append(not_applicable("sink-without-bos", SECTION, text, paper,
                                  "an encoder's input always starts with its own [CLS]"))
    elif no_bos_weights is not None:
        with_bos, without = sink_rate(weights, epsilon), sink_rate(no_bos_weights, epsilon)
        if not with_bos > 0:
            out.append(not_applicable("sink-without-bos", SECTION, text, paper,
                                      f"no sink head with BOS (sink rate {with_bos:.2f}): no sink role to take over"))
        elif missing or no_bos_segments is None:
            out.append(not_applicable("sink-without-bos", SECTION, text, paper,
                                      missing or "no per-segment shares were kept without BOS: no interval"))
        else:
            kept = without / with_bos
            interval = bootstrap.percentile_interval(kept_replicates(segments, no_bos_segments, epsilon))
            paired = len(segments.paired(no_bos_segments)[0])
            out.append(claim("sink-without-bos", SECTION, text, paper,
                             f"sink rate {without:.2f} without BOS, {with_bos:.2f} with it: kept share "
                             f"{interval_text(kept, interval, '.2f')}", without,
                             judged_or_undefined(judge_kept, kept, interval), resampled="segments", n=paired))
    return out
