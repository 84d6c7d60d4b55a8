"""Views of single examples: bertviz head/model views and an interactive Altair heat map.

Heads are labelled 1-based ``"layer-head"`` in every view, as in the paper.

>>> from helpers.views import heatmap
>>> chart = heatmap(attn, tokens)          # attn: [layer, head, query, key]   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def bertviz_attention(attn: np.ndarray, *, decimals: int = 3):
    """bertviz's input format (a tuple per layer of ``[1, head, query, key]`` tensors) from ``[layer, head, query, key]``.

    Weights are rounded to ``decimals`` places and kept in float64, so each is written as a short
    decimal (float32 would print as 0.12300000339746475): bertviz embeds every weight twice.
    """
    import torch

    rounded = np.round(np.asarray(attn, dtype=np.float64), decimals)
    return tuple(torch.from_numpy(rounded[layer])[None] for layer in range(rounded.shape[0]))


def head_view(attn: np.ndarray, tokens: Sequence[str], *, layer: int = 0, heads: Sequence[int] | None = None,
              layers: Sequence[int] | None = None, sentence_b_start: int | None = None, html_action: str = "view"):
    """bertviz head view of one example; ``layer``, ``heads`` and ``layers`` are 0-based.

    ``layers`` limits the layers embedded in the page (all by default); ``heads`` preselects heads.
    """
    from bertviz import head_view as _head_view

    return _head_view(bertviz_attention(attn), list(tokens), sentence_b_start=sentence_b_start, layer=layer,
                      heads=list(heads) if heads is not None else None,
                      include_layers=list(layers) if layers is not None else None, html_action=html_action)


def model_view(attn: np.ndarray, tokens: Sequence[str], *, layers: Sequence[int] | None = None,
               heads: Sequence[int] | None = None, html_action: str = "view"):
    """bertviz model view (every layer x head thumbnail) of one example; ``layers``/``heads`` 0-based subsets."""
    from bertviz import model_view as _model_view

    return _model_view(bertviz_attention(attn), list(tokens),
                       include_layers=list(layers) if layers is not None else None,
                       include_heads=list(heads) if heads is not None else None,
                       display_mode="light", html_action=html_action)


def attention_rows(attn: np.ndarray, *, decimals: int = 3) -> list[dict]:
    """One record per ``(layer, head, query)`` with its weights as a list (layer/head 1-based).

    Compact for embedding in pages: the chart flattens ``w`` (weights) and ``k`` (key positions)
    back to one mark per weight in the browser.
    """
    attn = np.round(np.asarray(attn, dtype=np.float64), decimals)
    n_layers, n_heads, n_q, n_k = attn.shape
    keys = list(range(n_k))
    return [
        {"layer": l + 1, "head": h + 1, "query": q, "k": keys, "w": attn[l, h, q].tolist()}
        for l in range(n_layers) for h in range(n_heads) for q in range(n_q)
    ]


def heatmap(attn: np.ndarray, tokens: Sequence[str], *, title: str = "", layer: int = 1, head: int = 1,
            size: int = 320):
    """Interactive heat map (rows: attending token, columns: attended token) with layer/head sliders.

    ``layer`` and ``head`` are the 1-based initial selection. Weights are embedded as one short list
    per row and token labels joined in the browser, which keeps pages light.
    """
    import altair as alt

    attn = np.asarray(attn)
    n_layers, n_heads = attn.shape[:2]
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]  # positions keep repeated tokens apart
    names = alt.Data(values=[{"pos": i, "label": t} for i, t in enumerate(labels)])
    weights = alt.Data(values=attention_rows(attn))
    layer_pick = alt.param(name="layer", value=layer, bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer "))
    head_pick = alt.param(name="head", value=head, bind=alt.binding_range(min=1, max=n_heads, step=1, name="head "))
    return (
        alt.Chart(weights, title=title or "Attention weights (row: attending, column: attended)")
        .mark_rect()
        .transform_filter((alt.datum.layer == layer_pick) & (alt.datum.head == head_pick))
        .transform_flatten(["k", "w"], as_=["key", "weight"])
        .transform_lookup(lookup="query", from_=alt.LookupData(names, "pos", ["label"]), as_=["query_token"])
        .transform_lookup(lookup="key", from_=alt.LookupData(names, "pos", ["label"]), as_=["key_token"])
        .encode(
            x=alt.X("key_token:N", sort=labels, title="attended token (key)"),
            y=alt.Y("query_token:N", sort=labels, title="attending token (query)"),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="weight"),
            tooltip=["layer:O", "head:O", "query_token:N", "key_token:N", "weight:Q"],
        )
        .add_params(layer_pick, head_pick)
        .properties(width=size, height=size)
    )


def attention_lines(attn: np.ndarray, words: Sequence[str], *, highlight: Sequence[int] = (), color_from: bool = True,
                    title: str = "", hide_special: bool = False, height_per_word: int = 16):
    """Figure-5-style view of one head: a line from each attending word (left) to each attended word
    (right), opacity = weight; lines from (or, with ``color_from=False``, to) ``highlight`` positions are red.

    ``attn`` is one head's word-level map ``[query, key]`` over ``words`` ([CLS] and [SEP] included);
    ``hide_special`` drops attention to the first and last position and renormalises rows.
    """
    import altair as alt
    import pandas as pd

    a = np.asarray(attn, dtype=np.float64).copy()
    if hide_special:
        a[:, [0, -1]] = 0.0
        a = a / np.maximum(a.sum(-1, keepdims=True), 1e-12)
    marked = set(highlight)
    rows = [{"i": i, "j": j, "weight": round(float(a[i, j]), 3), "from": words[i], "to": words[j],
             "hl": (i if color_from else j) in marked}
            for i in range(a.shape[0]) for j in range(a.shape[1]) if a[i, j] >= 0.01]
    lines = alt.Chart(pd.DataFrame(rows)).mark_rule(strokeWidth=2).encode(
        x=alt.value(60), x2=alt.value(200), y=alt.Y("i:O", axis=None), y2="j:O",
        opacity=alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]), legend=None),
        color=alt.condition(alt.datum.hl, alt.value("#d62728"), alt.value("#1f77b4")),
        tooltip=["from:N", "to:N", alt.Tooltip("weight:Q", format=".3f")],
    )
    labels = pd.DataFrame({"i": range(len(words)), "word": list(words), "hl": [k in marked for k in range(len(words))]})
    left = alt.Chart(labels).mark_text(align="right", dx=-4).encode(
        x=alt.value(56), y=alt.Y("i:O", axis=None), text="word:N",
        color=alt.condition(alt.datum.hl, alt.value("#d62728"), alt.value("black")))
    right = left.encode(x=alt.value(204)).mark_text(align="left", dx=4)
    return alt.layer(lines, left, right).properties(title=title, width=260, height=height_per_word * len(words))
