"""Attention sinks (beyond the paper) as one record (:class:`helpers.section.Section`): chapter ``09_sinks``,
command ``sinks``.

Its run measures ``alpha_1`` (attention to the first position) per head, from weights and from norm maps, on the
§3 segments, for any model; for a decoder also without its BOS token. It reads three other sections, declared as
its ``inputs``, for the same model: §3 (where attention goes by layer and the gradients of the model's own loss),
§4.2 (the best syntactic heads) and §4.3 (the best coreference head). The chapter runs it on a decoder
(:func:`helpers.sinks.decoder.chapter_decoder`) and on the book's encoder.

>>> report = SECTION.run(lm, ctx, inputs=input_reports(SECTION, lm, ctx))   # doctest: +SKIP
>>> report.sinks.to_json()["sink_rate"]                                      # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.pipeline.segments import DEFAULT_SOURCE, SEGMENTS, SEGMENTS_CORPUS, SMALL_SEGMENTS
from helpers.section import Section, SectionReport, Sizes, input_report, part
from helpers.sinks import claims as sinks_claims
from helpers.sinks.command import COMMAND
from helpers.sinks.run import SinksReport, run_sinks, without_bos


class SinksSectionReport(SectionReport):
    """The chapter's runs, each computed when first read: ``sinks`` (:func:`~helpers.sinks.run.run_sinks`: ``alpha_1``
    per head from weights and norms, cached), ``no_bos`` (the same for a decoder loaded without its BOS token;
    ``None`` for an encoder), and the input reports ``surface``, ``syntax`` and ``coref``; ``to_json(epsilon=...)``
    is ``sinks``' (the ``sinks`` command's JSON)."""

    surface = input_report()
    syntax = input_report()
    coref = input_report()

    def _run(self, lm) -> SinksReport:
        s, ctx = self.settings, self.ctx
        return run_sinks(lm, ctx, n_segments=s["n_segments"], seed=s["seed"], max_length=s["max_length"],
                         segments_from=s["segments_from"], batch_size=s["batch_size"])

    @part
    def sinks(self) -> SinksReport:
        return self._run(self.lm)

    @part
    def no_bos(self) -> SinksReport | None:
        if not self.lm.causal:
            return None
        return self._run(self.lm if not self.lm.bos else without_bos(self.lm))

    def to_json(self, *, epsilon: float = sinks_claims.EPSILON) -> dict:
        return self.sinks.to_json(epsilon=epsilon)


def _claims(report: SinksSectionReport) -> list[Claim]:
    """The chapter's claims; a decoder run without BOS (``--no-bos``) has nothing to set its no-BOS run against, so
    it makes no claim about it."""
    sinks, lm = report.sinks, report.lm
    no_bos = report.no_bos if lm.causal and lm.bos else None
    return sinks_claims.claims(sinks.weights, sinks.norms, report.surface.gradients,
                               None if no_bos is None else no_bos.weights, causal=lm.causal, segments=sinks.segments,
                               no_bos_segments=None if no_bos is None else no_bos.segments)


_SETTINGS = {"seed": 0, "segments_from": DEFAULT_SOURCE, "batch_size": 32}  # §3's segments (the same draw)
SECTION = Section(
    key="sinks", paper=None, chapter="09_sinks",
    sizes=Sizes(full={"n_segments": SEGMENTS, **_SETTINGS}, small={"n_segments": SMALL_SEGMENTS, **_SETTINGS}),
    runner=SinksSectionReport, claims=_claims, command=COMMAND, inputs=("surface", "syntax", "coref"),
    causal=("alpha_1 is the mean over every query of its attention to position 1 (every query sees it): a decoder's "
            "BOS, or without BOS (--no-bos) its first word's first token; the norm-based share divides each row of "
            "||alpha f(x)|| by its total over the visible prefix"),
    corpora=(SEGMENTS_CORPUS,),
)
