"""Paper §6 as one record (:class:`helpers.section.Section`): chapter ``06_cluster``, command ``cluster``.

§6 reads three other sections, declared as its ``inputs`` and handed in as their reports: §3's statistics
of its segments (the heads' behaviours), and the heads §4.2 and §4.3 find on GUM dev (marked in the map).

>>> report = SECTION.run(lm, ctx, inputs=input_reports(SECTION, lm, ctx))   # doctest: +SKIP
>>> report.result.similarity["p_value"]                                      # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.cluster import claims as cluster_claims
from helpers.cluster.command import COMMAND
from helpers.cluster.run import ClusterResult, linguistic_heads, run_cluster
from helpers.cluster.stats import PERMUTATIONS
from helpers.pipeline.segments import DEFAULT_SOURCE, SEGMENTS, SEGMENTS_CORPUS, SMALL_SEGMENTS
from helpers.section import Section, SectionReport, Sizes, part


class ClusterSectionReport(SectionReport):
    """The chapter's run, each part computed when first read: ``result`` (:func:`~helpers.cluster.run.run_cluster`:
    distances cached, MDS, behaviours from the §3 report, the layer test) and ``linguistic`` (the heads of
    the §4.2 and §4.3 reports, :func:`~helpers.cluster.run.linguistic_heads`); ``to_json(linguistic=...)`` is the
    ``cluster`` command's JSON (without ``linguistic``, the §4.2 and §4.3 reports are not read)."""

    @part
    def result(self) -> ClusterResult:
        s, ctx = self.settings, self.ctx
        return run_cluster(self.lm, self.inputs["surface"].statistics, ctx, n_segments=s["n_segments"], seed=s["seed"],
                           max_length=s["max_length"], segments_from=s["segments_from"], n_perm=s["n_perm"])

    @part
    def linguistic(self) -> dict[str, str]:
        return linguistic_heads(self.inputs["syntax"].specialised_heads(), self.inputs["coref"].dev.best_head())

    def to_json(self, linguistic: bool = True) -> dict:
        return self.result.to_json(self.linguistic if linguistic else {})


def _claims(report: ClusterSectionReport) -> list[Claim]:
    return cluster_claims.claims(report.result)


_SETTINGS = {"seed": 0, "segments_from": DEFAULT_SOURCE, "n_perm": PERMUTATIONS}  # the same in both configurations
SECTION = Section(
    key="cluster", paper=cluster_claims.PAPER_SECTION, chapter="06_cluster",
    sizes=Sizes(full={"n_segments": SEGMENTS, **_SETTINGS}, small={"n_segments": SMALL_SEGMENTS, **_SETTINGS}),
    runner=ClusterSectionReport, claims=_claims, command=COMMAND, inputs=("surface", "syntax", "coref"),
    causal=("as for an encoder, on the prefix: the keys a query cannot see weigh zero in both heads, so they add "
            "nothing to the Jensen-Shannon divergence; the behaviours §3 does not define for a decoder ([SEP], next "
            "token) mark no head"),
    corpora=(SEGMENTS_CORPUS,),
    # the heads it marks: §4.2's chosen on GUM dev, §4.3's on OntoGUM dev (--no-linguistic: none)
    when={"syntax:gum:dev": "linguistic", "coref:ontogum:dev": "linguistic"},
)
