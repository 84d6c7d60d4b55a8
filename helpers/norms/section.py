"""The norms chapter (beyond the paper) as one record (:class:`helpers.section.Section`): chapter
``07_norms``, command ``norms``.

It reads two other sections, declared as its ``inputs``: the §3 report (its gradients, and the same
segments' statistics) and the §4.2 report (the best heads on GUM test under weight maps).

>>> report = SECTION.run(lm, ctx, inputs=input_reports(SECTION, lm, ctx))   # doctest: +SKIP
>>> report.stats.layer_share("norms", "sep")                                 # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.norms import claims as norms_claims
from helpers.norms.command import COMMAND
from helpers.norms.run import NormsReport, norms_json, run_norms, run_table1_norms, table1_comparison
from helpers.norms.stats import NormStats
from helpers.pipeline.segments import SEGMENTS, SEGMENTS_CORPUS, SMALL_SEGMENTS
from helpers.section import Section, SectionReport, Sizes, input_report, part
from helpers.syntax.stats import HeadScores


TABLE1_TREEBANK = "gum:test"  # Table 1 re-scored on norm maps: the syntax chapter's test treebank


class NormsSectionReport(SectionReport):
    """The chapter's runs, each computed when first read: ``norms`` (:func:`~helpers.norms.run.run_norms`:
    weights and norms over the surface chapter's segments, cached; ``stats`` is its statistics), ``surface``
    and ``syntax`` (the input reports), ``norms_test`` (every head scored on norm maps of GUM test, with
    the syntax chapter's sentence limit) and ``table1`` (:func:`~helpers.norms.run.table1_comparison` on the
    syntax chapter's relations); ``to_json()`` is ``norms``' (:func:`~helpers.norms.run.norms_json`: the ``norms``
    command's JSON, which reads no input)."""

    surface = input_report()
    syntax = input_report()

    @part
    def norms(self) -> NormsReport:
        s, ctx = self.settings, self.ctx
        return run_norms(self.lm, ctx, n_segments=s["n_segments"], seed=s["seed"], max_length=s["max_length"])

    @property
    def stats(self) -> NormStats:
        return self.norms.stats

    @part
    def norms_test(self) -> HeadScores:
        ctx = self.ctx
        return run_table1_norms(self.lm, TABLE1_TREEBANK, ctx, max_sentences=self.syntax.max_sentences,
                                max_length=self.settings["max_length"])

    @part
    def table1(self) -> list[dict]:
        return table1_comparison(self.syntax.test.scores, self.norms_test, self.syntax.relations)

    def to_json(self) -> dict:
        return norms_json(self.norms)


def _claims(report: NormsSectionReport) -> list[Claim]:
    return norms_claims.claims(report.stats, report.surface.gradients, report.table1)


SECTION = Section(
    key="norms", paper=None, chapter="07_norms",
    sizes=Sizes(full={"n_segments": SEGMENTS, "seed": 0}, small={"n_segments": SMALL_SEGMENTS, "seed": 0}),
    runner=NormsSectionReport, claims=_claims, command=COMMAND, inputs=("surface", "syntax"),
    causal=("as for an encoder, on the prefix (a norm ||alpha f(x)|| is zero where the weight is); the first position "
            "takes [CLS]'s place; [SEP]'s shares are absent (left out, named under 'undefined'), its claim not "
            "applicable"),
    corpora=(SEGMENTS_CORPUS, TABLE1_TREEBANK),
    when={TABLE1_TREEBANK: "table1"},  # read for Table 1's norms (the chapter's and the claims' part), not the command's
)
