"""Paper §4.3 as one record (:class:`helpers.section.Section`): chapter ``04_coref``, command ``coref``.

>>> report = SECTION.run(lm, ctx)                # doctest: +SKIP
>>> report.dev.best_head()                       # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.coref import claims as coref_claims
from helpers.coref.command import COMMAND
from helpers.coref.run import SMALL_DOCUMENTS, CorefRun, Setting, coref_json, run_coref
from helpers.section import Section, SectionReport, Sizes, part


class CorefSectionReport(SectionReport):
    """The chapter's runs (:func:`~helpers.coref.run.run_coref`, maps cached), each computed when first read:
    ``dev`` and ``test`` with each document truncated to its first window (the paper's setting), and
    ``dev_windows`` and ``test_windows`` over whole documents (the claim's setting,
    :data:`~helpers.coref.claims.CLAIM_SETTING`). :meth:`split_run` gives any split in either setting (each
    computed once); ``to_json(split, select_on, setting)`` is the ``coref`` command's JSON."""

    def split_run(self, split: str, setting: Setting = "truncated") -> CorefRun:
        """The run over the GUM split ``split`` in ``setting``, at this report's settings (computed once)."""
        runs = vars(self).setdefault("_runs", {})
        if (split, setting) not in runs:
            s, ctx = self.settings, self.ctx
            with ctx.active():
                runs[split, setting] = run_coref(self.lm, split, ctx, setting=setting, max_documents=s["max_documents"],
                                                 max_length=s["max_length"])
        return runs[split, setting]

    @part
    def dev(self) -> CorefRun:
        return self.split_run("dev")

    @part
    def test(self) -> CorefRun:
        return self.split_run("test")

    @part
    def dev_windows(self) -> CorefRun:
        return self.split_run("dev", coref_claims.CLAIM_SETTING)

    @part
    def test_windows(self) -> CorefRun:
        return self.split_run("test", coref_claims.CLAIM_SETTING)

    def to_json(self, split: str = "test", select_on: str = "dev", setting: Setting = "truncated") -> dict:
        test = self.split_run(split, setting)  # scored first, as the command always did
        return coref_json(self.lm.label, test, self.split_run(select_on, setting), select_on=select_on)


def _claims(report: CorefSectionReport) -> list[Claim]:
    return coref_claims.claims(report.dev_windows, report.test_windows)


SECTION = Section(
    key="coref", paper=coref_claims.PAPER_SECTION, chapter="04_coref",
    sizes=Sizes(full={"max_documents": None}, small={"max_documents": SMALL_DOCUMENTS}),
    runner=CorefSectionReport, claims=_claims, command=COMMAND, corpora=("ontogum:dev", "ontogum:test"),
    causal=("as for an encoder: antecedents precede their mention, so its head word sees every candidate (the head "
            "words of earlier mentions); with every word as a candidate, the words before it"),
)
