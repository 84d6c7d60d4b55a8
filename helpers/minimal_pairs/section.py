"""Do the syntax heads do syntax? (beyond the paper) as one record (:class:`helpers.section.Section`): chapter
``12_minimal_pairs``, command ``pairs``.

Its run scores BLiMP's minimal pairs with the model (:mod:`helpers.minimal_pairs.run`, cached) and removes the heads the
paper's probes single out, found by the §4.2 and §4.3 runs of the same model on their dev sets: their reports are its
``inputs``, read only when the model can score a sentence and the heads are asked for. A decoder scores by its own
next-token probabilities, an encoder with its own masked-LM head by pseudo-log-likelihood; an encoder without one
(the offline default) is not graded, and every claim says why.

>>> report = SECTION.run(lm, ctx, inputs=input_reports(SECTION, lm, ctx))   # doctest: +SKIP
>>> report.summary["grammar"]["overall"]["accuracy"]                         # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.minimal_pairs import claims as pairs_claims
from helpers.minimal_pairs.command import COMMAND
from helpers.minimal_pairs.run import ACCELERATOR_HEAD_PAIRS, DRAWS, HEAD_READS, METHOD, paper_heads, run_pairs, summarise
from helpers.minimal_pairs.scoring import not_scorable_reason
from helpers.minimal_pairs.stats import BOOTSTRAP
from helpers.section import Section, SectionReport, Sizes, input_report, part

# The book's sizes on the CPU, chosen so that the chapter (on the decoder, SmolLM2: 30 layers x 9 heads) costs at most
# 10 % of the default book's cold build (about 140 of 1,400 processor seconds) on the 2-core CPU: the first 3 pairs
# of each of the 67 paradigms for the model's grammar (201 pairs), the first 1 for the heads (67 pairs: the matrix's
# 18 removals, 8 control sets a group, the top 10 heads, mean ablation). Measured 2026-11-28 on the shared 2-core
# Xeon (one torch thread), the chapter executed alone with its own results not cached (the decoder's §4.2 and §4.3
# runs cached, as the sinks chapter leaves them): 126 and 130 processor seconds at a load average of 3 to 8, the
# removals on the head pairs about half of it. On an accelerator every pair for the grammar and the first
# :data:`~helpers.minimal_pairs.run.ACCELERATOR_HEAD_PAIRS` for the heads. The small ones for the notebook tests:
# the target phenomena and one more.
FULL = {"pairs": 3, "head_pairs": 1, "paradigms": None, "phenomena": None, "draws": DRAWS}
SMALL = {"pairs": 1, "head_pairs": 1, "paradigms": None,
         "phenomena": ("determiner_noun_agreement", "subject_verb_agreement", "anaphor_agreement", "binding",
                       "island_effects"), "draws": 2}
# ``everything``: the accelerator's sizes (``None``: on an accelerator, not on the CPU; a size given: not).
_SETTINGS = {"seed": 0, "heads": True, "everything": None, "n_boot": BOOTSTRAP}
# The ``pairs`` JSON's keys, in order; a decoder's adds ``"causal"``.
JSON_KEYS = ("model", "origin", "scorer", "applicable", "reason", "corpus", "settings", "grammar", "heads", "matrix",
             "groups", "claims")


class PairsSectionReport(SectionReport):
    """The chapter's runs, each computed when first read: ``reason`` (why the model cannot score a sentence, or
    ``None``), ``heads`` (:func:`~helpers.minimal_pairs.run.paper_heads`, from the input reports ``syntax`` and
    ``coref``), ``run`` (:func:`~helpers.minimal_pairs.run.run_pairs`, cached), ``published`` (BLiMP's published
    results) and ``summary`` (:func:`~helpers.minimal_pairs.run.summarise`); ``to_json()`` is the ``pairs`` command's
    JSON."""

    syntax = input_report()
    coref = input_report()

    @property
    def everything(self) -> bool:
        """Whether the accelerator's sizes hold: the setting ``everything``, by default on an accelerator and not on
        the CPU."""
        chosen = self.settings["everything"]
        return self.lm.device.type != "cpu" if chosen is None else bool(chosen)

    @property
    def sizes(self) -> dict:
        """``{"pairs", "head_pairs"}`` per paradigm as run (``None``: all)."""
        if self.everything:
            return {"pairs": None, "head_pairs": ACCELERATOR_HEAD_PAIRS}
        return {"pairs": self.settings["pairs"], "head_pairs": self.settings["head_pairs"]}

    @part
    def reason(self) -> str | None:
        return not_scorable_reason(self.lm)

    @part
    def heads(self) -> dict | None:
        if self.reason or not self.settings["heads"]:
            return None
        return paper_heads(self.syntax, self.coref)

    @part
    def run(self):
        s = self.settings
        return run_pairs(self.lm, self.ctx, paradigms=s["paradigms"], phenomena=s["phenomena"], **self.sizes,
                         heads=self.heads, draws=s["draws"], seed=s["seed"])

    @part
    def published(self) -> dict:
        from helpers.data.blimp import published

        return published(self.ctx.data_dir)

    @part
    def summary(self) -> dict:
        return summarise(self.run, None if self.reason else self.published, n_boot=self.settings["n_boot"],
                         seed=self.settings["seed"])

    def corpus(self) -> dict:
        """What the run read: BLiMP's commit (its folder's ``COMMIT``), the paradigms and phenomena chosen, and the
        published results set beside ours."""
        from helpers.context import data_folder
        from helpers.data.blimp import BLIMP, PUBLISHED_MODELS

        commit = data_folder(self.ctx.data_dir) / BLIMP / "COMMIT"
        sel = self.run.selection
        return {"name": "BLiMP (Warstadt et al. 2020, CC BY 4.0)",
                "commit": commit.read_text().strip() if commit.is_file() else None,
                "paradigms": sel.paradigms, "phenomena": sel.phenomena,
                "phenomenon_of": sel.phenomenon_of,
                "published": {"models": dict(PUBLISHED_MODELS), "human": "individual agreement with the labels"}}

    def to_json(self) -> dict:
        """The keys of :data:`JSON_KEYS`, in that order (docs/command_line.md)."""
        s, summary = self.settings, self.summary
        out = {"model": self.lm.label, "origin": self.lm.description, "scorer": self.run.kind,
               "applicable": self.reason is None, "reason": self.reason, "corpus": self.corpus(),
               "settings": {**self.sizes, "paradigms": None if s["paradigms"] is None else list(s["paradigms"]),
                            "phenomena": None if s["phenomena"] is None else list(s["phenomena"]),
                            "draws": s["draws"], "seed": s["seed"], "heads": s["heads"], "method": METHOD,
                            "everything": self.everything, "bootstrap": s["n_boot"]},
               "grammar": summary["grammar"], "heads": summary["heads"], "matrix": summary["matrix"],
               "groups": summary["groups"], "claims": [c.to_json() for c in _claims(self)]}
        return {k: out[k] for k in JSON_KEYS}


def _claims(report: PairsSectionReport) -> list[Claim]:
    return pairs_claims.claims(report.summary)


SECTION = Section(
    key="minimal_pairs", paper=None, chapter="12_minimal_pairs",
    sizes=Sizes(full={**FULL, **_SETTINGS}, small={**SMALL, **_SETTINGS}),
    runner=PairsSectionReport, claims=_claims, command=COMMAND, inputs=("syntax", "coref"),
    causal=("a sentence's score is the sum over its tokens after BOS of log P(token | the tokens before it), the "
            "sentence as ' ' + text after BOS (lm-evaluation-harness's BLiMP convention); a pair is right when its "
            "good sentence scores strictly higher"),
    corpora=(),  # BLiMP, read by its own command check (helpers.data.blimp); the heads' runs read their dev sets
    when={f"syntax:{HEAD_READS[0]}": "heads", f"coref:{HEAD_READS[1]}": "heads"},
)
