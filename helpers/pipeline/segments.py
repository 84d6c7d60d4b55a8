"""The segments of paper §3 and §6, built once for the surface and clustering chapters and written by
``python -m helpers segments --json OUT`` so that anyone can recompute the statistics on identical inputs.

>>> segs, batch = draw_segments(lm, n_segments=1000, seed=0)          # doctest: +SKIP
>>> segment_tokens(batch)["mean"] >= 120                               # doctest: +SKIP
True
"""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.core.encoding import MAX_LENGTH, EncodedBatch, check_positions
from helpers.core.models import LoadedModel
from helpers.data.corpora import load_gum
from helpers.data.segments import (
    SEGMENT_SOURCES,
    SEGMENTS,
    Segment,
    SegmentSource,
    encode_segments,
    paper_segments,
    segment_tokens,
    split_position,
)
from helpers.pipeline.argtypes import check_corpora, max_length_int, positive_int
from helpers.pipeline.options import Command, load, with_counts

DEFAULT_SOURCE: SegmentSource = "documents"
# What the segments are read from, as a section's read is written (:func:`helpers.data.corpora.corpus_read`): GUM
# train, whichever construction (``--segments-from``); the held-out segments of §3's masked-LM head: GUM dev.
SEGMENTS_CORPUS, HELD_OUT_SEGMENTS_CORPUS = "segments:gum:train", "segments:gum:dev"
SMALL_SEGMENTS = 40  # the chapters' segments (§3, §6, norms) in the small (test) configuration; the book's: SEGMENTS


def draw_segments(lm: LoadedModel, *, split: str = "train", n_segments: int = SEGMENTS, seed: int = 0,
                  max_length: int = MAX_LENGTH, segments_from: SegmentSource = DEFAULT_SOURCE,
                  data_dir=None, cache_root=None) -> tuple[list[Segment], EncodedBatch]:
    """``(segments, encoded)``: the segments of a GUM split (see :mod:`helpers.data.segments`) and their model inputs;
    ``encoded.examples[k].index == k``."""
    docs = load_gum(split, data_dir=data_dir, cache_root=cache_root)
    segs = paper_segments(docs, lm.tokenizer, n=n_segments, max_length=max_length, seed=seed, source=segments_from)
    batch = encode_segments(lm.tokenizer, segs, max_length=max_length)
    check_positions(batch, lm.max_positions)
    return segs, batch


def build_segments(lm: LoadedModel, *, split: str = "train", n_segments: int = SEGMENTS, seed: int = 0,
                   max_length: int = MAX_LENGTH, segments_from: SegmentSource = DEFAULT_SOURCE, data_dir=None,
                   cache_root=None) -> EncodedBatch:
    """The encoded segments of a GUM split (see :func:`draw_segments`)."""
    return draw_segments(lm, split=split, n_segments=n_segments, seed=seed, max_length=max_length,
                         segments_from=segments_from, data_dir=data_dir, cache_root=cache_root)[1]


def segments_key(segments_from: SegmentSource) -> dict:
    """The construction's part of the cache keys of results computed on segments (the segments themselves are
    in the key as the encoded batch's digest, the code that builds them in the key's code digest)."""
    return {"segments_from": segments_from}


def segments_json(lm: LoadedModel, segments: list[Segment], batch: EncodedBatch) -> dict:
    """``{"model", "segments": [{"doc", "input_ids", "split"}]}``: ``split`` is the index of the first token of
    the second part (the contract of ``python -m helpers segments``), plus ``segment_tokens``."""
    return {"model": lm.label,
            "segments": [{"doc": segments[ex.index].doc_id, "input_ids": ex.input_ids.tolist(),
                          "split": split_position(lm.tokenizer, segments[ex.index])} for ex in batch.examples],
            "segment_tokens": segment_tokens(batch)}


def add_segment_args(parser: argparse.ArgumentParser, defaults: Mapping | None = None) -> None:
    """``--segments``, ``--segments-from`` and ``--max-length``, shared by the segments, surface and cluster commands;
    ``defaults``: a section's settings (``n_segments``, ``segments_from``, ``max_length``), else the paper's."""
    d = {"n_segments": SEGMENTS, "segments_from": DEFAULT_SOURCE, "max_length": MAX_LENGTH, **(defaults or {})}
    parser.add_argument("--segments", type=positive_int, default=d["n_segments"],
                        help=f"segments to draw (default {d['n_segments']})")
    parser.add_argument("--segments-from", choices=SEGMENT_SOURCES, default=d["segments_from"],
                        help="documents: sentences of a GUM train document accumulated to the length limit and split "
                             "at a random sentence boundary (the authors' construction, default); paragraphs: pairs of "
                             "consecutive paragraphs (shorter)")
    parser.add_argument("--max-length", type=max_length_int, default=d["max_length"], help="segment length limit in tokens")


def _segments_args(parser: argparse.ArgumentParser) -> None:
    add_segment_args(parser)
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, SEGMENTS_CORPUS))


def cmd_segments(args: argparse.Namespace) -> dict:
    lm = load(args)
    segs, batch = draw_segments(lm, n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                                segments_from=args.segments_from, data_dir=args.data_dir, cache_root=args.cache_dir)
    return with_counts(segments_json(lm, segs, batch), {"segments": (args.segments, len(segs))})


COMMAND = Command("segments", "the GUM train segments of paper §3 and §6, as model input ids", _segments_args, cmd_segments)
