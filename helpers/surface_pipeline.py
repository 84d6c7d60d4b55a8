"""Paper §3 end to end: segments -> one streaming pass of statistics -> gradients -> claims.

Used by the chapter notebook and by ``python -m helpers surface --json OUT`` alike, so both report
the same numbers. Results are cached on disk, keyed by the model's weights, the encoded segments
and the settings.

>>> report = run_surface(lm, n_segments=1000, seed=0)                  # doctest: +SKIP
>>> report.stats.heads_above("prev")                                    # doctest: +SKIP
['2-3', '3-5']
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import numpy as np

from . import paper
from .cache import cached_json
from .claims import NOT_REPRODUCED, Claim, Verdict, verdict
from .argtypes import check_corpora, positive_int
from .cli import command, load
from .encoding import EncodedBatch
from .extract import iter_attention
from .labels import heads_phrase
from . import gradients as gradients_mod
from . import surface as surface_mod
from .gradients import gradient_importance
from .mlm import mlm_head
from .models import LoadedModel
from .segments import SegmentSource, segment_tokens
from .segments_pipeline import DEFAULT_SOURCE, add_segment_args, build_segments, segments_key
from .surface import SPECIALIST_THRESHOLD, SurfaceAccumulator, SurfaceStats, token_masks

SEGMENTS, SMALL_SEGMENTS = 1000, 40  # the chapters' segments: the paper's 1,000; the small (test) configuration

# Named thresholds of the verdicts below (see :func:`claims`).
POSITION_PARTLY = SPECIALIST_THRESHOLD / 2  # §3.1: a strongest head above half the paper's 50% is "partly"
SEP_MAJORITY = 0.5        # §3.2: "over half of BERT's attention in layers 6-10 focuses on [SEP]"
SEP_MAJORITY_PARTLY = SEP_MAJORITY / 2       # a layer giving a quarter of its attention to [SEP]: partly
SEP_SELF = 0.9            # §3.2: [SEP] attends to [SEP] "more than 90%"
SEP_SELF_PARTLY = 0.75 * SEP_SELF            # three quarters of the paper's 90%: partly
BROAD_FRACTION = 0.8      # [CLS] entropy counted "broad" at >= 80% of the uniform entropy
GRADIENT_SMALL = 0.5      # §3.2 "very small": [SEP] gradient below half of that for other tokens


@dataclass
class SurfaceReport:
    model: str
    segments: dict
    stats: SurfaceStats
    gradients: dict | None
    mlm: dict | None
    batch: EncodedBatch
    segments_from: str = DEFAULT_SOURCE

    def to_json(self) -> dict:
        s = self.stats
        return {
            "model": self.model, "segments": self.segments, "segments_from": self.segments_from,
            "segment_tokens": segment_tokens(self.batch), **s.to_json(),
            "layer_means": {k: s.layer_means(k).round(6).tolist() for k in s.per_head},
            "prev_heads": s.heads_above("prev"), "next_heads": s.heads_above("next"),
            "threshold": SPECIALIST_THRESHOLD, "gradients": self.gradients, "mlm_head": self.mlm,
            "claims": [c.to_json() for c in claims(self)],
        }


def surface_statistics(lm: LoadedModel, batch: EncodedBatch, *, batch_size: int = 32, progress: bool = False) -> SurfaceStats:
    """Every §3 statistic in one streaming pass: no map of the corpus is held in memory."""
    acc = SurfaceAccumulator()
    for example, attn in iter_attention(lm, batch, level="token", batch_size=batch_size, progress=progress):
        acc.add(attn, token_masks(lm.tokenizer, example.input_ids))
    return acc.result()


def _stats_key(lm: LoadedModel, batch: EncodedBatch, segments_from: SegmentSource = DEFAULT_SOURCE) -> dict:
    return {"model": lm.fingerprint(), "data": batch.digest(), "token_types": lm.token_types, "v": surface_mod.VERSION,
            **segments_key(segments_from)}


def cached_surface_statistics(lm: LoadedModel, batch: EncodedBatch, *, segments_from: SegmentSource = DEFAULT_SOURCE,
                              cache_root: str | os.PathLike | None = None, progress: bool = False) -> SurfaceStats:
    """:func:`surface_statistics`, cached on disk (keyed by the model's weights, the encoded segments and their
    construction)."""
    return SurfaceStats.from_json(cached_json(
        "surface-stats", _stats_key(lm, batch, segments_from), lambda: surface_statistics(lm, batch, progress=progress).to_json(),
        cache_root=cache_root))


def run_surface(lm: LoadedModel, *, n_segments: int = 1000, seed: int = 0, max_length: int = 128,
                segments_from: SegmentSource = DEFAULT_SOURCE, gradients: bool = True,
                gradient_segments: int | None = None, data_dir=None,
                cache_root: str | os.PathLike | None = None, progress: bool = False) -> SurfaceReport:
    """Statistics (cached), the masked-LM head and gradient importance (cached) for one model.

    The analysed segments come from GUM train (``segments_from``: see :mod:`helpers.segments`); the
    masked-LM head of a model without one is fitted on other GUM train segments (seed + 1) and
    evaluated on GUM dev segments."""
    seg = dict(max_length=max_length, segments_from=segments_from, data_dir=data_dir)
    batch = build_segments(lm, n_segments=n_segments, seed=seed, **seg)
    key = _stats_key(lm, batch, segments_from)
    stats = cached_surface_statistics(lm, batch, segments_from=segments_from, cache_root=cache_root, progress=progress)
    grads = mlm = None
    if gradients:
        train = build_segments(lm, n_segments=n_segments, seed=seed + 1, **seg)
        heldout = build_segments(lm, split="dev", n_segments=max(n_segments // 5, 20), seed=seed + 1, **seg)
        head, mlm = mlm_head(lm, train, heldout, seed=seed, cache_root=cache_root)
        grad_batch = batch if gradient_segments is None else EncodedBatch(
            batch.examples[:gradient_segments], [], batch.max_length)
        grads = cached_json("surface-gradients", {**key, "grad": grad_batch.digest(), "head": {k: v for k, v in mlm.items() if k != "cached"}, "seed": seed,
                                                  "grad_v": gradients_mod.VERSION},
                            lambda: gradient_importance(lm, head, grad_batch, seed=seed, progress=progress),
                            cache_root=cache_root)
    return SurfaceReport(lm.label, batch.summary(), stats, grads, mlm, batch, segments_from)


# ----------------------------------------------------------------------------------- claims
# One rule per claim, on plain numbers (tested on both sides of every threshold in tests/test_claims.py).


def verdict_position_heads(n_heads: int, best_share: float) -> Verdict:
    """§3.1 (previous or next token): reproduced when some head puts more than
    :data:`~helpers.surface.SPECIALIST_THRESHOLD` of its attention there (``n_heads`` such heads);
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
    """§3.3: the entropy from [CLS] in the last layer is at least :data:`BROAD_FRACTION` of the uniform
    entropy (reproduced), or at least the last layer's mean entropy from every token (partly)."""
    return verdict(cls_last >= BROAD_FRACTION * uniform, cls_last >= all_last)


def verdict_sep_gradient(ratio: float) -> Verdict:
    """§3.2: in the upper half of the layers the gradient for attention to [SEP] is below
    :data:`GRADIENT_SMALL` times that for other tokens (reproduced), or below it at all (partly)."""
    return verdict(ratio < GRADIENT_SMALL, ratio < 1.0)


def sep_self_attention(stats: SurfaceStats) -> tuple[float, int]:
    """``(attention from [SEP] to [SEP], layers)``: the mean over the half of the layers (at least one)
    with the most attention to [SEP]."""
    sep_layers = stats.layer_means("sep")
    top = np.argsort(sep_layers)[::-1][: max(1, len(sep_layers) // 2)]
    return float(stats.per_head["sep_sep"][top].mean()), len(top)


def claims(report: "SurfaceReport") -> list[Claim]:
    """The §3 claims, each verdict from its rule above."""
    return _claims(report.stats, report.gradients)


def _claims(stats: SurfaceStats, grads: dict | None) -> list[Claim]:
    prev, nxt = stats.heads_above("prev"), stats.heads_above("next")
    sep_layers = stats.layer_means("sep")
    n_layers = len(sep_layers)
    sep_self, n_top = sep_self_attention(stats)
    ent_layers = stats.layer_means("entropy")
    cls_last = float(stats.layer_means("entropy_cls")[-1])
    broadest = int(ent_layers.argmax())
    out = [
        Claim("prev-token-heads", "§3.1", "heads with >50% attention on the previous token",
              f"{paper.PREV_TOKEN_HEADS.value} (layers 2, 4, 7, 8)", heads_phrase(prev), float(len(prev)),
              verdict_position_heads(len(prev), float(stats.per_head["prev"].max()))),
        Claim("next-token-heads", "§3.1", "heads with >50% attention on the next token",
              f"{paper.NEXT_TOKEN_HEADS.value} (layers 1, 2, 2, 3, 6)", heads_phrase(nxt), float(len(nxt)),
              verdict_position_heads(len(nxt), float(stats.per_head["next"].max()))),
        Claim("sep-attention-middle-layers", "§3.2", "some layers give over half their attention to [SEP]",
              "layers 6-10 of 12", f"max layer mean {sep_layers.max():.2f} (layer {int(sep_layers.argmax()) + 1})",
              float(sep_layers.max()), verdict_sep_layers(float(sep_layers.max()))),
        Claim("sep-self-attention", "§3.2", "at [SEP], heads attend >90% to [SEP]",
              f">{paper.SEP_SELF_ATTENTION.value:.0%}", f"{sep_self:.2f} (mean over the {n_top} layers with most [SEP] attention)",
              sep_self, verdict_sep_self(sep_self)),
        Claim("broad-attention-lower-layers", "§3.3", "the broadest heads are in the lowest layers",
              "layer 1 (Figure 4)", f"highest mean entropy in layer {broadest + 1}", float(broadest + 1),
              verdict_broad_lower_layers(broadest, n_layers)),
        Claim("cls-broad-last-layer", "§3.3", "[CLS] attends broadly in the last layer",
              f"{paper.CLS_ENTROPY_LAST_LAYER.value} nats (128-token segments)",
              f"{cls_last:.2f} nats, uniform {stats.uniform_entropy:.2f}", cls_last,
              verdict_cls_broad(cls_last, stats.uniform_entropy, float(ent_layers[-1]))),
    ]
    if grads is not None:
        half = slice(n_layers // 2, None)
        sep_g, other_g = float(np.mean(grads["sep"][half])), float(np.mean(grads["other"][half]))
        ratio = sep_g / other_g if other_g > 0 else float("nan")
        out.append(Claim("sep-gradient-small", "§3.2",
                         "gradients for attention to [SEP] are small where [SEP] attention is high",
                         "very small from layer 5 on", f"ratio {ratio:.2f} (upper layers: [SEP] {sep_g:.2e} vs other {other_g:.2e})",
                         ratio, verdict_sep_gradient(ratio) if np.isfinite(ratio) else NOT_REPRODUCED))
    return out


def figure1_heads(stats: SurfaceStats) -> dict[str, tuple[int, int]]:
    """Figure 1's four example heads, chosen by rule: the head with the highest value of each pattern."""
    return {"attends broadly": stats.best_head("entropy"), "attends to the next token": stats.best_head("next"),
            "attends to [SEP]": stats.best_head("sep"), "attends to periods and commas": stats.best_head("punct")}


def example_segment(lm: LoadedModel, batch: EncodedBatch, *, min_tokens: int = 30, max_tokens: int = 50) -> int:
    """Position in ``batch.examples`` of the first segment of ``min_tokens..max_tokens`` tokens that holds
    both a period and a comma (Figure 1's example, chosen by rule)."""
    for position, ex in enumerate(batch.examples):
        tokens = set(lm.tokenizer.convert_ids_to_tokens(ex.input_ids.tolist()))
        if min_tokens <= len(ex) <= max_tokens and {".", ","} <= {t.lstrip("Ġ") for t in tokens}:
            return position
    return int(np.argmin([abs(len(ex) - max_tokens) for ex in batch.examples]))


# ------------------------------------------------------------------------------------- CLI


def _surface_args(parser: argparse.ArgumentParser) -> None:
    add_segment_args(parser)
    parser.add_argument("--no-gradients", action="store_true", help="skip the masked-LM gradient analysis")
    parser.add_argument("--gradient-segments", type=positive_int, default=None,
                        help="use only the first N segments for gradients (default: all)")
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, "gum:train", *([] if a.no_gradients else ["gum:dev"])))


@command("surface", "paper §3: relative position, [CLS]/[SEP]/punctuation, entropy, gradients", _surface_args)
def cmd_surface(args: argparse.Namespace) -> dict:
    lm = load(args)
    report = run_surface(lm, n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                         segments_from=args.segments_from, gradients=not args.no_gradients, gradient_segments=args.gradient_segments,
                         data_dir=args.data_dir, cache_root=args.cache_dir, progress=not args.quiet)
    return report.to_json()

