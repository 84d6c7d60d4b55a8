"""Paper §3 as one record (:class:`helpers.section.Section`): chapter ``03_surface``, command ``surface``.

>>> report = SECTION.run(lm, ctx)            # doctest: +SKIP
>>> report.stats.heads_above("prev")         # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from helpers.claims import Claim
from helpers.core.encoding import EncodedBatch, encode_ids
from helpers.core.extract import attention_for
from helpers.pipeline.segments import (DEFAULT_SOURCE, HELD_OUT_SEGMENTS_CORPUS, SEGMENTS, SEGMENTS_CORPUS, SMALL_SEGMENTS,
                                      build_segments)
from helpers.section import Section, SectionReport, Sizes, part
from helpers.surface import claims as surface_claims
from helpers.surface.command import COMMAND
from helpers.surface.run import (SurfaceReport, cached_surface_statistics, example_segment, figure1_heads,
                                 figure1_undefined, gradient_head, run_surface)
from helpers.surface.stats import SurfaceStats


@dataclass
class Figure1:
    """Figure 1's example, chosen by rule: ``heads`` maps each pattern to its 0-based ``(layer, head)``
    (:func:`~helpers.surface.run.figure1_heads`); ``position`` is the example segment's place in the run's
    batch (:func:`~helpers.surface.run.example_segment`), ``tokens`` its tokens and ``attn`` its token-level
    maps ``[layer, head, query, key]``; ``undefined`` maps each pattern the model does not have (a decoder: no
    next token in view, no [SEP]) to its reason (:func:`~helpers.surface.run.figure1_undefined`)."""

    heads: dict[str, tuple[int, int]]
    position: int
    tokens: list[str]
    attn: np.ndarray
    undefined: dict[str, str] = field(default_factory=dict)


class SurfaceSectionReport(SectionReport):
    """The chapter's run, each part computed when first read: ``stats`` (the streaming statistics, cached;
    :meth:`statistics` gives those of other segments: what §6 reads) and ``full`` (:func:`~helpers.surface.run.run_surface`: the statistics, the masked-LM
    head and, with the setting ``gradients``, the gradients, cached); ``batch``, ``gradients`` and ``mlm`` are
    ``full``'s; ``to_json()`` is ``full``'s with the claims (the ``surface`` command's JSON); ``figure1`` is
    Figure 1's example (:class:`Figure1`)."""

    @part
    def full(self) -> SurfaceReport:
        s, ctx = self.settings, self.ctx
        return run_surface(self.lm, ctx, n_segments=s["n_segments"], seed=s["seed"], max_length=s["max_length"],
                           segments_from=s["segments_from"], gradients=s["gradients"],
                           gradient_segments=s["gradient_segments"])

    @part
    def batch(self) -> EncodedBatch:
        if self.computed("full"):
            return self.full.batch
        s, ctx = self.settings, self.ctx
        return build_segments(self.lm, n_segments=s["n_segments"], seed=s["seed"], max_length=s["max_length"],
                              segments_from=s["segments_from"], data_dir=ctx.data_dir, cache_root=ctx.cache_dir)

    @part
    def stats(self) -> SurfaceStats:
        return self.full.stats if self.computed("full") else self.statistics(self.batch)

    def statistics(self, batch: EncodedBatch) -> SurfaceStats:
        """The §3 statistics of ``batch`` (cached; segments built with this run's ``segments_from``): what §6
        colours heads by, for its own segments."""
        return cached_surface_statistics(self.lm, batch, segments_from=self.settings["segments_from"], ctx=self.ctx)

    @part
    def figure1(self) -> Figure1:
        """Figure 1's heads (from ``stats``) and example segment (from ``batch``), with the segment's maps from
        one forward pass of the model: the statistics keep no maps."""
        position = example_segment(self.lm, self.batch)
        ids = self.batch.examples[position].input_ids
        (attn,) = attention_for(self.lm, encode_ids([ids]), level="token")
        return Figure1(figure1_heads(self.stats), position, self.lm.tokenizer.convert_ids_to_tokens(ids.tolist()), attn,
                       figure1_undefined(self.stats))

    @part
    def mlm_head(self) -> tuple:
        """``(head, report)``: the masked-LM head of the gradient analysis (the checkpoint's own, else the head fitted
        on the frozen encoder, cached): :func:`~helpers.surface.run.gradient_head` at this run's settings (what the
        ablation chapter scores an encoder's loss with)."""
        s = self.settings
        return gradient_head(self.lm, self.ctx, n_segments=s["n_segments"], seed=s["seed"], max_length=s["max_length"],
                             segments_from=s["segments_from"])

    @property
    def gradients(self) -> dict | None:
        return self.full.gradients

    @property
    def mlm(self) -> dict | None:
        return self.full.mlm

    def to_json(self) -> dict:
        return {**self.full.to_json(), "claims": [c.to_json() for c in _claims(self)]}


def _claims(report: SurfaceSectionReport) -> list[Claim]:
    return surface_claims.claims(report.full)


# The same in both configurations: the segments' seed and construction, and the gradients (of every segment).
_SETTINGS = {"seed": 0, "segments_from": DEFAULT_SOURCE, "gradients": True, "gradient_segments": None}
SECTION = Section(
    key="surface", paper=surface_claims.PAPER_SECTION, chapter="03_surface",
    sizes=Sizes(full={"n_segments": SEGMENTS, **_SETTINGS}, small={"n_segments": SMALL_SEGMENTS, **_SETTINGS}),
    runner=SurfaceSectionReport, claims=_claims, command=COMMAND,
    causal=("attention to the first position takes [CLS]'s place (cls); [SEP] statistics are absent (no [SEP]) and "
            "attention to the next token is undefined (no query sees it): both left out, each with its reason under "
            "'undefined', their claims not applicable; entropy is set against the uniform over the visible prefix "
            "(row i: log(i + 1), not log n); the gradients are those of the model's own next-token loss through its "
            "language-model head (nothing fitted), averaged over the weights a head can set (key <= query)"),
    corpora=(SEGMENTS_CORPUS, HELD_OUT_SEGMENTS_CORPUS),  # the segments; the masked-LM head's held-out segments
    when={HELD_OUT_SEGMENTS_CORPUS: "gradients"},  # read for the head of the gradient test (--no-gradients: not)
)
