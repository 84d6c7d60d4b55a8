"""The ``sinks`` command: attention to the first position per head and the sink rate (Gu et al. 2025), from weights
and from norm maps, on the segments of ``segments``, for an encoder or a decoder. Its options (their defaults: the
record's settings, :mod:`helpers.sinks.section`) and its run: the record's, whose report's JSON it writes."""
from __future__ import annotations

import argparse
import math
from typing import Mapping

from helpers.pipeline.argtypes import positive_int
from helpers.pipeline.options import Command, capped_counts, load, run_context
from helpers.pipeline.segments import add_segment_args
from helpers.sinks.stats import EPSILON


def epsilon_float(text: str) -> float:
    """``--epsilon``: a number from 0 to 1 (a share of attention)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r:.40}: a number from 0 to 1, e.g. 0.3") from None
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r:.40}: a share of attention, from 0 to 1")
    return value


def _sinks_args(parser: argparse.ArgumentParser, defaults: Mapping | None = None) -> None:
    defaults = {"batch_size": 32, **(defaults or {})}
    add_segment_args(parser, defaults)
    parser.add_argument("--epsilon", type=epsilon_float, default=EPSILON,
                        help=f"a head is a sink head when its attention to the first position exceeds this (default {EPSILON}, Gu et al.)")
    parser.add_argument("--batch-size", type=positive_int, default=defaults["batch_size"])


def cmd_sinks(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    report = run(lm, run_context(args), n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                 segments_from=args.segments_from, batch_size=args.batch_size).sinks
    drawn = len(report.batch.examples) + len(report.batch.skipped)
    capped_counts({"segments": (args.segments, drawn)})  # said on standard error; the layout is fixed
    return report.to_json(epsilon=args.epsilon)


COMMAND = Command("sinks", "attention to the first position per head and the sink rate (Gu et al. 2025), "
                           "weights and norms, encoders and decoders", _sinks_args, cmd_sinks)
