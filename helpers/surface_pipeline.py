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

# Named thresholds of the verdicts below.
SEP_MAJORITY = 0.5        # §3.2: "over half of BERT's attention in layers 6-10 focuses on [SEP]"
SEP_SELF = 0.9            # §3.2: [SEP] attends to [SEP] "more than 90%"
BROAD_FRACTION = 0.8      # [CLS] entropy counted "broad" at >= 80% of the uniform entropy


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
            "claims": surface_claims(s, self.gradients),
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


def _verdict(full: bool, partial: bool) -> str:
    return "reproduced" if full else ("partly" if partial else "not reproduced")


def surface_claims(stats: SurfaceStats, grads: dict | None) -> list[dict]:
    """The §3 claims as rows ``claim | paper | ours | verdict``, each verdict from a stated rule."""
    prev, nxt = stats.heads_above("prev"), stats.heads_above("next")
    sep_layers = stats.layer_means("sep")
    n_layers = len(sep_layers)
    top = np.argsort(sep_layers)[::-1][: max(1, n_layers // 2)]  # layers with the most [SEP] attention
    sep_self = float(stats.per_head["sep_sep"][top].mean())
    ent_layers = stats.layer_means("entropy")
    cls_last = float(stats.layer_means("entropy_cls")[-1])
    rows = [
        {"claim": "heads with >50% attention on the previous token",
         "paper": f"{paper.PREV_TOKEN_HEADS.value} (layers 2, 4, 7, 8)",
         "ours": heads_phrase(prev), "verdict": _verdict(len(prev) > 0 and len(nxt) > 0, len(prev) > 0)},
        {"claim": "heads with >50% attention on the next token",
         "paper": f"{paper.NEXT_TOKEN_HEADS.value} (layers 1, 2, 2, 3, 6)",
         "ours": heads_phrase(nxt), "verdict": _verdict(len(nxt) > 0 and len(prev) > 0, len(nxt) > 0)},
        {"claim": "some layers give over half their attention to [SEP]",
         "paper": "layers 6-10 of 12", "ours": f"max layer mean {sep_layers.max():.2f} (layer {int(sep_layers.argmax()) + 1})",
         "verdict": _verdict(sep_layers.max() > SEP_MAJORITY, sep_layers.max() > SEP_MAJORITY / 2)},
        {"claim": "at [SEP], heads attend >90% to [SEP]",
         "paper": f">{paper.SEP_SELF_ATTENTION.value:.0%}", "ours": f"{sep_self:.2f} (mean over the {len(top)} layers with most [SEP] attention)",
         "verdict": _verdict(sep_self > SEP_SELF, sep_self > SEP_SELF * 0.75)},
        {"claim": "the broadest heads are in the lowest layers",
         "paper": "layer 1 (Figure 4)", "ours": f"highest mean entropy in layer {int(ent_layers.argmax()) + 1}",
         "verdict": _verdict(int(ent_layers.argmax()) == 0, int(ent_layers.argmax()) < n_layers / 2)},
        {"claim": "[CLS] attends broadly in the last layer",
         "paper": f"{paper.CLS_ENTROPY_LAST_LAYER.value} nats (128-token segments)",
         "ours": f"{cls_last:.2f} nats, uniform {stats.uniform_entropy:.2f}",
         "verdict": _verdict(cls_last >= BROAD_FRACTION * stats.uniform_entropy, cls_last >= ent_layers[-1])},
    ]
    if grads is not None:
        half = slice(n_layers // 2, None)
        sep_g, other_g = np.mean(grads["sep"][half]), np.mean(grads["other"][half])
        rows.append({"claim": "gradients for attention to [SEP] are small where [SEP] attention is high",
                     "paper": "very small from layer 5 on", "ours": f"upper layers: [SEP] {sep_g:.2e} vs other {other_g:.2e}",
                     "verdict": _verdict(sep_g < 0.5 * other_g, sep_g < other_g)})
    return rows


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

