"""Every claim of the paper, side by side for several models (chapter "Comparing models" and
``python -m helpers compare``).

No rule lives here: each model's rows are :func:`helpers.summary.all_claims` for that model (the
chapters' own ``claims()``, cached on disk). Models are named by SPECs: ``default`` (the offline
default), a Hugging Face name, a local directory or a registered optional extra, each optionally
prefixed with ``random:`` for the randomly initialised copy of that architecture.

>>> parse_spec("random:bert-base-uncased")
('bert-base-uncased', True)
>>> section_key("§3.2"), section_key("§4.2"), section_key("§6")
('3', '4.2', '6')
"""
from __future__ import annotations

import argparse
import gc
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .claims import VERDICTS, Claim, by_id

COMPARE_ENV = "BERT_ATTENTION_COMPARE"  # comma-separated SPECs: the chapter's models (replaces the default list)
RANDOM_PREFIX = "random:"
DEFAULT_SPEC = "default"
OPTIONAL_SPECS = ("mpnet-base",)  # in the default list when installed (``python -m helpers install-model``)
SECTIONS = ("3", "4.2", "4.3", "5", "6")  # the JSON's section keys, in the paper's order
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
    from .model_extras import extra_dir

    return [s for s in OPTIONAL_SPECS if (extra_dir(s, cache_root, must_exist=False) / "config.json").is_file()]


def default_specs(cache_root=None, *, small: bool | None = None) -> list[str]:
    """The chapter's models: ``$BERT_ATTENTION_COMPARE`` when set, else the offline default, its
    random-init control and each installed optional extra (``mpnet-base``), the book's model
    (``$BERT_ATTENTION_MODEL``) in place of the default when set, the extras left out in
    the small configuration (``small``; default :func:`~helpers.config.small_run`) to keep tests fast."""
    from .config import small_run

    env = os.environ.get(COMPARE_ENV, "").strip()
    if env:
        return parse_specs(env, where=f"${COMPARE_ENV}")
    book = book_spec()
    extras = [] if (small_run() if small is None else small) else installed_optional_specs(cache_root)
    return [book, RANDOM_PREFIX + book, *(e for e in extras if e != book)]


def book_spec() -> str:
    """The SPEC of the book's model: ``$BERT_ATTENTION_MODEL`` when set, else ``default``."""
    from .models import requested_model

    return requested_model() or DEFAULT_SPEC


def chapter_sizes(spec: str, *, small: bool | None = None) -> dict:
    """The chapter's size overrides for ``spec``: none for the book's model (:func:`book_spec`: the
    chapters' sizes, so its results are the chapters' cached ones); else :data:`REDUCED_SIZES`, which keep a model's first
    run within minutes (:data:`SMALL_REDUCED_SIZES` in the small configuration)."""
    from .config import small_run

    if spec == book_spec():
        return {}
    return dict(SMALL_REDUCED_SIZES if (small_run() if small is None else small) else REDUCED_SIZES)


def sizes_text(sizes: dict) -> str:
    """``"200 segments, the first 500 sentences of each treebank and the first 10 documents of each
    coreference split"`` for :data:`REDUCED_SIZES`-like overrides."""
    text = (f"{sizes['n_segments']} segments, the first {sizes['max_sentences']} sentences of each treebank and the "
            f"first {sizes['max_documents']} documents of each coreference split")
    return text + (f", probes trained for {sizes['epochs']} epoch(s)" if "epochs" in sizes else "")


def section_key(section: str) -> str:
    """The JSON's section (``"3"``, ``"4.2"``, ``"4.3"``, ``"5"``, ``"6"``) of a claim's ``"§3.1"`` etc."""
    text = section.strip().lstrip("§").strip()
    for key in ("4.2", "4.3"):
        if text == key or text.startswith(key + "."):
            return key
    major = text.split(".")[0]
    if major in ("3", "5", "6"):
        return major
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

    def to_json(self) -> dict:
        return {"spec": self.spec, "name": self.card["name"], "layers": self.card["layers"],
                "heads": self.card["heads"], "random_init": bool(self.card["random_init"])}


def coref_documents(max_sentences: int | None) -> int | None:
    """Documents per coreference split for ``--max-sentences`` (``None``: all)."""
    return None if max_sentences is None else max(1, math.ceil(max_sentences / SENTENCES_PER_DOCUMENT))


def depth_profile(lm, *, n_segments: int | None, small: bool | None, max_length: int = 128, data_dir=None,
                  cache_root=None, progress: bool = False) -> dict:
    """Per-layer means (``[layer]``) of the §3 statistics for the segments of the §3 claims (cached)."""
    from . import surface_pipeline as sp
    from .summary import _size

    n = _size(n_segments, sp.SEGMENTS, sp.SMALL_SEGMENTS, small)
    stats = sp.run_surface(lm, n_segments=n, seed=0, max_length=max_length, gradients=False, data_dir=data_dir,
                           cache_root=cache_root, progress=progress).stats  # the §3 claims' segments and statistics
    out = {k: stats.layer_means(k).tolist() for k in (*DEPTH_STATISTICS, "entropy")}
    out["uniform_entropy"] = float(stats.uniform_entropy)
    return out


def code_digest() -> str:
    """SHA-256 of the ``helpers`` package's Python sources: part of the key of cached claims, so that a
    change to any rule, threshold or analysis recomputes them."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cached_claims(lm, **sizes) -> list[Claim]:
    """:func:`helpers.summary.all_claims` for ``lm`` and ``sizes``, kept on disk (keyed by the model's
    weights, the sizes, the data folder and :func:`code_digest`), so that the chapter and the command
    compute a model's rows once; the analyses under it are cached by the chapters' own keys."""
    from .cache import cached_json
    from .config import data_dir, small_run
    from .summary import all_claims

    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sizes.items()
                if k not in ("cache_root", "progress", "data_dir")}
    if settings.get("small") is None:
        settings["small"] = small_run()
    key = {"model": lm.fingerprint(), "random_init": lm.random_init, "seed": lm.seed, "sizes": settings,
           "data": str(data_dir(sizes.get("data_dir"))), "code": code_digest()}
    rows = cached_json("compare-claims", key, lambda: [c.to_json() for c in all_claims(lm, **sizes)],
                       cache_root=sizes.get("cache_root"))
    return [Claim(**row) for row in rows]


def compare_model(spec: str, *, seed: int = 0, device=None, figures: bool = True, **sizes) -> ModelResult:
    """Load the model of ``spec``, compute its claims (:func:`helpers.summary.all_claims` with ``sizes``)
    and, with ``figures``, its depth profile; the model is freed before returning."""
    from .models import load_model
    from .summary import all_claims

    name, random_init = parse_spec(spec)
    lm = load_model(name, random_init=random_init, seed=seed, device=device)
    try:
        card = lm.card()
        claims = cached_claims(lm, **sizes)
        depth = depth_profile(lm, n_segments=sizes.get("n_segments"), small=sizes.get("small"),
                              max_length=sizes.get("max_length", 128), data_dir=sizes.get("data_dir"),
                              cache_root=sizes.get("cache_root")) if figures else {}
    finally:
        del lm
        gc.collect()
    return ModelResult(spec, card, claims, depth, {k: v for k, v in sizes.items() if k not in ("data_dir", "cache_root", "progress")})


def compare(specs: list[str], *, seed: int = 0, device=None, figures: bool = True, sizes_for=None, **sizes) -> list[ModelResult]:
    """:func:`compare_model` for each SPEC in turn (one model in memory at a time). ``sizes_for(spec)``,
    when given, returns per-model overrides of ``sizes``."""
    return [compare_model(s, seed=seed, device=device, figures=figures, **{**sizes, **(sizes_for(s) if sizes_for else {})})
            for s in specs]


def compare_json(results: list[ModelResult]) -> dict:
    """The ``compare`` command's JSON: ``models`` and ``claims`` (every claim, in the paper's order, with
    each model's ``ours``, ``value`` and ``verdict``)."""
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
                res[r.spec] = {"ours": c.ours, "value": None if c.value is None else float(c.value), "verdict": c.verdict}
        claims.append({"id": cid, "section": section_key(first.section), "claim": first.claim, "paper": first.paper,
                       "results": res})
    return {"models": [r.to_json() for r in results], "claims": claims}


# ------------------------------------------------------------------------------- chapter views


def verdict_frame(results: list[ModelResult]):
    """``[claim id, model spec]`` table of verdicts (pandas), rows in the paper's order."""
    import pandas as pd

    payload = compare_json(results)
    return pd.DataFrame({m["spec"]: {c["id"]: c["results"].get(m["spec"], {}).get("verdict") for c in payload["claims"]}
                         for m in payload["models"]}, index=[c["id"] for c in payload["claims"]])


VERDICT_COLOURS = {"reproduced": "#c7e9c0", "partly": "#fdd0a2", "not reproduced": "#fcbba1"}


def compare_html(results: list[ModelResult]) -> str:
    """Every claim x model as an HTML table: the paper's number, then each model's number with its
    verdict on a coloured background (green reproduced, orange partly, red not)."""
    from html import escape

    payload = compare_json(results)
    head = "".join(f"<th>{escape(r.card['name'])}<br><small>{r.card['layers']} x {r.card['heads']}</small></th>"
                   for r in results)
    rows = []
    for c in payload["claims"]:
        cells = []
        for r in results:
            got = c["results"].get(r.spec)
            if got is None:
                cells.append("<td>—</td>")
                continue
            value = "—" if got["value"] is None else f"{got['value']:.3g}"
            cells.append(f'<td style="background:{VERDICT_COLOURS[got["verdict"]]}" title="{escape(got["ours"])}">'
                         f"<b>{escape(got['verdict'])}</b><br><small>{escape(value)}</small></td>")
        rows.append(f"<tr><td>§{escape(c['section'])}</td><td><code>{escape(c['id'])}</code><br>{escape(c['claim'])}</td>"
                    f"<td>{escape(c['paper'])}</td>{''.join(cells)}</tr>")
    return (f"<table class='dataframe'><thead><tr><th>§</th><th>claim</th><th>paper (BERT-base)</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def depth_frame(results: list[ModelResult]):
    """Long table ``model, layer, relative_depth, series, value`` of the depth profiles; relative depth
    is ``(layer index + 1) / number of layers`` so models of different depths share an axis. Entropy
    rows have ``series`` ``"entropy"`` (and ``"uniform"`` for the uniform attention's)."""
    import pandas as pd

    rows = []
    for r in results:
        if not r.depth:
            continue
        n = len(r.depth["entropy"])
        for key in (*DEPTH_STATISTICS, "entropy"):
            for layer, v in enumerate(r.depth[key]):
                rows.append({"model": r.card["name"], "layer": layer + 1, "relative_depth": (layer + 1) / n,
                             "series": DEPTH_STATISTICS.get(key, key), "value": float(v)})
    return pd.DataFrame(rows, columns=["model", "layer", "relative_depth", "series", "value"])


def value_frame(results: list[ModelResult], ids: list[str]):
    """Long table ``model, id, value, verdict`` of the claims ``ids`` (missing values left out)."""
    import pandas as pd

    rows = []
    for r in results:
        table = by_id(r.claims)
        for cid in ids:
            c = table.get(cid)
            if c is not None and c.value is not None:
                rows.append({"model": r.card["name"], "id": cid, "value": float(c.value), "verdict": c.verdict})
    return pd.DataFrame(rows, columns=["model", "id", "value", "verdict"])


def depth_chart(results: list[ModelResult], *, entropy: bool = False, width: int = 260, height: int = 220):
    """Attention to [CLS], [SEP] and punctuation (or, with ``entropy``, the entropy) by relative depth,
    one line per model."""
    import altair as alt

    from .charts import PALETTE

    frame = depth_frame(results)
    frame = frame[frame["series"] == "entropy"] if entropy else frame[frame["series"] != "entropy"]
    models = list(dict.fromkeys(frame["model"]))
    color = alt.Color("model:N", sort=models, scale=alt.Scale(domain=models, range=PALETTE[: len(models)]), title=None)
    base = alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("relative_depth:Q", title="Relative depth (layer / layers)", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("value:Q", title="Avg. entropy (nats)" if entropy else "Avg. attention"),
        color=color, tooltip=["model:N", "layer:Q", alt.Tooltip("value:Q", format=".3f")])
    if entropy:
        return base.properties(width=width * 2, height=height)
    return base.properties(width=width, height=height).facet(column=alt.Column("series:N", title=None,
                                                                               sort=list(DEPTH_STATISTICS.values())))


def value_chart(results: list[ModelResult], ids: list[str], *, y_title: str, width: int = 420, height: int = 220):
    """Grouped bars of each model's value for the claims ``ids`` (tooltip: the verdict)."""
    import altair as alt

    from .charts import PALETTE

    frame = value_frame(results, ids)
    models = list(dict.fromkeys(frame["model"]))
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("id:N", sort=ids, title=None), xOffset=alt.XOffset("model:N", sort=models),
        y=alt.Y("value:Q", title=y_title),
        color=alt.Color("model:N", sort=models, scale=alt.Scale(domain=models, range=PALETTE[: len(models)]), title=None),
        tooltip=["model:N", "id:N", alt.Tooltip("value:Q", format=".1f"), "verdict:N"],
    ).properties(width=width, height=height)


def findings(results: list[ModelResult]) -> dict[str, list[str]]:
    """The claims grouped by how the pre-trained models agree (from the verdicts, no new rule):
    ``shared`` (reproduced, at least partly, by every pre-trained model), ``model_dependent`` (some
    pre-trained models reproduce it at least partly, others not), ``none`` (reproduced by no pre-trained model), and
    ``random_too`` (claims the random-init controls also reproduce at least partly: not learned)."""
    trained = [by_id(r.claims) for r in results if not r.card["random_init"]]
    random = [by_id(r.claims) for r in results if r.card["random_init"]]
    ids = list(dict.fromkeys(c.id for r in results for c in r.claims))
    out: dict[str, list[str]] = {"shared": [], "model_dependent": [], "none": [], "random_too": []}
    for cid in ids:
        got = [t[cid].verdict for t in trained if cid in t]
        if got:
            failed = [v == VERDICTS[-1] for v in got]
            out["none" if all(failed) else "model_dependent" if any(failed) else "shared"].append(cid)
        if any(t[cid].verdict != VERDICTS[-1] for t in random if cid in t):
            out["random_too"].append(cid)
    return out


def id_list(ids: list[str]) -> str:
    """``"a, b and c"`` (``"none"`` when empty)."""
    if not ids:
        return "none"
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


# ---------------------------------------------------------------------------------------- CLI


def _check_compare_inputs(args: argparse.Namespace) -> None:
    from .models import resolve_source
    from .summary import _check_claims_inputs

    if args.model or args.random_init:
        raise ValueError("compare: name the models with --models SPEC[,SPEC...] (random:SPEC for a random-init copy), "
                         "not --model/--random-init")
    args.models = parse_specs(args.models) if args.models is not None else default_specs(args.cache_dir)
    for spec in args.models:
        name, _ = parse_spec(spec)
        resolve_source(name)
    _check_claims_inputs(args)


def _compare_args(parser: argparse.ArgumentParser) -> None:
    from . import summary

    parser.add_argument("--models", default=None, metavar="SPEC[,SPEC...]",
                        help="models to compare: default (the offline default), a Hugging Face name, a local directory "
                             "or an installed extra (mpnet-base), each optionally prefixed with random: (random-init "
                             f"copy, seeded by --seed); default ${COMPARE_ENV}, else default,random:default and "
                             "mpnet-base when installed")
    summary.add_size_args(
        parser,
        sentences_help="first N sentences of each treebank for §4.2 and §5, and the first ceil(N / "
                       f"{SENTENCES_PER_DOCUMENT}) documents of each split for §4.3 unless --max-documents "
                       "is given (default: all, as the chapters)",
        documents_help="first N documents of each split for §4.3 (default: from --max-sentences, else all)")
    parser.set_defaults(check_inputs=_check_compare_inputs)


def _register() -> None:
    from .cli import command

    @command("compare", "every claim of the paper side by side for several models (--models), from the cached results",
             _compare_args)
    def cmd_compare(args: argparse.Namespace) -> dict:
        documents = args.max_documents if args.max_documents is not None else coref_documents(args.max_sentences)
        sizes = dict(n_segments=args.segments, max_sentences=args.max_sentences, max_documents=documents,
                     seeds=tuple(range(args.seeds)) if args.seeds else None, epochs=args.epochs, n_perm=args.permutations,
                     max_length=args.max_length, small=False, data_dir=args.data_dir, cache_root=args.cache_dir,
                     progress=not args.quiet)
        return compare_json(compare(args.models, seed=args.seed, device=args.device, figures=False, **sizes))


_register()
