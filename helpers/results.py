"""Every claim of the paper in one table (the book's "Results at a glance" and ``python -m helpers claims``).

No rule lives here: the rows are the concatenation of each section's ``claims()``, computed from the
same runs, with the same sizes, as the chapters (cached on disk, so whatever a chapter already
computed is read back).

>>> rows = all_claims(lm)                                                # doctest: +SKIP
>>> rows[0].id, rows[0].verdict                                          # doctest: +SKIP
('prev-token-heads', 'reproduced')
"""
from __future__ import annotations

import argparse
from typing import Callable

from helpers.claims import Claim, by_id
from helpers.cluster import claims as cluster_claims
from helpers.cluster import run as cluster_run
from helpers.config import small_run
from helpers.core.models import LoadedModel
from helpers.coref import claims as coref_claims
from helpers.coref import run as coref_run
from helpers.pipeline.options import Command, load
from helpers.probe import claims as probe_claims
from helpers.probe import run as probe_run
from helpers.surface import claims as surface_claims
from helpers.surface import run as surface_run
from helpers.syntax import claims as syntax_claims
from helpers.syntax import run as syntax_run

# Section -> (chapter notebook, function computing its claims). The order is the paper's.
SectionClaims = Callable[..., list[Claim]]


def _size(given, full, small_value, small: bool | None):
    """``given`` if set, else the chapter's size: ``small_value`` in the small configuration
    (``small``; default :func:`~helpers.config.small_run`), else ``full``."""
    if given is not None:
        return given
    return small_value if (small_run() if small is None else small) else full


def surface_section(lm: LoadedModel, *, n_segments: int | None = None, small: bool | None = None, max_length: int = 128, data_dir=None,
                    cache_root=None, progress: bool = False, **_) -> list[Claim]:
    """§3 claims for the run of chapter 03 (``n_segments``: default the chapter's)."""
    n = _size(n_segments, surface_run.SEGMENTS, surface_run.SMALL_SEGMENTS, small)
    return surface_claims.claims(surface_run.run_surface(lm, n_segments=n, seed=0, max_length=max_length, data_dir=data_dir,
                                                                cache_root=cache_root, progress=progress))


def syntax_section(lm: LoadedModel, *, max_sentences: int | None = None, small: bool | None = None, max_length: int = 128, data_dir=None,
                   cache_root=None, progress: bool = False, **_) -> list[Claim]:
    """§4.2 claims for the runs of chapter 04 (GUM test, head chosen on GUM dev)."""
    limit = _size(max_sentences, None, syntax_run.SMALL_SENTENCES, small)
    kw = dict(max_sentences=limit, max_length=max_length, data_dir=data_dir, cache_root=cache_root, progress=progress)
    return syntax_claims.claims(syntax_run.run_heads(lm, "gum:test", **kw),
                                  syntax_run.run_heads(lm, "gum:dev", **kw))


def coref_section(lm: LoadedModel, *, max_documents: int | None = None, small: bool | None = None, max_length: int = 128, data_dir=None,
                  cache_root=None, progress: bool = False, **_) -> list[Claim]:
    """§4.3 claims for the whole-document runs of the coreference chapter."""
    limit = _size(max_documents, None, coref_run.SMALL_DOCUMENTS, small)
    kw = dict(setting=coref_claims.CLAIM_SETTING, max_documents=limit, max_length=max_length, data_dir=data_dir, cache_root=cache_root,
              progress=progress)
    return coref_claims.claims(coref_run.run_coref(lm, "dev", **kw), coref_run.run_coref(lm, "test", **kw))


def probe_section(lm: LoadedModel, *, max_sentences: int | None = None, seeds: tuple[int, ...] | None = None,
                  epochs: int | None = None, small: bool | None = None, max_length: int = 128, data_dir=None, cache_root=None,
                  progress: bool = False, **_) -> list[Claim]:
    """§5 claims for the run of chapter 05."""
    p = probe_run
    return probe_claims.claims(p.run_probes(lm, seeds=seeds or p.SEEDS, max_sentences=_size(max_sentences, None, p.SMALL_SENTENCES, small),
                                            epochs=_size(epochs, p.EPOCHS, p.SMALL_EPOCHS, small), max_length=max_length,
                                            data_dir=data_dir, cache_root=cache_root, progress=progress))


def cluster_section(lm: LoadedModel, *, n_segments: int | None = None, n_perm: int = 1000, small: bool | None = None,
                    max_length: int = 128, data_dir=None, cache_root=None, progress: bool = False, **_) -> list[Claim]:
    """§6 claims for the run of chapter 06."""
    n = _size(n_segments, surface_run.SEGMENTS, surface_run.SMALL_SEGMENTS, small)
    return cluster_claims.claims(cluster_run.run_cluster(lm, n_segments=n, seed=0, n_perm=n_perm, max_length=max_length,
                                                                data_dir=data_dir, cache_root=cache_root,
                                                                progress=progress))


SECTIONS: dict[str, tuple[str, SectionClaims]] = {
    "surface": ("03_surface", surface_section),
    "syntax": ("04_syntax", syntax_section),
    "coref": ("04_coref", coref_section),
    "probe": ("05_probe", probe_section),
    "cluster": ("06_cluster", cluster_section),
}


def section_claims(name: str, lm: LoadedModel, **sizes) -> list[Claim]:
    """The claims of one section (a key of :data:`SECTIONS`) for the chapter's run (``sizes``: overrides)."""
    return SECTIONS[name][1](lm, **sizes)


def all_claims(lm: LoadedModel, **sizes) -> list[Claim]:
    """Every section's claims, in the paper's order (ids are checked to be unique)."""
    rows = [c for name in SECTIONS for c in section_claims(name, lm, **sizes)]
    by_id(rows)
    return rows


# ------------------------------------------------------------------------------------- CLI


def _check_claims_inputs(args: argparse.Namespace) -> None:
    from helpers.pipeline.argtypes import check_corpora

    check_corpora(args, "gum:train", "gum:dev", "gum:test", "ewt:dev")
    for split in ("dev", "test"):
        coref_run.load_coref(split, data_dir=args.data_dir, cache_root=args.cache_dir)


def add_size_args(parser: argparse.ArgumentParser, *,
                  sentences_help: str = "first N sentences of each treebank for §4.2 and §5 (default: all, as the chapters)",
                  documents_help: str = "first N documents of each split for §4.3 (default: all, as the chapter)") -> None:
    """The options that shrink every section's run (``claims`` and ``compare`` share them)."""
    from helpers.pipeline.argtypes import max_length_int, positive_int

    parser.add_argument("--segments", type=positive_int, default=None, metavar="N",
                        help=f"segments for §3 and §6 (default {surface_run.SEGMENTS}, as the chapters)")
    parser.add_argument("--max-sentences", type=positive_int, default=None, metavar="N", help=sentences_help)
    parser.add_argument("--max-documents", type=positive_int, default=None, metavar="N", help=documents_help)
    parser.add_argument("--seeds", type=positive_int, default=None, metavar="N",
                        help=f"probe seeds 0 .. N-1 for §5 (default {len(probe_run.SEEDS)})")
    parser.add_argument("--epochs", type=positive_int, default=None, metavar="N",
                        help=f"probe epochs for §5 (default {probe_run.EPOCHS})")
    parser.add_argument("--permutations", type=positive_int, default=1000, metavar="N",
                        help="permutations of the §6 layer test (default 1000)")
    parser.add_argument("--max-length", type=max_length_int, default=128,
                        help="longest input in tokens (default 128, as in the paper); longer ones are skipped and counted")


def _claims_args(parser: argparse.ArgumentParser) -> None:
    add_size_args(parser)
    parser.set_defaults(check_inputs=_check_claims_inputs)


def cmd_claims(args: argparse.Namespace) -> dict:
    lm = load(args)
    sizes = dict(n_segments=args.segments, max_sentences=args.max_sentences, max_documents=args.max_documents,
                 seeds=tuple(range(args.seeds)) if args.seeds else None, epochs=args.epochs, n_perm=args.permutations,
                 max_length=args.max_length, small=False, data_dir=args.data_dir, cache_root=args.cache_dir, progress=not args.quiet)
    return {"model": lm.label, "claims": [c.to_json() for c in all_claims(lm, **sizes)]}


COMMAND = Command("claims", "every claim of the paper with our verdict, from the cached results (computing what is missing)", _claims_args, cmd_claims)
