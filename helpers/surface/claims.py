"""Paper §3's claims: thresholds as named constants, one verdict rule per claim, and :func:`claims`.

The paper's numbers come from :mod:`helpers.paper`; the thresholds are named here (the definitions the
statistics share, "more than half on one position" and "broad attention", in :mod:`helpers.surface.stats`).
"""
from __future__ import annotations

import numpy as np

from helpers import paper
from helpers.claims import NOT_REPRODUCED, Claim, Verdict, not_applicable, verdict
from helpers.core.labels import heads_phrase
from helpers.surface.run import (
    SurfaceReport,
    sep_self_attention,
)
from helpers.surface.stats import (
    BROAD_ENTROPY_FRACTION,
    SPECIALIST_THRESHOLD,
    SurfaceStats,
)

# Named thresholds of the verdicts below (see :func:`claims`).
PAPER_SECTION = "§3"  # the paper section of these claims (the record's ``paper``), and its subsections:
POSITION, SPECIAL_TOKENS, BROAD = (f"{PAPER_SECTION}.{k}" for k in (1, 2, 3))  # position, [SEP], broad attention
POSITION_PARTLY = SPECIALIST_THRESHOLD / 2  # §3.1: a strongest head above half the paper's 50% is "partly"
SEP_MAJORITY = paper.SEP_MAJORITY.value      # §3.2: "over half of BERT's attention in layers 6-10 focuses on [SEP]"
SEP_MAJORITY_PARTLY = SEP_MAJORITY / 2       # a layer giving a quarter of its attention to [SEP]: partly
SEP_SELF = paper.SEP_SELF_ATTENTION.value    # §3.2: [SEP] attends to [SEP] "more than 90%"
SEP_SELF_PARTLY = 0.75 * SEP_SELF            # three quarters of the paper's 90%: partly
GRADIENT_SMALL = 0.5      # §3.2 "very small": [SEP] gradient below half of that for other tokens
# [CLS] attends "broadly" at or above BROAD_ENTROPY_FRACTION of the uniform entropy (helpers.surface.stats:
# the authors' 3.8 nats of log 128, the threshold of the §6 behaviours too).


# ----------------------------------------------------------------------------------- claims
# One rule per claim, on plain numbers (tested on both sides of every threshold in tests/unit/test_claims.py).


def verdict_position_heads(n_heads: int, best_share: float) -> Verdict:
    """§3.1 (previous or next token): reproduced when some head puts more than
    :data:`~helpers.surface.stats.SPECIALIST_THRESHOLD` of its attention there (``n_heads`` such heads);
    partly when the strongest head (``best_share``) puts more than :data:`POSITION_PARTLY` there."""
    return verdict(n_heads >= 1, best_share > POSITION_PARTLY)


def verdict_sep_layers(max_layer_mean: float) -> Verdict:
    """§3.2: some layer gives more than :data:`SEP_MAJORITY` of its attention to [SEP] (reproduced),
    or more than :data:`SEP_MAJORITY_PARTLY` (partly)."""
    return verdict(max_layer_mean > SEP_MAJORITY, max_layer_mean > SEP_MAJORITY_PARTLY)


def verdict_sep_self(sep_self: float) -> Verdict:
    """§3.2: at [SEP], more than :data:`SEP_SELF` of the attention goes to [SEP] (reproduced), or more
    than :data:`SEP_SELF_PARTLY` (partly)."""
    return verdict(sep_self > SEP_SELF, sep_self > SEP_SELF_PARTLY)


def verdict_broad_lower_layers(broadest_layer: int, n_layers: int) -> Verdict:
    """§3.3: the layer with the highest mean entropy (0-based ``broadest_layer``) is the first
    (reproduced) or in the lower half (partly)."""
    return verdict(broadest_layer == 0, broadest_layer < n_layers / 2)


def verdict_cls_broad(cls_last: float, uniform: float, all_last: float) -> Verdict:
    """§3.3: the entropy from [CLS] in the last layer is at least
    :data:`~helpers.surface.stats.BROAD_ENTROPY_FRACTION` of the uniform entropy (reproduced), or at least
    the last layer's mean entropy from every token (partly)."""
    return verdict(cls_last >= BROAD_ENTROPY_FRACTION * uniform, cls_last >= all_last)


def verdict_sep_gradient(ratio: float) -> Verdict:
    """§3.2: in the upper half of the layers the gradient for attention to [SEP] is below
    :data:`GRADIENT_SMALL` times that for other tokens (reproduced), or below it at all (partly)."""
    return verdict(ratio < GRADIENT_SMALL, ratio < 1.0)


def claims(report: "SurfaceReport") -> list[Claim]:
    """The §3 claims, each verdict from its rule above; on causal statistics (a decoder's) those about what a
    causal map does not have (the next token, [SEP], the row of [CLS]) are "not applicable", with the reason."""
    out = _claims(report.stats, report.gradients)
    undefined = report.stats.undefined
    if not undefined:
        return out
    reasons = {"next-token-heads": undefined["next"], "sep-attention-middle-layers": undefined["sep"],
               "sep-self-attention": undefined["sep_sep"], "cls-broad-last-layer": undefined["entropy_cls"],
               "sep-gradient-small": undefined["sep"]}
    return [not_applicable(c.id, c.section, c.claim, c.paper, reasons[c.id]) if c.id in reasons else c for c in out]


def _claims(stats: SurfaceStats, grads: dict | None) -> list[Claim]:
    prev, nxt = stats.heads_above("prev"), stats.heads_above("next")
    sep_layers = stats.layer_means("sep")
    n_layers = len(sep_layers)
    sep_self, n_top = sep_self_attention(stats) if "sep" not in stats.undefined else (float("nan"), 0)
    ent_layers = stats.layer_means("entropy")
    cls_last = float(stats.layer_means("entropy_cls")[-1])
    broadest = int(ent_layers.argmax())

    def layers(reported: paper.Reported) -> str:
        return ", ".join(str(layer) for layer in reported.value)

    share = f">{SPECIALIST_THRESHOLD:.0%}"
    first, last = paper.SEP_MAJORITY_LAYERS.value
    out = [
        Claim("prev-token-heads", POSITION, f"heads with {share} attention on the previous token",
              f"{paper.PREV_TOKEN_HEADS.value} (layers {layers(paper.PREV_TOKEN_LAYERS)})", heads_phrase(prev),
              float(len(prev)), verdict_position_heads(len(prev), float(stats.per_head["prev"].max()))),
        Claim("next-token-heads", POSITION, f"heads with {share} attention on the next token",
              f"{paper.NEXT_TOKEN_HEADS.value} (layers {layers(paper.NEXT_TOKEN_LAYERS)})", heads_phrase(nxt),
              float(len(nxt)), verdict_position_heads(len(nxt), float(stats.per_head["next"].max()))),
        Claim("sep-attention-middle-layers", SPECIAL_TOKENS, "some layers give over half their attention to [SEP]",
              f"layers {first}-{last} of {paper.N_LAYERS.value}",
              f"max layer mean {sep_layers.max():.2f} (layer {int(sep_layers.argmax()) + 1})",
              float(sep_layers.max()), verdict_sep_layers(float(sep_layers.max()))),
        Claim("sep-self-attention", SPECIAL_TOKENS, f"at [SEP], heads attend >{SEP_SELF:.0%} to [SEP]",
              f">{paper.SEP_SELF_ATTENTION.value:.0%}", f"{sep_self:.2f} (mean over the {n_top} layers with most [SEP] attention)",
              sep_self, verdict_sep_self(sep_self)),
        Claim("broad-attention-lower-layers", BROAD, "the broadest heads are in the lowest layers",
              f"layer {paper.BROADEST_LAYER.value} (Figure 4)", f"highest mean entropy in layer {broadest + 1}", float(broadest + 1),
              verdict_broad_lower_layers(broadest, n_layers)),
        Claim("cls-broad-last-layer", BROAD, "[CLS] attends broadly in the last layer",
              f"{paper.CLS_ENTROPY_LAST_LAYER.value} nats ({paper.SEGMENT_TOKENS.value}-token segments)",
              f"{cls_last:.2f} nats, uniform {stats.uniform_entropy:.2f}", cls_last,
              verdict_cls_broad(cls_last, stats.uniform_entropy, float(ent_layers[-1]))),
    ]
    if grads is not None:
        half = slice(n_layers // 2, None)
        sep_g = float(np.mean(grads["sep"][half])) if grads["sep"] is not None else float("nan")  # None: no [SEP]
        other_g = float(np.mean(grads["other"][half]))
        ratio = sep_g / other_g if other_g > 0 else float("nan")
        out.append(Claim("sep-gradient-small", SPECIAL_TOKENS,
                         "gradients for attention to [SEP] are small where [SEP] attention is high",
                         f"very small from layer {paper.SEP_GRADIENT_SMALL_FROM.value} on",
                         f"ratio {ratio:.2f} (upper layers: [SEP] {sep_g:.2e} vs other {other_g:.2e})",
                         ratio, verdict_sep_gradient(ratio) if np.isfinite(ratio) else NOT_REPRODUCED))
    return out
