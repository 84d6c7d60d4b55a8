"""Do the heads matter? (beyond the paper) as one record (:class:`helpers.section.Section`): chapter ``11_ablation``,
command ``ablate``.

Its run removes heads and the sinks' terms (:mod:`helpers.ablation.run`, cached) and sets the effects against the heads
the paper's probes single out: §3's positional and broad heads (the surface report's statistics), §4.2's best heads
and §4.3's coreference head (chosen on dev by those sections' runs), declared as its ``inputs``. An encoder's loss is
scored with the gradient analysis's masked-LM head (§3.2: the surface report's ``mlm_head``, cached).

>>> report = SECTION.run(lm, ctx, inputs=input_reports(SECTION, lm, ctx))   # doctest: +SKIP
>>> report.summary["delta"]                                                   # [layer][head]  # doctest: +SKIP
"""
from __future__ import annotations

import numpy as np

from helpers.ablation import claims as ablation_claims
from helpers.ablation.command import COMMAND
from helpers.ablation.run import PARTS, TREEBANK, paper_heads, run_ablation, sink_shares, summarise
from helpers.ablation.stats import PERMUTATIONS
from helpers.claims import Claim
from helpers.section import Section, SectionReport, Sizes, input_report, part
from helpers.surface.stats import SINK_SHARE

# The book's sizes on the CPU, chosen so that the chapter (the book's encoder, then the decoder's subset) stays within
# 15 % of the default book's cold build: every intervention is a forward pass of a sentence (72 single-head removals
# and 72 mean ablations, 72 all-but-one, 4 x 72 per-head sink tests for a 6 x 12 encoder, the held-out pruning curve's
# 10 importance passes and 30 forward passes, the sink tests and their matched controls on every head and on the
# sinks' heads). Measured on the shared 2-core CPU (issue 61): the encoder's run at these sizes costs about 57
# processor seconds (37 before the held-out curve, mean ablation and the controls), the decoder's about 100. On an
# accelerator every sentence of GUM test runs every part. The small ones for the notebook tests.
FULL = {"max_sentences": 24, "detail_sentences": 6}
SMALL = {"max_sentences": 4, "detail_sentences": 2}
# What the chapter's decoder runs on the CPU beside the book's encoder (a 30 x 9 decoder like SmolLM2 costs about 20
# times the default encoder a sentence): the single-head effects, importance, the sink tests on every head, on BOS's
# heads and per head, on 4 sentences (2 for the per-head tests): about 100 processor seconds for SmolLM2. All but
# one, the pruning curve and mean ablation are the encoder's only.
DECODER_CPU = {"parts": ("single", "importance", "sinks", "sink_heads"), "max_sentences": 4, "detail_sentences": 2}
# The ``ablate`` JSON's keys, in order (each sink's share beside the sink tests); a decoder's adds ``"causal"``.
JSON_KEYS = ("model", "loss", "loss_head", "treebank", "segments", "detail_segments", "tokens", "parts", "n_layers",
             "n_heads", "head_index", "base_loss", "delta", "delta_interval", "delta_relative", "importance",
             "importance_normalised", "only", "only_layer_min", "prune", "sinks", "sink_share", "spearman",
             "paper_heads", "settings", "claims",
             # issue 61: the relative changes' denominators, Michel's count and the loss's scale, mean ablation, the
             # matched control and the tests on each sink's heads, and whether each token is a sink of the model
             "detail_base_loss", "delta_significant", "delta_mean", "delta_mean_interval", "delta_mean_relative",
             "loss_scale", "sinks_control", "sink_sets", "sink_premise")
# ``everything``: every sentence runs every part (``None``: on an accelerator, not on the CPU; a size given: not).
_SETTINGS = {"parts": PARTS, "seed": 0, "n_perm": PERMUTATIONS, "paper_heads": True, "everything": None}


class AblationSectionReport(SectionReport):
    """The chapter's runs, each computed when first read: ``raw`` (:func:`~helpers.ablation.run.run_ablation`: every
    part's per-segment losses, cached), ``heads`` (the paper's heads, :func:`~helpers.ablation.run.paper_heads`),
    ``summary`` (:func:`~helpers.ablation.run.summarise`) and ``shares`` (each head's attention on each sink, §3's);
    ``to_json()`` is the ``ablate`` command's JSON."""

    surface = input_report()
    syntax = input_report()
    coref = input_report()

    @property
    def everything(self) -> bool:
        """Whether every sentence runs every part rather than the sizes: the setting ``everything``, by default on an
        accelerator and not on the CPU."""
        chosen = self.settings["everything"]
        return self.lm.device.type != "cpu" if chosen is None else bool(chosen)

    @part
    def raw(self) -> dict:
        s, ctx = self.settings, self.ctx
        head = None if self.lm.causal else self.surface.mlm_head  # the gradient analysis's (§3.2), cached
        every = self.everything
        return run_ablation(self.lm, ctx, max_sentences=None if every else s["max_sentences"],
                            detail_sentences=None if every else s["detail_sentences"], parts=s["parts"],
                            seed=s["seed"], max_length=s["max_length"], head=head, sink_heads=self.sink_heads)

    @property
    def sink_heads(self) -> dict | None:
        """``{kind: [layer][head] bool}``: the heads that put more than :data:`~helpers.surface.stats.SINK_SHARE` of
        their attention on each sink (§3's statistics), where the sink tests on a sink's heads are run; ``None``
        where the shares are not read (``--no-paper-heads``)."""
        if self.shares is None:
            return None
        return {k: (np.asarray(v) > SINK_SHARE).tolist() for k, v in self.shares.items()}

    @part
    def heads(self) -> dict[str, list[tuple[int, int]]]:
        if not self.settings["paper_heads"]:
            return {}
        return paper_heads(self.surface, self.syntax, self.coref)

    @part
    def shares(self) -> dict | None:
        return sink_shares(self.surface) if self.settings["paper_heads"] else None

    @part
    def summary(self) -> dict:
        return summarise(self.raw, self.heads, n_perm=self.settings["n_perm"], seed=self.settings["seed"],
                         shares=self.shares)

    def to_json(self) -> dict:
        """The keys of :data:`JSON_KEYS`, in that order (docs/command_line.md)."""
        raw, s = self.raw, self.settings
        head = {k: raw[k] for k in ("model", "loss", "loss_head", "treebank", "segments", "detail_segments", "tokens",
                                    "parts", "n_layers", "n_heads")}
        out = {**head, "head_index": "[layer][head], 0-based; labels are 1-based layer-head",
               **self.summary, "sink_share": self.shares,
               "settings": {"seed": s["seed"], "n_perm": s["n_perm"], "paper_heads": s["paper_heads"],
                            "max_length": s["max_length"], "everything": self.everything},
               "claims": [c.to_json() for c in _claims(self)]}
        return {**{k: out.pop(k) for k in JSON_KEYS}, **out}


def decoder_settings(lm) -> dict:
    """The overrides of the chapter's decoder run (``SECTION.run(decoder, ctx, **decoder_settings(decoder))``): on the
    CPU :data:`DECODER_CPU` (a subset); on an accelerator none (every part on every sentence)."""
    return dict(DECODER_CPU) if lm.device.type == "cpu" else {}


def _claims(report: AblationSectionReport) -> list[Claim]:
    return ablation_claims.claims(report.summary, report.raw, causal=report.lm.causal, seed=report.settings["seed"])


SECTION = Section(
    key="ablation", paper=None, chapter="11_ablation",
    sizes=Sizes(full={**FULL, **_SETTINGS}, small={**SMALL, **_SETTINGS}),
    runner=AblationSectionReport, claims=_claims, command=COMMAND, inputs=("surface", "syntax", "coref"),
    causal=("the loss is the decoder's own next-token loss over positions 0..n-2; the sink is the first position (BOS; "
            "without BOS, --no-bos, the first word's first token), whose row sees only itself and is never edited"),
    corpora=(TREEBANK,),  # its own pass; an encoder's head is the surface report's (§3's segments, read there)
    # the heads it sets against all heads: §4.2's chosen on GUM dev, §4.3's on OntoGUM dev (--no-paper-heads: none)
    when={"syntax:gum:dev": "paper_heads", "coref:ontogum:dev": "paper_heads"},
)
