"""Context mixing (beyond the paper) as one record (:class:`helpers.section.Section`): chapter ``10_mixing``,
command ``mixing``.

Its run scores each context-mixing map of :mod:`helpers.mixing.maps` (weights, norms, rollout, value zeroing per
layer and per head, ALTI and its rollout) with the paper's probes: §4.2's single-unit parsers, §4.3's antecedent
selection and §5's attention-only probe (:mod:`helpers.mixing.run`, cached per method). It reads no other section's
report: the probes' scorers are the sections' own functions, applied to other maps.

>>> report = SECTION.run(lm, ctx)                                                  # doctest: +SKIP
>>> report.scores["alti"]["syntax"]["relations"]["all"]["held_out_accuracy"]       # doctest: +SKIP
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.mixing import claims as mixing_claims
from helpers.mixing.command import COMMAND
from helpers.mixing.maps import METHODS
from helpers.mixing.run import COREF_SPLITS, TREEBANKS, example_maps, example_sentence, run_mixing
from helpers import paper
from helpers.pipeline.extraction import encode_treebank
from helpers.section import Section, SectionReport, Sizes, part
from helpers.syntax.stats import ALL

# The book's sizes: §4.3 on each split's first documents until their windows hold 150 evaluated mentions (documents
# hold 0 to 21: 16 dev and 17 test documents for the default model), so that its interval over documents has width;
# per-head value zeroing on 30 sentences of GUM dev and of test, drawn from the whole split. Chosen so that the
# chapter (the book's model, then the decoder at the small sizes) costs at most 15 % of the default book's cold build
# on the 2-core CPU: value zeroing reruns every layer T times a sentence (about 20 us of CPU a rerun for the default
# 6 x 12 model: 0.07 s a 25-token sentence, per head 12 times more; in a coreference window only the mentions' rows,
# about 10 of 128). Measured 2026-11-28 at commit bd60f22 on the shared 2-core CPU (1 torch thread), the chapter
# executed alone with a cold cache: 157 s of CPU at a load average of 1 to 5, 173 s at 5 to 6 (90 s at the earlier
# sizes); the small ones for the notebook tests.
FULL = {"max_sentences": 50, "train_sentences": 100, "max_documents": None, "min_mentions": 150, "heads_sentences": 30,
        "heads_documents": 0, "epochs": 3}
SMALL = {"max_sentences": 8, "train_sentences": 16, "max_documents": 1, "min_mentions": None, "heads_sentences": 1,
         "heads_documents": 0, "epochs": 2}
# What the chapter's decoder runs on the CPU beside the book's encoder: the maps of one forward pass and per-head
# value zeroing on its subset; value zeroing per layer and ALTI cost a 30-layer decoder like SmolLM2 about 4 s and
# 1.4 s of CPU a sentence (measured), minutes at any useful size. On an accelerator it runs every method.
DECODER_CPU_METHODS = ("attention", "norms", "rollout", "value_zeroing_heads")
_SETTINGS = {"methods": METHODS, "seeds": (0, 1, 2)}  # the same in both configurations


class MixingSectionReport(SectionReport):
    """The chapter's runs, each computed when first read: ``scores`` (:func:`~helpers.mixing.run.run_mixing`: every
    method's §4.2, §4.3 and §5 scores, cached per method) and ``example`` (each method's unit for all relations drawn
    on the chapter's example sentence, :func:`~helpers.mixing.run.example_sentence`); ``to_json()`` is the ``mixing``
    command's JSON."""

    @part
    def scores(self) -> dict[str, dict]:
        s = self.settings
        return run_mixing(self.lm, self.ctx, methods=s["methods"], max_sentences=s["max_sentences"],
                          max_documents=s["max_documents"], train_sentences=s["train_sentences"],
                          heads_sentences=s["heads_sentences"], heads_documents=s["heads_documents"],
                          seeds=tuple(s["seeds"]), epochs=s["epochs"], max_length=s["max_length"],
                          min_mentions=s["min_mentions"])

    @part
    def example(self) -> dict:
        """``{"sentence": id, "words": [...], "maps": {method: {"unit", "words", "map"}}}``."""
        ctx = self.ctx
        sentences, batch, _ = encode_treebank(self.lm, TREEBANKS["test"], max_sentences=self.settings["max_sentences"],
                                              max_length=self.settings["max_length"], data_dir=ctx.data_dir,
                                              cache_root=ctx.cache_dir)
        ex = example_sentence(sentences, batch)
        return {"sentence": sentences[ex.index].sent_id, "words": list(ex.words),
                "maps": example_maps(self.lm, self.scores, ex)}

    def to_json(self) -> dict:
        """``{"model", "methods", "settings", "scores": {method: ...}, "paper"}`` (docs/command_line.md)."""
        s = self.settings
        row, coref = paper.TABLE1[ALL], paper.TABLE2[paper.COREF_HEAD_ROW]
        return {"model": self.lm.label, "methods": list(self.scores),
                "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()},
                "scores": self.scores,
                "paper": {"syntax_all": {"head": row.head, "accuracy": row.accuracy, "baseline": row.baseline},
                          "coref": {"head": paper.COREF_HEAD.value, "accuracy": coref.all},
                          "probe_attn": paper.TABLE3["Attn"]}}


def decoder_settings(lm) -> dict:
    """The overrides of the chapter's decoder run (``SECTION.run(decoder, ctx, **decoder_settings(decoder))``): on the
    CPU only :data:`DECODER_CPU_METHODS`; on an accelerator none (every method)."""
    return {"methods": DECODER_CPU_METHODS} if lm.device.type == "cpu" else {}


def _claims(report: MixingSectionReport) -> list[Claim]:
    return mixing_claims.claims(report.scores)


SECTION = Section(
    key="mixing", paper=None, chapter="10_mixing",
    sizes=Sizes(full={**FULL, **_SETTINGS}, small={**SMALL, **_SETTINGS}),
    runner=MixingSectionReport, claims=_claims, command=COMMAND,
    causal=("every map is the prefix's (its upper triangle 0; rows normalised over the positions a row sees); the "
            "probes as in §4.2, §4.3 and §5 under a causal mask; the first position is BOS, and there is no [SEP], "
            "so the sinks are BOS's share alone"),
    corpora=(*TREEBANKS.values(), *(f"ontogum:{s}" for s in COREF_SPLITS)),
)
