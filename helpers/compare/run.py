"""Every claim of the paper, side by side for several models (chapter "Comparing models" and
``python -m helpers compare``).

No rule lives here: each model's rows are :func:`helpers.results.all_claims` for that model (the
chapters' own ``claims()``, cached on disk). Models are named by SPECs: ``default`` (the offline
default), a Hugging Face name, a local directory or a registered optional extra, each optionally
prefixed with ``random:`` for the randomly initialised copy of that architecture.

>>> parse_spec("random:bert-base-uncased")
('bert-base-uncased', True)
>>> section_key("§3.2"), section_key("§4.2"), section_key("§6")
('3', '4.2', '6')
"""
from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field

from helpers.claims import RULE_FIELDS, Claim, Judged, by_id
from helpers.config import COMPARE_ENV  # comma-separated SPECs: the chapter's models (replaces the default list)
from helpers.context import RunContext
from helpers.results import PAPER_SECTIONS, covering

RANDOM_PREFIX = "random:"
DEFAULT_SPEC = "default"
OPTIONAL_SPECS = ("mpnet-base",)  # in the default list when installed (``python -m helpers install-model``)
SECTIONS = tuple(s.paper.lstrip("§") for s in PAPER_SECTIONS)  # the JSON's section keys, in the paper's order: "3", "4.2" ...
SENTENCES_PER_DOCUMENT = 25  # --max-sentences N reads the first ceil(N / 25) documents of each coreference split
REDUCED_SIZES = {"n_segments": 200, "max_sentences": 500, "max_documents": 10}  # the chapter's sizes for models other than the default
SMALL_REDUCED_SIZES = {"n_segments": 20, "max_sentences": 60, "max_documents": 2, "epochs": 1}  # the same, small configuration
DEPTH_STATISTICS = {"cls": "[CLS]", "sep": "[SEP]", "punct": ". or ,"}  # attention targets by relative depth


# ------------------------------------------------------------------------------------ specs


def parse_spec(spec: str) -> tuple[str | None, bool]:
    """``(model name for load_model, random_init)``; ``default`` is the offline default (``None``
    would mean ``$BERT_ATTENTION_MODEL``, so the default is named explicitly)."""
    spec = spec.strip()
    random_init = spec.startswith(RANDOM_PREFIX)
    name = spec[len(RANDOM_PREFIX):].strip() if random_init else spec
    if not name:
        raise ValueError(f"--models: {spec!r} names no model (write random:default, random:bert-base-uncased ...)")
    return name, random_init


def parse_specs(text: str, *, where: str = "--models") -> list[str]:
    """The SPECs of a comma-separated list, stripped, each once, in order (raises naming ``where``)."""
    specs = list(dict.fromkeys(s.strip() for s in str(text).split(",") if s.strip()))
    if not specs:
        raise ValueError(f"{where}: no model given (e.g. default,random:default)")
    for spec in specs:
        parse_spec(spec)
    return specs


def installed_optional_specs(cache_root=None) -> list[str]:
    """The optional extras of :data:`OPTIONAL_SPECS` that are installed here."""
    from helpers.core.model_extras import is_installed

    return [s for s in OPTIONAL_SPECS if is_installed(s, cache_root)]


def default_specs(ctx: RunContext) -> list[str]:
    """The chapter's models: ``ctx.compare`` (``$BERT_ATTENTION_COMPARE``) when set, else the book's model
    (:func:`book_spec`) and its random-init control, then the offline default when the book analyses
    another model, then each optional extra installed under ``ctx.cache_dir`` (``mpnet-base``); the small
    configuration (``ctx.small``) keeps only the first two, to keep tests fast."""
    if ctx.compare:
        return parse_specs(ctx.compare, where=f"${COMPARE_ENV}")
    book = book_spec(ctx)
    if ctx.small:
        return [book, RANDOM_PREFIX + book]
    return list(dict.fromkeys([book, RANDOM_PREFIX + book, DEFAULT_SPEC, *installed_optional_specs(ctx.cache_dir)]))


def book_spec(ctx: RunContext) -> str:
    """The SPEC of the book's model: ``ctx.model`` (``$BERT_ATTENTION_MODEL``) when set, else ``default``."""
    return ctx.model or DEFAULT_SPEC


def decoder_spec(ctx: RunContext) -> str | None:
    """The SPEC of the decoder the comparison chapter shows on relative depth beside its models: the sinks chapter's
    decoder (:func:`helpers.sinks.decoder.chapter_decoder`: ``ctx.decoder``, else the installed ``smollm2``) when it
    is a real one and not already among them (the book's model); ``None`` otherwise (its random stand-in says
    nothing about trained decoders). Its §3 statistics are the sinks chapter's, at the chapters' sizes (cached)."""
    from helpers.core.model_extras import is_installed
    from helpers.sinks.decoder import DEFAULT_DECODER

    spec = ctx.decoder or (DEFAULT_DECODER if is_installed(DEFAULT_DECODER, ctx.cache_dir) else None)
    return None if spec is None or spec == book_spec(ctx) else spec


def decoder_depth(ctx: RunContext) -> ModelResult | None:
    """The depth profile of :func:`decoder_spec`'s decoder (no claims), computed in a process of its own in the
    sinks chapter's context for it (:func:`helpers.sinks.decoder.decoder_context`: its sizes, so its §3
    statistics are that chapter's, cached); ``None`` when there is no such decoder."""
    from helpers.sinks.decoder import decoder_context

    spec = decoder_spec(ctx)
    if spec is None:
        return None
    (result,) = compare([spec], decoder_context(ctx, book_model=False), claims=False, isolate=True)
    return result


def chapter_sizes(spec: str, ctx: RunContext) -> dict:
    """The chapter's size overrides for ``spec``: none for the book's model (:func:`book_spec`: the
    chapters' sizes, so its results are the chapters' cached ones); else :data:`REDUCED_SIZES`, which keep a model's first
    run within minutes (:data:`SMALL_REDUCED_SIZES` in the small configuration, ``ctx.small``)."""
    if spec == book_spec(ctx):
        return {}
    return dict(SMALL_REDUCED_SIZES if ctx.small else REDUCED_SIZES)


def sizes_text(sizes: dict) -> str:
    """``"200 segments, the first 500 sentences of each treebank and the first 10 documents of each
    coreference split"`` for :data:`REDUCED_SIZES`-like overrides."""
    text = (f"{sizes['n_segments']} segments, the first {sizes['max_sentences']} sentences of each treebank and the "
            f"first {sizes['max_documents']} documents of each coreference split")
    return text + (f", probes trained for {sizes['epochs']} epoch(s)" if "epochs" in sizes else "")


def section_key(section: str) -> str:
    """The JSON's section (``"3"``, ``"4.2"``, ``"4.3"``, ``"5"``, ``"6"``) of a claim's ``"§3.1"`` etc.: the
    paper section of the record that covers it."""
    record = covering("§" + section.strip().lstrip("§").strip())
    if record is not None:
        return record.paper.lstrip("§")
    raise ValueError(f"claim section {section!r} is not one of §{', §'.join(SECTIONS)}")


# ---------------------------------------------------------------------------------- results


@dataclass
class ModelResult:
    """One model's claims and what the chapter's figures need: ``depth`` holds ``[layer]`` means over
    heads of attention to each of :data:`DEPTH_STATISTICS` and of the entropy (``entropy``,
    ``uniform_entropy``), for the same segments as the §3 claims."""

    spec: str
    card: dict
    claims: list[Claim]
    depth: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)
    seconds: float | None = None        # wall time of the model's run (isolated runs only)
    peak_rss_gib: float | None = None   # peak resident memory of the process that ran it (isolated runs only)

    def to_json(self) -> dict:
        return {"spec": self.spec, "name": self.card["name"], "layers": self.card["layers"],
                "heads": self.card["heads"], "random_init": bool(self.card["random_init"])}


def coref_documents(max_sentences: int | None) -> int | None:
    """Documents per coreference split for ``--max-sentences`` (``None``: all)."""
    return None if max_sentences is None else max(1, math.ceil(max_sentences / SENTENCES_PER_DOCUMENT))


def depth_profile(lm, ctx: RunContext, *, n_segments: int | None = None, max_length: int | None = None) -> dict:
    """Per-layer means (``[layer]``) of the §3 statistics for the segments of the §3 claims (cached). A statistic a
    decoder does not have ([SEP]: :attr:`~helpers.surface.stats.SurfaceStats.undefined`) is absent, not zero; its
    ``cls`` is attention to the first position (BOS)."""
    from helpers.results import section

    stats = section("surface").run(lm, ctx, n_segments=n_segments, max_length=max_length).stats  # the §3 claims' segments
    out = {k: stats.layer_means(k).tolist() for k in (*DEPTH_STATISTICS, "entropy") if k not in stats.undefined}
    out["uniform_entropy"] = float(stats.uniform_entropy)
    return out


def cached_claims(lm, ctx: RunContext, **sizes) -> list[Claim]:
    """:func:`helpers.results.all_claims` for ``lm``, ``ctx`` and ``sizes``, kept on disk (keyed by the model's
    weights, the sizes, the configuration, the data folder and the code of ``all_claims``:
    :func:`helpers.digest.code_digest`, every module it imports, so every rule, threshold and analysis it runs
    and nothing else), so that the chapter and the command compute a model's rows once; the analyses under it
    are cached by the chapters' own keys."""
    from helpers.data.cache import cached_json
    from helpers.digest import code_digest
    from helpers.results import all_claims

    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sizes.items()}
    settings["small"] = ctx.small
    key = {"model": lm.fingerprint(), "random_init": lm.random_init, "seed": lm.seed, "sizes": settings,
           "data": str(ctx.data_dir), "code": code_digest(all_claims)}
    rows = cached_json("compare-claims", key, lambda: [c.to_json() for c in all_claims(lm, ctx, **sizes)],
                       cache_root=ctx.cache_dir)
    return [claim_from_json(row) for row in rows]


def judged_from_json(row: dict) -> Judged | None:
    """The :class:`~helpers.claims.Judged` of a claim's JSON ``row`` (or of one of its ``part_rows``), from its
    rule's fields (:data:`~helpers.claims.RULE_FIELDS`); ``None`` for a row without a rule (not applicable, or
    written before rows carried their rule)."""
    if row.get("rule") is None:
        return None

    def pair(x):
        return None if x is None else (float(x[0]), float(x[1]))

    parts = row.get("part_rows")
    return Judged(row["rule"], row["verdict"], estimate=row.get("estimate"), interval=pair(row.get("interval")),
                  null=row.get("null"), paper_level=row.get("paper_level"), range=pair(row.get("range")),
                  share=row.get("share"), parts=None if parts is None else tuple(judged_from_json(p) for p in parts),
                  p_value=row.get("p_value"), name=row.get("name"))


def claim_from_json(row: dict) -> Claim:
    """The :class:`~helpers.claims.Claim` of its JSON ``row`` (:meth:`~helpers.claims.Claim.to_json`), with what its
    rule read, so that ``claim_from_json(c.to_json()).to_json() == c.to_json()``; a row without the rule's fields
    (written before rows carried them) gives a claim without them. The claim checks that its verdict follows from
    its fields, as when it was made."""
    return Claim(row["id"], row["section"], row["claim"], row["paper"], row["ours"], row["value"], row["verdict"],
                 reason=row.get("reason"), judged=judged_from_json(row), resampled=row.get("resampled"), n=row.get("n"))


def compare_model(spec: str, ctx: RunContext, *, seed: int = 0, figures: bool = True, claims: bool = True,
                  **sizes) -> ModelResult:
    """Load the model of ``spec`` (on ``ctx.device``), compute its claims (:func:`helpers.results.all_claims`
    with ``sizes``; none without ``claims``: a model shown on relative depth only) and, with ``figures``, its depth
    profile; the model is freed before returning."""
    from helpers.core.models import load_model

    name, random_init = parse_spec(spec)
    lm = load_model(name, random_init=random_init, seed=seed, device=ctx.device, cache_root=ctx.cache_dir)
    try:
        card = lm.card()
        rows = cached_claims(lm, ctx, **sizes) if claims else []
        depth = depth_profile(lm, ctx, n_segments=sizes.get("n_segments"), max_length=sizes.get("max_length")) if figures else {}
    finally:
        del lm
        gc.collect()
    return ModelResult(spec, card, rows, depth, dict(sizes))


def compare(specs: list[str], ctx: RunContext, *, seed: int = 0, figures: bool = True, claims: bool = True,
            sizes_for=None, isolate: bool = False, **sizes) -> list[ModelResult]:
    """:func:`compare_model` for each SPEC in turn (one model in memory at a time). ``sizes_for(spec, ctx)``,
    when given, returns per-model overrides of ``sizes`` (:func:`chapter_sizes`). With ``isolate``, each model is computed in
    a child process of its own (:func:`compare_isolated`, handed ``ctx``), so the caller never holds a model:
    the chapter's kernel stays small and each model's peak memory is measured on its own."""
    run = compare_isolated if isolate else compare_model
    return [run(s, ctx, seed=seed, figures=figures, claims=claims,
                **{**sizes, **(sizes_for(s, ctx) if sizes_for else {})}) for s in specs]


def _measured(spec: str, ctx: RunContext, **kwargs) -> ModelResult:
    """:func:`compare_model` with its wall time and this process's peak resident memory (in a child: the
    parent's ``ctx`` is its context, so the child reads no environment)."""
    import resource
    import time

    start = time.perf_counter()
    result = compare_model(spec, ctx, **kwargs)
    result.seconds = round(time.perf_counter() - start, 1)
    result.peak_rss_gib = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1024 ** 3, 2)  # KiB on Linux
    return result


def compare_isolated(spec: str, ctx: RunContext, **kwargs) -> ModelResult:
    """:func:`compare_model` in a freshly spawned child process (same environment, same cache), with
    its ``seconds`` and ``peak_rss_gib`` filled in; a child that dies (out of memory, killed) raises an
    error naming ``spec``, and what it had cached stays cached."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(_measured, spec, ctx, **kwargs).result()
        except BrokenProcessPool as exc:
            raise RuntimeError(f"compare: the process computing {spec!r} died (out of memory or killed; or, "
                               "called from a script, the call is not under `if __name__ == \"__main__\":`, "
                               "which a spawned process needs); its finished analyses are cached, run again "
                               "to resume") from exc


def compare_json(results: list[ModelResult]) -> dict:
    """The ``compare`` command's JSON: ``models`` and ``claims`` (every claim, in the paper's order, with
    each model's ``ours``, ``value`` and ``verdict``, then the fields of the rule that judged it,
    :data:`helpers.claims.RULE_FIELDS`, as the ``claims`` command writes them: ``null`` where the rule has none)."""
    order: dict[str, Claim] = {}
    for r in results:
        for c in r.claims:
            order.setdefault(c.id, c)
    tables = [by_id(r.claims) for r in results]
    claims = []
    for cid, first in order.items():
        res = {}
        for r, table in zip(results, tables):
            c = table.get(cid)
            if c is not None:
                row = c.to_json()
                res[r.spec] = {"ours": c.ours, "value": None if c.value is None else float(c.value), "verdict": c.verdict,
                               **{k: row[k] for k in RULE_FIELDS}}
        claims.append({"id": cid, "section": section_key(first.section), "claim": first.claim, "paper": first.paper,
                       "results": res})
    return {"models": [r.to_json() for r in results], "claims": claims}


def id_list(ids: list[str]) -> str:
    """``"a, b and c"`` (``"none"`` when empty)."""
    if not ids:
        return "none"
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]
