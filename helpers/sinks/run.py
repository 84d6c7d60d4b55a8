"""Attention sinks end to end: the segments of ``segments`` -> one pass of weights and norms -> alpha_1 per head.

The segments are those ``python -m helpers segments`` writes for the same model (:mod:`helpers.pipeline.segments`):
an encoder's ``[CLS] A [SEP] B [SEP]``, a decoder's ``BOS A B`` (no [SEP]; ``--no-bos``: ``A B``), at most 128
tokens. Each batch's weights and norm maps come from one forward pass and are reduced at once on the one route
(:mod:`helpers.sinks.stats`): no map is kept, none is written to the cache. The per-head shares are cached as
JSON, each input's beside them (an ``.npz`` of float32, for the bootstrap intervals over segments), keyed by the
model (its fingerprint holds the BOS setting), the encoded segments and this code.

>>> report = run_sinks(lm, n_segments=20)                               # doctest: +SKIP
>>> report.to_json(epsilon=0.3)["sink_rate"]                            # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.context import RunContext, takes_context
from helpers.core import bootstrap
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.models import LoadedModel, load_model
from helpers.data.cache import cached_arrays, cached_json
from helpers.data.segments import SegmentSource, segment_tokens
from helpers.digest import code_digest
from helpers.pipeline.route import reduce_maps
from helpers.pipeline.segments import DEFAULT_SOURCE, SEGMENTS, build_segments, segments_key
from helpers.sinks.stats import (
    EPSILON,
    FirstPositionAccumulator,
    SegmentShares,
    sink_rate,
    sink_rate_by_layer,
)

DECIMALS = 6  # the shares and rates as written to JSON


def first_position_statistics(lm: LoadedModel, batch: EncodedBatch, ctx: RunContext | None = None, *,
                              batch_size: int = 32) -> dict:
    """``{"weights", "norms": [layer][head] lists, "inputs"}``: mean ``alpha_1`` over the inputs of ``batch``, from
    attention weights and from norm maps, one forward pass per batch of ``batch_size`` (the route's:
    :func:`helpers.pipeline.route.reduce_maps`), every layer and head at once; ``"segments"``: each input's
    (:class:`~helpers.sinks.stats.SegmentShares`, not JSON: :func:`run_sinks` caches it apart)."""
    acc = reduce_maps(lm, batch, FirstPositionAccumulator, maps="weights+norms", ctx=ctx, batch_size=batch_size,
                      desc="attention to the first position")
    result = acc.result()
    return {"weights": result["weights"].tolist(), "norms": result["norms"].tolist(), "inputs": result["inputs"],
            "segments": acc.segments()}


@dataclass
class SinksReport:
    """What ``sinks`` measured: the model, its kind, the segments and the mean ``alpha_1`` per head ``[layer, head]``."""

    model: str
    causal: bool
    bos: bool
    batch: EncodedBatch
    weights: np.ndarray
    norms: np.ndarray
    segments: SegmentShares | None = None  # each input's alpha_1, for the intervals (None: not kept)

    def to_json(self, *, epsilon: float = EPSILON) -> dict:
        """The JSON of ``python -m helpers sinks`` (a contract: these keys, in this order; later keys are added,
        never removed). ``segments``: how many segments were measured (as ``surface``, ``cluster`` and ``norms``
        count them); ``bos``: whether the inputs start with a special token that is not a word (a decoder's BOS; an
        encoder's [CLS] always). With the per-input values (:attr:`segments`): the 95 % intervals over the
        resampled segments of ``first_token_share`` and ``norm_first_token_share`` (``[layer][head][lo, hi]``) and
        of ``sink_rate`` (``[lo, hi]``, the rate of each replicate's means), and ``bootstrap``: ``{"resampled",
        "n", "replicates", "level"}``."""
        r = lambda x: np.round(np.asarray(x, dtype=np.float64), DECIMALS).tolist()  # noqa: E731
        out = {
            "model": self.model, "causal": self.causal, "bos": self.bos, "segments": len(self.batch.examples),
            "tokens": segment_tokens(self.batch), "epsilon": epsilon,
            "first_token_share": r(self.weights), "sink_rate": round(sink_rate(self.weights, epsilon), DECIMALS),
            "sink_rate_by_layer": r(sink_rate_by_layer(self.weights, epsilon)),
            "norm_first_token_share": r(self.norms), "norm_sink_rate": round(sink_rate(self.norms, epsilon), DECIMALS),
        }
        if self.segments is not None:
            seg = self.segments
            out.update({
                "first_token_share_interval": r(seg.share_intervals("weights")),
                "norm_first_token_share_interval": r(seg.share_intervals("norms")),
                "sink_rate_interval": r(bootstrap.percentile_interval(seg.rate_replicates(epsilon))),
                "bootstrap": {"resampled": "segments", "n": len(seg), "replicates": seg.n_boot, "level": bootstrap.LEVEL},
            })
        return out


def without_bos(lm: LoadedModel) -> LoadedModel:
    """The decoder ``lm`` loaded again, on its device, with inputs that start with their first word (no BOS token):
    the same weights (``spec``, random initialisation and seed), so only the input differs."""
    if not lm.causal:
        raise ValueError(f"{lm.label} is an encoder, whose inputs keep their [CLS]: only a decoder goes without BOS")
    return load_model(lm.spec, random_init=lm.random_init, seed=lm.seed or 0, device=lm.device,
                      cache_root=lm.cache_root, bos=False, dtype=lm.dtype)


def sinks_key(lm: LoadedModel, batch: EncodedBatch, segments_from: SegmentSource) -> dict:
    """The cache key of the shares: the model (weights, and a decoder's BOS setting), the segments, the code."""
    return {"model": lm.fingerprint(), "data": batch.digest(), "token_types": lm.token_types,
            "code": code_digest(first_position_statistics), **segments_key(segments_from)}


@takes_context
def run_sinks(lm: LoadedModel, ctx: RunContext | None = None, *, n_segments: int = SEGMENTS, seed: int = 0,
              max_length: int = MAX_LENGTH, segments_from: SegmentSource = DEFAULT_SOURCE,
              batch_size: int = 32) -> SinksReport:
    """``alpha_1`` per head on the GUM train segments of ``segments`` (cached), for an encoder or a decoder."""
    data_dir, cache_root = ctx.data_dir, ctx.cache_dir
    batch = build_segments(lm, n_segments=n_segments, seed=seed, max_length=max_length, segments_from=segments_from,
                           data_dir=data_dir, cache_root=cache_root)
    key = sinks_key(lm, batch, segments_from)
    made: dict = {}

    def fresh() -> dict:
        if "shares" not in made:
            made["shares"] = first_position_statistics(lm, batch, ctx, batch_size=batch_size)
        return made["shares"]

    # each input's alpha_1 (float32, .npz) beside the means (JSON): a cache missing either computes both again
    arrays = cached_arrays("sinks-segments", key, lambda: fresh()["segments"].to_arrays(), cache_root=cache_root)
    shares = cached_json("sinks", key, lambda: {k: v for k, v in fresh().items() if k != "segments"},
                         cache_root=cache_root)
    return SinksReport(lm.label, lm.causal, lm.bos if lm.causal else True, batch,
                       np.asarray(shares["weights"]), np.asarray(shares["norms"]), SegmentShares.from_arrays(arrays))
