"""Paper §4.2 as one record (:class:`helpers.section.Section`): chapter ``04_syntax``, command ``heads``.

>>> report = SECTION.run(lm, ctx)                          # doctest: +SKIP
>>> report.test.scores.table()["det"]["best_head"]         # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.section import Section, SectionReport, Sizes, part
from helpers.syntax import claims as syntax_claims
from helpers.syntax.command import COMMAND
from helpers.syntax.run import SMALL_SENTENCES, HeadsRun, heads_json, run_heads, table1_relations
from helpers.syntax.stats import HeadScores

POSSESSIVE = "nmod:poss"  # the UD relation of the paper's possessive convention (§4.2: 's counts as the dependent)
# The chapter's runs: the report's parts and their treebanks (the record's corpora).
RUNS = {"test": "gum:test", "dev": "gum:dev", "ewt": "ewt:dev"}


class SyntaxSectionReport(SectionReport):
    """The chapter's runs (:func:`~helpers.syntax.run.run_heads`, maps cached), each computed when first read:
    ``test`` (GUM test, Table 1 and the claims), ``dev`` (GUM dev, where heads are chosen) and ``ewt``
    (UD English EWT dev); ``max_sentences`` is the limit they were read with (``None``: all). From them:
    ``relations`` (Table 1's), ``held_out`` (heads chosen on dev, scored on test, with bootstrap intervals:
    what the claims and the chapter's held-out table read) and ``possessive`` (GUM test scored with the
    paper's possessive convention). ``to_json(corpus)`` is the ``heads`` command's JSON: the same run on any
    corpus or CoNLL-U file."""

    @property
    def max_sentences(self) -> int | None:
        return self.settings["max_sentences"]

    def _run(self, corpus: str, variants: tuple[str, ...] = ()) -> HeadsRun:
        s, ctx = self.settings, self.ctx
        return run_heads(self.lm, corpus, ctx, max_sentences=s["max_sentences"], max_length=s["max_length"],
                         word_mode=s["word_mode"], variants=variants)

    def to_json(self, corpus: str = RUNS["test"]) -> dict:
        with self.ctx.active():
            return heads_json(self.lm.label, self._run(corpus))

    @part
    def test(self) -> HeadsRun:
        return self._run(RUNS["test"], variants=(POSSESSIVE,))

    @part
    def dev(self) -> HeadsRun:
        return self._run(RUNS["dev"])

    @part
    def ewt(self) -> HeadsRun:
        return self._run(RUNS["ewt"])

    @part
    def relations(self) -> list[str]:
        """Table 1's relations on GUM test (:func:`~helpers.syntax.run.table1_relations`)."""
        return table1_relations(self.test.scores)

    @part
    def held_out(self) -> list[dict]:
        """The head of each relation chosen on GUM dev and scored on GUM test, beside the in-sample best head,
        both with 95% bootstrap intervals, for Table 1's relations and the claims' (:func:`~helpers.syntax.claims.held_out`)."""
        return syntax_claims.held_out(self.test, self.dev)

    @part
    def statements(self) -> dict:
        """The share of bootstrap replicates in which each statement over Table 1's relations holds (relation-specific
        heads for at least half of them; the dependent attending to its head for all but a few):
        :func:`~helpers.syntax.claims.statement_shares`."""
        return syntax_claims.statement_shares(self.test.scores, self.dev.scores, self.relations, self.held_out)

    @part
    def possessive(self) -> HeadScores:
        """GUM test scored with the paper's convention for :data:`POSSESSIVE` (a possessor followed by 's is
        judged by the prediction made for the 's: :class:`~helpers.syntax.stats.HeadScorer`), from the test run's
        predictions (scored beside its plain scores: no second pass over its maps)."""
        return self.test.variants[POSSESSIVE]

    def best_heads(self) -> dict[str, str]:
        """``{relation: "L-H"}``: on GUM dev, the best head of each of Table 1's relations (``all`` left out), as
        :meth:`specialised_heads` reads them before its margin (what the ablation chapter sets against all heads)."""
        table = self.dev.scores.table()
        return {rel: table[rel]["best_head"] for rel in table1_relations(self.dev.scores)[1:]}

    def specialised_heads(self) -> dict[str, list[str]]:
        """``{"L-H": [relation, ...]}``: on GUM dev, the best head of each Table-1 relation where it beats the
        offset baseline by at least :data:`~helpers.syntax.claims.SPECIALISED_MARGIN` points (what §6 marks)."""
        table = self.dev.scores.table()
        found: dict[str, list[str]] = {}
        for rel in table1_relations(self.dev.scores)[1:]:
            if table[rel]["accuracy"] - table[rel]["baseline_accuracy"] >= syntax_claims.SPECIALISED_MARGIN:
                found.setdefault(table[rel]["best_head"], []).append(rel)
        return found


def _claims(report: SyntaxSectionReport) -> list[Claim]:
    return syntax_claims.claims(report.relations, report.held_out, report.statements)


_SETTINGS = {"word_mode": "mean"}  # the same in both configurations: a split word's row is the mean over its tokens
SECTION = Section(
    key="syntax", paper=syntax_claims.PAPER_SECTION, chapter="04_syntax",
    sizes=Sizes(full={"max_sentences": None, **_SETTINGS}, small={"max_sentences": SMALL_SENTENCES, **_SETTINGS}),
    runner=SyntaxSectionReport, claims=_claims, command=COMMAND, corpora=tuple(RUNS.values()),
    causal=("a word's candidates are the other words it can see: the words before it (dependent-to-head) or the "
            "words after it, which see it (head-to-dependent); a word with none (the first, the last) predicts nothing "
            "and counts as a miss, in the same denominator as for an encoder; the offset baseline as for an encoder"),
)
