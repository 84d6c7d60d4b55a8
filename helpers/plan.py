"""What a full build of the book reads: each model's passes over each input, the floor of its cost.

The book's chapters run one model (the book's, ``$BERT_ATTENTION_MODEL`` or the offline default) over
the paper's inputs at the chapters' sizes, its random-init control over the probes' treebanks, and the
chapter "Comparing models" runs its other models at :data:`helpers.compare.run.REDUCED_SIZES`. This
module lists those passes from the same records and functions the runs use (the sections' sizes in
:data:`helpers.results.SECTIONS`, :func:`helpers.probe.run.probe_corpora`,
:func:`helpers.compare.run.default_specs` and ``chapter_sizes``), and encodes each one with the function its run encodes it with, so that
``benchmarks/book_floor.py`` times exactly what a build reads: one forward pass of each model over each
input, plus the backward pass of the §3 gradients. Anything a build does beyond this list is repeated
work.

>>> [p.input for p in book_passes(RunContext(small=True)) if p.spec == "default"][:3]   # doctest: +SKIP
['segments', 'segments', 'masked-LM segments (train)']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.segment_pass import segment_statistics

COREF_SETTINGS = ("truncated", "windows")  # the §4.3 report's runs of each split (its parts)


@dataclass(frozen=True)
class Pass:
    """One model's pass over one input: ``spec`` (a compare SPEC: ``default``, ``random:default`` ...),
    ``input`` (a readable name), the ``sections`` that read it, ``backward`` (the §3 gradient pass) and the
    sizes it is read at (``n_segments``, ``max_sentences``, ``max_documents``; ``None`` = all)."""

    spec: str
    input: str
    sections: tuple[str, ...]
    backward: bool = False
    options: tuple = field(default=())

    @property
    def option(self) -> dict:
        return dict(self.options)

    def to_json(self) -> dict:
        return {"spec": self.spec, "input": self.input, "sections": list(self.sections), "backward": self.backward,
                **self.option}


def label(record) -> str:
    """How a pass names a section that reads it: its paper section without the sign (``"4.2"``), else its key."""
    return record.paper.lstrip("§") if record.in_paper else record.key


def reads(kind: str) -> dict[str, list]:
    """``{source: [records that read it]}`` for the reads of ``kind`` (``"sentences"``, ``"segments"``,
    ``"coreference"``: :func:`helpers.data.corpora.corpus_read`) of every section's record, each source once:
    GUM's splits in order, then the other corpora."""
    from helpers.data.corpora import GUM_SPLITS, corpus_read
    from helpers.results import SECTIONS

    out: dict[str, list] = {}
    for record in SECTIONS:
        for spec in record.corpora:
            k, source = corpus_read(spec)
            if k == kind:
                out.setdefault(source, []).append(record)

    def order(source: str) -> tuple:
        corpus, _, split = source.rpartition(":")
        return (corpus not in ("gum", ""), GUM_SPLITS.index(split) if split in GUM_SPLITS else len(GUM_SPLITS), source)

    return {source: out[source] for source in sorted(out, key=order)}


def _sizes(spec: str, ctx) -> dict:
    """The sizes ``spec`` is run at in a build: the chapters' for the book's model, else the comparison's
    (``max_sentences``: of each section that has the setting)."""
    from helpers.compare.run import chapter_sizes
    from helpers.results import SECTIONS, section

    def size(record, name: str):  # the section's size in the build's configuration, or the comparison's
        return overrides.get(name, record.settings(ctx)[name])

    overrides = chapter_sizes(spec, ctx)
    return {"n_segments": size(section("surface"), "n_segments"),
            "max_documents": size(section("coref"), "max_documents"),
            "max_sentences": {r.key: size(r, "max_sentences") for r in SECTIONS if "max_sentences" in r.sizes.full}}


def _sentences(record, source: str, limits: dict):
    """The sentences of ``source`` that ``record`` reads: its own limit, or the limit of the input whose
    treebank it reads (the norms chapter reads GUM test as far as the syntax chapter does)."""
    from helpers.data.corpora import corpus_read
    from helpers.results import section

    if record.key in limits:
        return limits[record.key]
    for key in record.inputs:
        if any(corpus_read(c) == ("sentences", source) for c in section(key).corpora):
            return _sentences(section(key), source, limits)
    raise ValueError(f"section {record.key!r} reads {source} but neither it nor an input has a sentence limit")


def model_passes(spec: str, ctx, *, control: bool, only: set[str] | None = None) -> list[Pass]:
    """The passes of one model at its sizes in a build of ``ctx``'s configuration; with ``control``, its
    random-init control's too; ``only``: the keys of the sections that run this model (default: all)."""
    from helpers.compare.run import RANDOM_PREFIX, parse_spec

    from helpers.results import section

    def runs(records: list) -> list:
        return [r for r in records if only is None or r.key in only]

    s = _sizes(spec, ctx)
    n = s["n_segments"]
    segments = reads("segments")
    surface = section("surface")
    s3 = label(surface)  # §3's own passes: its gradients and its masked-LM head's segments
    out = [Pass(spec, "segments", tuple(label(r) for r in runs(segments["gum:train"])),
                options=(("n_segments", n), ("seed", 0)))]
    if only is None or surface.key in only:
        out += [Pass(spec, "segments", (s3,), backward=True, options=(("n_segments", n), ("seed", 0))),
                Pass(spec, "masked-LM segments (train)", (s3,), options=(("n_segments", n), ("seed", 1))),
                Pass(spec, "masked-LM segments (dev)", (s3,), options=(("n_segments", max(n // 5, 20)), ("seed", 1),
                                                                        ("split", "dev")))]
    treebanks = {corpus: runs(readers) for corpus, readers in reads("sentences").items() if runs(readers)}
    for corpus, readers in treebanks.items():
        limits = [_sentences(r, corpus, s["max_sentences"]) for r in readers]
        limit = None if None in limits else max(limits)  # the longest prefix any run reads holds the others
        out.append(Pass(spec, corpus, tuple(label(r) for r in readers), options=(("max_sentences", limit),)))
    for split, readers in reads("coreference").items():
        readers = runs(readers)
        if not readers:
            continue
        for setting in COREF_SETTINGS:
            out.append(Pass(spec, f"coreference {split} ({setting})", tuple(label(r) for r in readers),
                            options=(("split", split), ("setting", setting), ("max_documents", s["max_documents"]))))
    name, random_init = parse_spec(spec)
    probe = section("probe")  # its random-init control reads the probes' treebanks
    if control and not random_init:
        out += [Pass(RANDOM_PREFIX + name, corpus, (label(probe),),
                     options=(("max_sentences", s["max_sentences"]["probe"]),))
                for corpus, readers in treebanks.items() if probe in readers]
    return out


def _larger(a: Pass, b: Pass) -> Pass:
    """Of two passes of one model over one input, the one reading more (its sizes), with both's sections."""
    def size(p: Pass) -> float:
        values = [v for k, v in p.options if k in ("n_segments", "max_sentences", "max_documents")]
        return float("inf") if None in values else sum(values)

    keep = a if size(a) >= size(b) else b
    sections = tuple(dict.fromkeys([*a.sections, *b.sections]))
    return Pass(keep.spec, keep.input, sections, keep.backward, keep.options)


def book_passes(ctx, *, specs: list[str] | None = None) -> list[Pass]:
    """Every pass of a full build in the configuration of ``ctx`` (a :class:`~helpers.context.RunContext`: a
    script builds it, ``RunContext.from_env(small=...)``): the book's model and its control at the chapters' sizes, then each other model of the
    comparison (``specs``: default :func:`helpers.compare.run.default_specs`) at its reduced sizes with its
    own control. A model reads each input once: where two runs read the same input with the same weights
    (the book model's random-init control in §5 and the same model in the comparison), the floor counts
    the larger of the two."""
    from helpers.compare.run import book_spec, default_specs
    from helpers.results import SECTIONS

    book = book_spec(ctx)
    specs = specs if specs is not None else default_specs(ctx)
    beyond = {label(r) for r in SECTIONS if not r.in_paper}  # chapters beyond the paper analyse the book's model only
    out: dict[tuple, Pass] = {}
    for spec in dict.fromkeys([book, *specs]):
        passes = model_passes(spec, ctx, control=True)
        if spec == book and is_decoder(spec, ctx):
            passes.append(no_bos_pass(spec, ctx))
        for p in passes:
            if spec != book:
                p = Pass(p.spec, p.input, tuple(x for x in p.sections if x not in beyond), p.backward, p.options)
            key = (p.spec, p.input, p.backward)
            out[key] = _larger(out[key], p) if key in out else p
    return list(out.values()) + decoder_passes(ctx)


def no_bos_pass(spec: str, ctx) -> Pass:
    """The sinks chapter's pass of the decoder ``spec`` over its segments without the BOS token (its run without BOS,
    at the chapter's sizes in ``ctx``)."""
    from helpers.results import section

    record = section("sinks")
    s = record.settings(ctx)
    return Pass(spec, "segments (no BOS)", (label(record),), options=(("n_segments", s["n_segments"]), ("seed", s["seed"])))


def decoder_passes(ctx) -> list[Pass]:
    """The passes of the sinks chapter's decoder beside the book's encoder (:func:`helpers.compare.run.decoder_spec`:
    a trained decoder that is not the book's model; none otherwise): the sinks section and the sections it reads (§3,
    §4.2, §4.3) at the sizes of its context (:func:`helpers.sinks.decoder.decoder_context`), and its run without BOS.
    The comparison chapter reads that decoder's depth from the same cached §3 statistics (no pass of its own)."""
    from helpers.compare.run import decoder_spec
    from helpers.results import section
    from helpers.sinks.decoder import decoder_context

    spec = decoder_spec(ctx)
    if spec is None:
        return []
    record = section("sinks")
    dctx = decoder_context(ctx, book_model=False).replace(model=spec)  # its sizes: the records', no comparison's
    return [*model_passes(spec, dctx, control=False, only={record.key, *record.inputs}), no_bos_pass(spec, dctx)]


def is_decoder(spec: str, ctx) -> bool:
    """Whether the model of ``spec`` is a decoder, read from its configuration without its weights; ``False`` when
    the configuration cannot be read here (a hub name offline: the floor then leaves out its run without BOS)."""
    from helpers.compare.run import DEFAULT_SPEC, parse_spec
    from helpers.core.models import is_causal_config, is_gguf, resolve_source

    name, _ = parse_spec(spec)
    try:
        _, source, _ = resolve_source(None if name == DEFAULT_SPEC else name, cache_root=ctx.cache_dir)
        from transformers import AutoConfig

        if is_gguf(source):
            path = Path(source)
            return is_causal_config(AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name))
        return is_causal_config(AutoConfig.from_pretrained(source))
    except Exception:  # noqa: BLE001 (an unreadable configuration: the model's own load will say why)
        return False


def encode_pass(lm, p: Pass, ctx, *, max_length: int = MAX_LENGTH) -> EncodedBatch | None:
    """The model inputs of ``p`` for ``lm``, encoded as its run encodes them from the corpora and cache of ``ctx``
    (``None`` when the run reads nothing for this model: the masked-LM head's segments of a model that has its
    own head, or of a decoder, whose §3 gradients use its language-model head)."""
    from helpers.core.encoding import encode_words
    from helpers.pipeline.extraction import encode_treebank
    from helpers.pipeline.segments import build_segments

    o, data_dir, cache_root = p.option, ctx.data_dir, ctx.cache_dir
    if p.input.startswith("masked-LM"):
        from helpers.surface.mlm import pretrained_head

        if lm.causal or pretrained_head(lm) is not None:  # a decoder's gradients use its own LM head: nothing fitted
            return None
    if p.input == "segments (no BOS)":
        from helpers.sinks.run import without_bos

        lm = without_bos(lm)
    if "segments" in p.input:
        return build_segments(lm, split=o.get("split", "train"), n_segments=o["n_segments"], seed=o["seed"],
                              max_length=max_length, data_dir=data_dir, cache_root=cache_root)
    if p.input.startswith("coreference"):
        from helpers.coref.run import load_coref, windows

        docs = load_coref(o["split"], data_dir=data_dir, cache_root=cache_root)[: o["max_documents"]]
        spans = [(d, s, e) for d, doc in enumerate(docs)
                 for s, e in windows(doc, lm.tokenizer, setting=o["setting"], max_length=max_length)]
        return encode_words(lm.tokenizer, [docs[d].words[s:e] for d, s, e in spans], max_length=max_length,
                            model_max=lm.max_positions)
    return encode_treebank(lm, p.input, max_sentences=o["max_sentences"], max_length=max_length, data_dir=data_dir,
                           cache_root=cache_root)[1]


# ------------------------------------------------------------------ one pass over the segments

def chapter_segment_statistics(lm, ctx) -> list[str]:
    """:func:`segment_statistics` for the chapters' segments in the configuration of ``ctx`` (a
    :class:`~helpers.context.RunContext`; the sizes of the §3 record): what chapter 3 calls first."""
    from helpers.results import section

    s = section("surface").settings(ctx)
    return segment_statistics(lm, ctx, n_segments=s["n_segments"], seed=s["seed"], max_length=s["max_length"])


# ------------------------------------------------------------------ a build against its floor

def work_bounds(cpu_seconds: float, floor: dict | None, cores: int) -> dict:
    """How far scheduling alone could bring a build of ``cpu_seconds`` processor time on ``cores`` cores:
    ``seconds_packed``, its processor time over the cores (every core busy from start to end: no schedule of
    the same work takes less), that over the floor (``ratio_packed_over_floor``), and the processor time over
    the floor passes' own (``ratio_cpu_over_floor_cpu``, where the floor recorded it): the build's work against
    the floor's. The build's ratio minus ``ratio_packed_over_floor`` is what its schedule leaves idle.
    ``benchmarks/book_build.py`` records it; the Performance page computes it for recordings made before
    these fields were."""
    packed = cpu_seconds / cores
    out = {"cores": cores, "seconds_packed": round(packed, 1),
           "ratio_packed_over_floor": round(packed / floor["seconds_floor"], 2) if floor else None}
    if floor and floor.get("cpu_seconds_floor"):
        out["ratio_cpu_over_floor_cpu"] = round(cpu_seconds / floor["cpu_seconds_floor"], 2)
    return out
