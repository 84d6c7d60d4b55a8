"""Paper §5 as one record (:class:`helpers.section.Section`): chapter ``05_probe``, command ``probe``.

>>> report = SECTION.run(lm, ctx)                        # doctest: +SKIP
>>> report.table["rows"]["Attn"]["test"]["mean"]         # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.probe import claims as probe_claims
from helpers.probe.command import COMMAND
from helpers.probe.run import EPOCHS, SEEDS, SMALL_EPOCHS, SMALL_SENTENCES, probe_corpora, run_probes
from helpers.section import Section, SectionReport, Sizes, part


class ProbeSectionReport(SectionReport):
    """The chapter's run, computed when first read: ``table`` (:func:`~helpers.probe.run.run_probes`, cached:
    Table 3, every probe with each seed, on the treebanks of the setting ``treebanks``);
    ``to_json()`` is that table (the ``probe`` command's JSON)."""

    @part
    def table(self) -> dict:
        s, ctx = self.settings, self.ctx
        return run_probes(self.lm, ctx, seeds=tuple(s["seeds"]), epochs=s["epochs"], glove_path=s["glove"],
                          max_sentences=s["max_sentences"], max_length=s["max_length"], corpora=s["treebanks"])

    def to_json(self) -> dict:
        return self.table


def _claims(report: ProbeSectionReport) -> list[Claim]:
    return probe_claims.claims(report.table)


# The same in both configurations: the seeds, the word vectors (None: the model's input embeddings) and the
# treebanks ({"train": spec, "dev": spec, <test name>: spec ...}: the paper's).
_SETTINGS = {"seeds": SEEDS, "glove": None, "treebanks": probe_corpora()}
SECTION = Section(
    key="probe", paper=probe_claims.PAPER_SECTION, chapter="05_probe",
    sizes=Sizes(full={"max_sentences": None, "epochs": EPOCHS, **_SETTINGS},
                small={"max_sentences": SMALL_SENTENCES, "epochs": SMALL_EPOCHS, **_SETTINGS}),
    runner=ProbeSectionReport, claims=_claims, command=COMMAND, corpora=tuple(_SETTINGS["treebanks"].values()),
    causal=("as for an encoder, on the prefix: a word's features from the maps are zero for the candidates after it "
            "(it does not see them), those from the transposes are the attention later words give it; ROOT's features "
            "are the attention to BOS (none without BOS), [SEP]'s absent (zero)"),
)
