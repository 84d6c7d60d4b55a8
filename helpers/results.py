"""The sections of the paper, listed once (:data:`SECTIONS`), and every claim of the paper in one table
(the book's "Results at a glance" and ``python -m helpers claims``).

Each section's record (:class:`helpers.section.Section`, in its package's ``section.py``) holds its sizes,
run, claims and command; everything that goes over the sections (this table, the comparison, the
summary, the CLI, the build plan, the tests) iterates over :data:`SECTIONS`. No rule lives here: the rows
are the concatenation of each section's ``claims(report)``, for the same runs, at the same sizes, as the
chapters (cached on disk, so whatever a chapter already computed is read back).

>>> rows = all_claims(lm, RunContext.from_env())                         # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                          # doctest: +SKIP
('prev-token-heads', 'reproduced')
"""
from __future__ import annotations

import argparse
from typing import Any

from helpers.ablation.section import SECTION as ABLATION
from helpers.claims import Claim, by_id
from helpers.cluster.section import SECTION as CLUSTER
from helpers.context import RunContext
from helpers.core.encoding import MAX_LENGTH
from helpers.core.models import LoadedModel
from helpers.minimal_pairs.section import SECTION as MINIMAL_PAIRS
from helpers.mixing.section import SECTION as MIXING
from helpers.coref.section import SECTION as COREF
from helpers.norms.section import SECTION as NORMS
from helpers.pipeline.options import Command, load, run_context
from helpers.probe.section import SECTION as PROBE
from helpers.section import Section
from helpers.sinks.section import SECTION as SINKS
from helpers.surface.section import SECTION as SURFACE
from helpers.syntax.section import SECTION as SYNTAX

SECTIONS: tuple[Section, ...] = (SURFACE, SYNTAX, COREF, PROBE, CLUSTER, NORMS, SINKS, MIXING, ABLATION,
                                  MINIMAL_PAIRS)  # the paper's order; norms, sinks, mixing, ablation and minimal pairs go beyond it
PAPER_SECTIONS: tuple[Section, ...] = tuple(s for s in SECTIONS if s.in_paper)  # the sections of "every claim of the paper"


def section(key: str) -> Section:
    """The record of the section ``key`` (``"surface"``, ``"syntax"`` ...)."""
    for s in SECTIONS:
        if s.key == key:
            return s
    raise KeyError(f"no section {key!r}: choose one of {', '.join(s.key for s in SECTIONS)}")


def covering(paper_section: str) -> Section | None:
    """The record of the paper section that covers ``paper_section`` ("§3.2" -> §3's), ``None`` if none does."""
    return next((s for s in PAPER_SECTIONS if s.covers(paper_section)), None)


def section_of(claim: Claim) -> Section:
    """The paper section's record that states ``claim`` (by its ``section``, e.g. "§3.2" -> §3)."""
    record = covering(claim.section)
    if record is not None:
        return record
    raise ValueError(f"claim {claim.id}: section {claim.section!r} is none of "
                     f"{', '.join(s.paper for s in PAPER_SECTIONS)}")


def _settings(record: Section, sizes: dict) -> dict:
    """The overrides of ``sizes`` that ``record`` has (the options of ``claims`` shrink every section)."""
    return {k: v for k, v in sizes.items() if k in record.sizes.full or k == "max_length"}


def run_sections(lm: LoadedModel, ctx: RunContext, keys=None, **sizes) -> dict[str, Any]:
    """``{key: report}`` of the sections ``keys`` (default all) and of the sections they read, in the paper's
    order, each handed the reports of its inputs; ``sizes`` override the configuration's sizes of every
    section that has them (``n_segments``, ``max_sentences`` ...). Reports compute their parts when read."""
    wanted = set(keys or [s.key for s in SECTIONS])
    for s in reversed(SECTIONS):  # the inputs of a wanted section are wanted too
        if s.key in wanted:
            wanted.update(s.inputs)
    reports: dict[str, Any] = {}
    for s in SECTIONS:
        if s.key in wanted:
            reports[s.key] = s.run(lm, ctx, inputs={k: reports[k] for k in s.inputs}, **_settings(s, sizes))
    return reports


def run_section(record: Section, lm: LoadedModel, ctx: RunContext, **settings):
    """``record.run`` at ``settings``, handed the reports of the sections it reads (:func:`input_reports`, each
    at those of ``settings`` it has): how a section's command runs it (its handler's ``run``)."""
    return record.run(lm, ctx, inputs=input_reports(record, lm, ctx, **settings), **settings)


def run_command(record: Section, args: argparse.Namespace) -> dict:
    """A section's command: its handler, handed :func:`run_section` for ``record``; a decoder's JSON adds
    ``"causal"`` (:meth:`~helpers.section.Section.causal_json`: the mask and the section's definition under it),
    an encoder's is the handler's as it is, and so is a JSON whose fixed layout has a ``"causal"`` of its own (``sinks``:
    whether the model is causal)."""
    models = []

    def run(lm: LoadedModel, ctx: RunContext, **settings):
        models.append(lm)
        return run_section(record, lm, ctx, **settings)

    result = record.command.handler(args, run)
    mark = record.causal_json(models[-1]) if models else None
    if not mark or "causal" in result:  # a layout that has its own "causal" (sinks: a contract, true/false) keeps it
        return result
    return {**result, "causal": mark}


def input_reports(record: Section, lm: LoadedModel, ctx: RunContext, **sizes) -> dict[str, Any]:
    """The reports ``record`` reads (its :attr:`~helpers.section.Section.inputs`), for ``record.run(..., inputs=...)``."""
    reports = run_sections(lm, ctx, record.inputs, **sizes) if record.inputs else {}
    return {k: reports[k] for k in record.inputs}


def shared_segment_pass(lm: LoadedModel, ctx: RunContext, keys, **sizes) -> list[str]:
    """Before the runs of the sections ``keys`` at ``sizes`` (as :func:`run_sections` takes them), when they
    will all be read: one pass of the model over §3's segments for the §3 statistics and whichever of the §6
    JS distances and the norms statistics those runs read of the same segments
    (:func:`helpers.segment_pass.segment_statistics`: what chapter 3 does first), instead of a pass per section.
    Returns the parts computed: none when no second part shares §3's segments, when everything is cached,
    when the runs are distributed (``ctx.execution``: each section's run spreads its own pass) or ``ctx.refresh``
    recomputes every part (each run would then compute its own again)."""
    from helpers.pipeline.segments import DEFAULT_SOURCE
    from helpers.segment_pass import segment_statistics

    if SURFACE.key not in keys or ctx.execution is not None or ctx.refresh:
        return []

    def segments_of(record: Section) -> tuple:  # what build_segments reads for the section (norms: the default source)
        s = record.settings(ctx, **_settings(record, sizes))
        return s["n_segments"], s["seed"], s["max_length"], s.get("segments_from", DEFAULT_SOURCE)

    read = {r.key: segments_of(r) for r in (SURFACE, CLUSTER, NORMS) if r.key in keys}
    distances, norms = (read.get(r.key) == read[SURFACE.key] for r in (CLUSTER, NORMS))
    if read[SURFACE.key][3] != DEFAULT_SOURCE or not (distances or norms):
        return []
    n_segments, seed, max_length, _ = read[SURFACE.key]
    return segment_statistics(lm, ctx, n_segments=n_segments, seed=seed, max_length=max_length, distances=distances,
                              norms=norms)


def all_claims(lm: LoadedModel, ctx: RunContext, **sizes) -> list[Claim]:
    """Every claim of the paper: each paper section's ``claims(report)``, in the paper's order (ids are
    checked to be unique). ``sizes`` override the configuration's sizes of every section that has them."""
    keys = [s.key for s in PAPER_SECTIONS]
    shared_segment_pass(lm, ctx, keys, **sizes)
    reports = run_sections(lm, ctx, keys, **sizes)
    rows = [c for s in PAPER_SECTIONS for c in s.claims(reports[s.key])]
    by_id(rows)
    return rows


# ------------------------------------------------------------------------------------- CLI


def corpora(records=SECTIONS) -> tuple[str, ...]:
    """What the runs of ``records`` read (:attr:`~helpers.section.Section.corpora`), each once, in their order."""
    return tuple(dict.fromkeys(c for s in records for c in s.corpora))


def _check_claims_inputs(args: argparse.Namespace) -> None:
    from helpers.pipeline.argtypes import check_corpora

    check_corpora(args, *corpora(PAPER_SECTIONS))


def add_size_args(parser: argparse.ArgumentParser, *,
                  sentences_help: str | None = None, documents_help: str | None = None) -> None:
    """The options that shrink every section's run (``claims`` and ``compare`` share them); the sections they size
    are named from the records."""
    from helpers.pipeline.argtypes import max_length_int, positive_int

    parser.add_argument("--segments", type=positive_int, default=None, metavar="N",
                        help=f"segments for {SURFACE.paper} and {CLUSTER.paper} (default {SURFACE.sizes.full['n_segments']}, as the chapters)")
    parser.add_argument("--max-sentences", type=positive_int, default=None, metavar="N", help=sentences_help or f"first N sentences of each treebank for {SYNTAX.paper} and {PROBE.paper} (default: all, as the chapters)")
    parser.add_argument("--max-documents", type=positive_int, default=None, metavar="N", help=documents_help or f"first N documents of each split for {COREF.paper} (default: all, as the chapter)")
    parser.add_argument("--seeds", type=positive_int, default=None, metavar="N",
                        help=f"probe seeds 0 .. N-1 for {PROBE.paper} (default {len(PROBE.sizes.full['seeds'])})")
    parser.add_argument("--epochs", type=positive_int, default=None, metavar="N",
                        help=f"probe epochs for {PROBE.paper} (default {PROBE.sizes.full['epochs']})")
    parser.add_argument("--permutations", type=positive_int, default=CLUSTER.sizes.full["n_perm"], metavar="N",
                        help=f"permutations of the {CLUSTER.paper} layer test (default {CLUSTER.sizes.full['n_perm']})")
    parser.add_argument("--max-length", type=max_length_int, default=MAX_LENGTH,
                        help=f"longest input in tokens (default {MAX_LENGTH}, as in the paper); longer ones are skipped and counted")


def _claims_args(parser: argparse.ArgumentParser) -> None:
    add_size_args(parser)
    parser.set_defaults(check_inputs=_check_claims_inputs)


def size_options(args: argparse.Namespace) -> dict:
    """The section sizes set by the options of :func:`add_size_args` (``None``: the chapters')."""
    return dict(n_segments=args.segments, max_sentences=args.max_sentences, max_documents=args.max_documents,
                seeds=tuple(range(args.seeds)) if args.seeds else None, epochs=args.epochs, n_perm=args.permutations,
                max_length=args.max_length)


def cmd_claims(args: argparse.Namespace) -> dict:
    lm = load(args)
    out = {"model": lm.label, "claims": [c.to_json() for c in all_claims(lm, run_context(args), **size_options(args))]}
    if lm.causal:  # what each section's claims mean under a causal mask (an encoder's JSON is unchanged)
        out["causal"] = {s.key: s.causal_json(lm) for s in PAPER_SECTIONS}
    return out


COMMAND = Command("claims", "every claim of the paper with our verdict, from the cached results (computing what is missing)", _claims_args, cmd_claims)
