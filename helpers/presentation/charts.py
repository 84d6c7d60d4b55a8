"""Interactive Altair charts shared by the chapters, and saving any chart as SVG or PNG.

Heads are labelled 1-based ``"layer-head"`` in tooltips; layers are 1-based on axes.

>>> chart = layer_scatter({"sep": stats.per_head["sep"]}, {"sep": "[SEP]"}, y_title="Avg. attention")  # doctest: +SKIP
>>> save_chart(chart, "figure2")            # writes figure2.svg and figure2.png           # doctest: +SKIP
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from helpers.core.labels import head_label
from helpers.presentation.views import altair_offline, not_drawn

PALETTE = ["#d62728", "#1f77b4", "#9467bd", "#2ca02c", "#ff7f0e", "#17becf", "#8c564b"]


def head_frame(per_head: Mapping[str, np.ndarray], names: Mapping[str, str]) -> pd.DataFrame:
    """Long table ``layer, head, label, series, value`` from ``{key: [layer, head]}`` arrays."""
    rows = []
    for key, display in names.items():
        values = np.asarray(per_head[key])
        n_heads = values.shape[1]
        for layer in range(values.shape[0]):
            for head in range(n_heads):
                rows.append({"layer": layer + 1, "head": head + 1, "label": head_label(layer, head),
                             "series": display, "value": float(values[layer, head]),
                             "x": layer + 1 + 0.5 * (head - (n_heads - 1) / 2) / n_heads})
    return pd.DataFrame(rows)


def layer_scatter(per_head: Mapping[str, np.ndarray], names: Mapping[str, str], *, title: str = "",
                  y_title: str = "Avg. attention", mean_lines: bool = True,
                  reference: tuple[float, str] | None = None, width: int = 420, height: int = 260):
    """One point per head (x: layer, slightly spread by head) per series, with per-layer mean lines.

    Click a legend entry to highlight a series; hover a point for its head and value. A series absent from
    ``per_head`` (a statistic a decoder does not have: :attr:`~helpers.surface.stats.SurfaceStats.shown`) is left
    out; with none left, a line says so instead of a chart.
    """
    alt = altair_offline()

    names = {k: v for k, v in names.items() if k in per_head}
    if not names:
        return not_drawn(title or "this figure", "it has none of these statistics (a decoder has no [SEP] and no next "
                         "token in view)")
    frame = head_frame(per_head, names)
    order = list(names.values())
    color = alt.Color("series:N", sort=order, scale=alt.Scale(domain=order, range=PALETTE[: len(order)]), title=None)
    pick = alt.selection_point(fields=["series"], bind="legend")
    opacity = alt.condition(pick, alt.value(0.85), alt.value(0.12))
    n_layers = int(frame["layer"].max())
    x = alt.X("x:Q", title="Layer", scale=alt.Scale(domain=[0.5, n_layers + 0.5]),
              axis=alt.Axis(values=list(range(1, n_layers + 1)), format="d"))
    points = alt.Chart(frame).mark_circle(size=28).encode(
        x=x, y=alt.Y("value:Q", title=y_title), color=color, opacity=opacity,
        tooltip=[alt.Tooltip("label:N", title="head"), "series:N", alt.Tooltip("value:Q", format=".3f")],
    ).add_params(pick)
    layers = [points]
    if mean_lines:
        layers.append(alt.Chart(frame).mark_line(strokeWidth=2).encode(
            x=alt.X("layer:Q"), y="mean(value):Q", color=color, opacity=opacity))
    if reference is not None:
        value, label = reference
        ref = pd.DataFrame({"y": [value], "label": [label]})
        layers.append(alt.Chart(ref).mark_rule(strokeDash=[6, 4], color="black").encode(
            y="y:Q", tooltip=[alt.Tooltip("label:N", title="reference"), alt.Tooltip("y:Q", format=".3f")]))
    return alt.layer(*layers).properties(title=title, width=width, height=height)


def layer_lines(per_layer: Mapping[str, Sequence[float]], *, title: str = "", y_title: str = "",
                width: int = 420, height: int = 260, log_scale: bool = False):
    """One line per series over layers (1-based), with point tooltips; a series whose values are ``None`` (a
    statistic the model does not have, e.g. a decoder's [SEP]) is left out."""
    alt = altair_offline()

    per_layer = {name: values for name, values in per_layer.items() if values is not None}
    rows = [{"layer": i + 1, "series": name, "value": float(v)}
            for name, values in per_layer.items() for i, v in enumerate(values)]
    order = list(per_layer)
    color = alt.Color("series:N", sort=order, scale=alt.Scale(domain=order, range=PALETTE[: len(order)]), title=None)
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log") if log_scale else alt.Scale())
    return alt.Chart(pd.DataFrame(rows)).mark_line(point=True).encode(
        x=alt.X("layer:O", title="Layer"), y=y, color=color,
        tooltip=["series:N", "layer:O", alt.Tooltip("value:Q", format=".3g")],
    ).properties(title=title, width=width, height=height)


def save_chart(chart, stem: str | Path, *, formats: Sequence[str] = ("svg", "png"), scale: float = 2.0) -> list[Path]:
    """Write ``chart`` as ``stem.svg`` / ``stem.png`` (vl-convert, no browser or network needed)."""
    import vl_convert as vlc

    spec = chart.to_json()
    written = []
    for fmt in formats:
        path = Path(f"{stem}.{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "svg":
            path.write_text(vlc.vegalite_to_svg(spec))
        elif fmt == "png":
            path.write_bytes(vlc.vegalite_to_png(spec, scale=scale))
        else:
            raise ValueError(f"format {fmt!r}: choose svg or png")
        written.append(path)
    return written


def accuracy_heatmap(frame: pd.DataFrame, *, relations: Sequence[str], title: str = "", size: int = 300):
    """Layer × head heat map of accuracy with pickers for relation and direction.

    ``frame`` has columns ``relation, direction, layer, head, label, accuracy`` (see
    :func:`helpers.syntax.run.accuracy_frame`).
    """
    alt = altair_offline()

    rel_pick = alt.param(name="relation", value=relations[0],
                         bind=alt.binding_select(options=list(relations), name="relation "))
    directions = sorted(frame["direction"].unique())
    dir_pick = alt.param(name="direction", value=directions[0],
                         bind=alt.binding_radio(options=directions, name="direction "))
    return alt.Chart(frame, title=title or "Accuracy of each head as a parser").mark_rect().encode(
        x=alt.X("head:O", title="Head"), y=alt.Y("layer:O", title="Layer"),
        color=alt.Color("accuracy:Q", scale=alt.Scale(scheme="viridis", domain=[0, 100]), title="accuracy (%)"),
        tooltip=[alt.Tooltip("label:N", title="head"), "relation:N", "direction:N", alt.Tooltip("accuracy:Q", format=".1f")],
    ).add_params(rel_pick, dir_pick).transform_filter(
        (alt.datum.relation == rel_pick) & (alt.datum.direction == dir_pick)
    ).properties(width=size, height=size * frame["layer"].max() / max(frame["head"].max(), 1))


def head_map(coords: np.ndarray, table: pd.DataFrame, *, color: str, title: str = "", size: int = 320,
             sequential: bool = False):
    """Scatter of heads in a 2-D embedding, coloured by the ``color`` column of ``table``.

    ``table`` has one row per head (flattened order) with a ``label`` column and any statistics to
    show in the tooltip.
    """
    alt = altair_offline()

    frame = table.copy()
    frame["x"], frame["y"] = coords[:, 0], coords[:, 1]
    scale = alt.Scale(scheme="redblue", reverse=True) if sequential else alt.Scale(scheme="tableau10")
    enc = alt.Color(f"{color}:{'O' if sequential else 'N'}", scale=scale, title=color)
    tooltip = [c for c in frame.columns if c not in ("x", "y")]
    return alt.Chart(frame, title=title).mark_point(filled=True, size=70).encode(
        x=alt.X("x:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
        y=alt.Y("y:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
        color=enc, shape=alt.Shape(f"{color}:N", legend=None) if not sequential else alt.value("circle"),
        tooltip=tooltip,
    ).properties(width=size, height=size).interactive()


def distance_heatmap(D: np.ndarray, labels: Sequence[str], order: Sequence[int], *, title: str = "", size: int = 420):
    """Heat map of a ``[head, head]`` distance matrix with rows and columns in ``order``."""
    alt = altair_offline()

    order = list(order)
    ordered = [labels[k] for k in order]
    rows = [{"a": labels[i], "b": labels[j], "distance": round(float(D[i, j]), 1)} for i in order for j in order]
    return alt.Chart(alt.Data(values=rows), title=title).mark_rect().encode(
        x=alt.X("b:N", sort=ordered, title=None, axis=alt.Axis(labelFontSize=6)),
        y=alt.Y("a:N", sort=ordered, title=None, axis=alt.Axis(labelFontSize=6)),
        color=alt.Color("distance:Q", scale=alt.Scale(scheme="viridis", reverse=True), title="JS distance"),
        tooltip=["a:N", "b:N", alt.Tooltip("distance:Q", format=".1f")],
    ).properties(width=size, height=size)
