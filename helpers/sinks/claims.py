"""The claims of the chapter on attention sinks (beyond the paper): thresholds as named constants, one verdict rule
per claim, and :func:`claims`, through the one claim model (:mod:`helpers.claims`).

The claims are those of Xiao et al. (2024) and Gu et al. (2025) about decoders, and the paper's §3.2 "no-op"
reading (Clark et al. 2019) asked of the decoder's sink, measured on the shares ``alpha_1`` ``[layer, head]`` of
:mod:`helpers.sinks.stats` (weights and norms), the §3 gradients of the model's own loss and the shares without BOS.

>>> rows = claims(weights, norms, grads, no_bos_weights, causal=True)      # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                           # doctest: +SKIP
('sink-upper-layers', 'reproduced')
"""
from __future__ import annotations

import numpy as np

from helpers.claims import Claim, Verdict, not_applicable, verdict
from helpers.sinks.stats import EPSILON, sink_rate
from helpers.surface.stats import SINK_SHARE, gradient_ratio, sink_layers

# Named thresholds of the verdicts below.
UPPER_RATE = 0.5        # "most heads of the upper layers": a sink rate above one half in the upper half of the layers
UPPER_PARTLY = 0.25     # "partly": above a quarter
NOOP_RATIO = 0.5        # "no-op": the sink's norm share (or gradient) at most half its weight share (other tokens')
KEPT_RATIO = 0.75       # "the first word takes the sink's role": without BOS, at least 3/4 of the sink rate with BOS
KEPT_PARTLY = 0.25      # "partly": at least a quarter of it
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


# ----------------------------------------------------------------------------------- rules
# One rule per claim, on plain numbers (tested on both sides of every threshold in tests/unit/test_sinks_chapter.py).


def verdict_upper(rate: float) -> Verdict:
    """Most heads of the upper layers are sink heads: their sink rate above :data:`UPPER_RATE` (reproduced), or
    above :data:`UPPER_PARTLY` (partly)."""
    return verdict(rate > UPPER_RATE, rate > UPPER_PARTLY)


def verdict_noop(ratio: float) -> Verdict:
    """The sink is a no-op by this measure: the ratio at most :data:`NOOP_RATIO` (reproduced), below 1 (partly);
    an unknown ratio (NaN: no sink layer) is not reproduced."""
    return verdict(ratio <= NOOP_RATIO, ratio < 1)


def verdict_kept(with_bos: float, without_bos: float) -> Verdict:
    """Without BOS the first word takes the sink's role: the sink rate without BOS at least :data:`KEPT_RATIO` of
    the rate with it (reproduced), at least :data:`KEPT_PARTLY` of it (partly); no sink with BOS: not reproduced."""
    if not with_bos > 0:
        return verdict(False)
    kept = without_bos / with_bos
    return verdict(kept >= KEPT_RATIO, kept >= KEPT_PARTLY)


def claims(weights: np.ndarray, norms: np.ndarray, grads: dict | None, no_bos_weights: np.ndarray | None, *,
           causal: bool, epsilon: float = EPSILON) -> list[Claim]:
    """The chapter's claims from the model's ``alpha_1`` ``[layer, head]`` under ``weights`` and ``norms`` (with
    BOS), the §3 gradients (``grads``: ``{kind: [layer]}``, ``None``: left out) and, for a decoder (``causal``),
    ``alpha_1`` without BOS (``no_bos_weights``); each verdict from its rule above."""
    weights, norms = np.asarray(weights), np.asarray(norms)
    upper = upper_layers(weights.shape[0])
    rate = sink_rate(weights[upper], epsilon)
    out = [Claim("sink-upper-layers", SECTION, "most heads of the upper layers are sink heads",
                 f"Gu et al. (2025): sink heads (alpha_1 > {epsilon:g}) in every auto-regressive LM tested",
                 f"sink rate {rate:.2f} in layers {layer_ranges(upper)} ({sink_rate(weights, epsilon):.2f} "
                 "over all layers)", rate, verdict_upper(rate))]
    layers = sink_layers_of(weights)
    where = f"layers {layer_ranges(layers)}"
    none = f"no sink layer (no layer's mean alpha_1 above {SINK_SHARE:g}): nothing to test"
    ratio = norm_ratio(weights, norms, layers)
    out.append(Claim("sink-noop-norms", SECTION, "the sink is a no-op: its norm share is far below its weight share",
                     "Kobayashi et al. (2020), for [SEP] and [CLS] in BERT: weights large, norms small",
                     f"{where}: norm/weight share ratio {ratio:.2f}" if len(layers) else none, ratio,
                     verdict_noop(ratio)))
    if grads is not None:
        g = gradient_ratio(grads, "cls", layers)
        out.append(Claim("sink-noop-gradients", SECTION, "the sink is a no-op: the loss hardly depends on attention to it",
                         "§3.2, for [SEP] in BERT: small gradients from layer 5 on",
                         f"{where}: gradient ratio {g:.2f} (sink over other tokens)" if len(layers) else none, g,
                         verdict_noop(g)))
    if not causal:
        out.append(not_applicable("sink-without-bos", SECTION, "without BOS the first word takes the sink's role",
                                  "Xiao et al. (2024): the first tokens are sinks whatever they hold",
                                  "an encoder's input always starts with its own [CLS]"))
    elif no_bos_weights is not None:
        with_bos, without = sink_rate(weights, epsilon), sink_rate(no_bos_weights, epsilon)
        out.append(Claim("sink-without-bos", SECTION, "without BOS the first word takes the sink's role",
                         "Xiao et al. (2024): the first tokens are sinks whatever they hold",
                         f"sink rate {without:.2f} without BOS, {with_bos:.2f} with it", without,
                         verdict_kept(with_bos, without)))
    return out
