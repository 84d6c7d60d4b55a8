"""What the minimal-pairs chapter shows, built from the ``pairs`` JSON
(:meth:`helpers.minimal_pairs.section.PairsSectionReport.to_json`): the model's grammar per paradigm (a chart of the
paradigms beside the published GPT-2 and human figures) and per phenomenon, the head x phenomenon matrix, each group's
comparisons, the ranking of every head and mean beside zero ablation, and the sentences that say what was run. Each
chapter cell calls one of these.

Heads are labelled 1-based ``"layer-head"``; margins are in nats, accuracies in %.

>>> paradigm_chart(report.to_json())                        # doctest: +SKIP
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from helpers.minimal_pairs.run import ACCELERATOR_HEAD_PAIRS
from helpers.presentation.charts import PALETTE
from helpers.presentation.views import altair_offline, not_drawn

GROUP_TITLES = {"det": "det head", "sva": "nsubj, aux and cop heads", "coref": "coreference head"}
SOURCES = ("ours", "GPT-2 (large), published", "humans, published")


def with_interval(value: float | None, interval: Sequence[float] | None, fmt: str = ".1f", sign: bool = False) -> str:
    """``"77.6 [72.1, 83.1]"`` (``sign``: ``"+0.02 [-0.05, +0.08]"``); ``"—"`` for no value."""
    if value is None:
        return "—"
    spec = ("+" if sign else "") + fmt
    if interval is None:
        return format(value, spec)
    return f"{value:{spec}} [{interval[0]:{spec}}, {interval[1]:{spec}}]"


def _words(name: str) -> str:
    return name.replace("_", " ")


def paradigm_frame(result: dict) -> pd.DataFrame:
    """Long table ``paradigm, phenomenon, source, accuracy, low, high``: our accuracy with its interval and the
    published GPT-2 and human figures, one row per paradigm and source."""
    rows = []
    for p in result["grammar"]["paradigms"]:
        lo, hi = p["accuracy_interval"]
        rows.append({"paradigm": p["paradigm"], "phenomenon": _words(p["phenomenon"]), "source": SOURCES[0],
                     "accuracy": p["accuracy"], "low": lo, "high": hi})
        for key, source in (("gpt2", SOURCES[1]), ("human", SOURCES[2])):
            value = p.get("published", {}).get(key)
            if value is not None:
                rows.append({"paradigm": p["paradigm"], "phenomenon": _words(p["phenomenon"]), "source": source,
                             "accuracy": value, "low": value, "high": value})
    return pd.DataFrame(rows, columns=["paradigm", "phenomenon", "source", "accuracy", "low", "high"])


def paradigm_chart(result: dict, *, width: int = 360, row: int = 11):
    """Every chosen paradigm, grouped by phenomenon: our accuracy (dot, with its 95 % interval) beside the published
    GPT-2 and human figures (ticks), chance as a rule at 50 %."""
    alt = altair_offline()

    if not result.get("grammar"):
        return not_drawn("the paradigms", result.get("reason") or "the model scored no pair")
    frame = paradigm_frame(result)
    order = list(dict.fromkeys(frame.sort_values(["phenomenon", "paradigm"])["paradigm"]))
    color = alt.Color("source:N", scale=alt.Scale(domain=list(SOURCES), range=PALETTE[: len(SOURCES)]), title=None)
    y = alt.Y("paradigm:N", sort=order, title=None)
    x = alt.X("accuracy:Q", title="accuracy (%)", scale=alt.Scale(domain=[0, 100]))
    tooltip = ["paradigm:N", "phenomenon:N", "source:N", alt.Tooltip("accuracy:Q", format=".1f"),
               alt.Tooltip("low:Q", format=".1f", title="95 % low"), alt.Tooltip("high:Q", format=".1f",
                                                                                  title="95 % high")]
    ours = frame[frame["source"] == SOURCES[0]]
    bars = alt.Chart(ours).mark_rule(color=PALETTE[0]).encode(x="low:Q", x2="high:Q", y=y)
    dots = alt.Chart(ours).mark_point(filled=True, size=40).encode(x=x, y=y, color=color, tooltip=tooltip)
    ticks = alt.Chart(frame[frame["source"] != SOURCES[0]]).mark_tick(thickness=2, size=row - 2).encode(
        x=x, y=y, color=color, tooltip=tooltip)
    chance = alt.Chart(pd.DataFrame({"x": [50.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(x="x:Q")
    return alt.layer(chance, bars, ticks, dots).properties(width=width, height=row * len(order))


def phenomenon_rows(result: dict) -> list[dict]:
    """One row per phenomenon (and the whole selection): paradigms, pairs, our accuracy and mean margin with their
    intervals, and the published figures of the same paradigms (their mean)."""
    g = result["grammar"]
    rows = []
    for name, e in [*((_words(t["phenomenon"]), t) for t in g["phenomena"]), ("all chosen", g["overall"])]:
        pub = e.get("published", {})
        rows.append({"phenomenon": name, "paradigms": e["paradigms"], "pairs": e["n"],
                     "accuracy (%)": with_interval(e["accuracy"], e["accuracy_interval"]),
                     "margin (nats)": with_interval(e["margin"], e["margin_interval"], ".2f"),
                     "GPT-2 (%)": with_interval(pub.get("gpt2"), None), "humans (%)": with_interval(pub.get("human"), None)})
    return rows


def matrix_frame(result: dict, measure: str = "margin") -> pd.DataFrame:
    """Long table ``row, phenomenon, value, low, high, excludes, text`` of the matrix (``measure``: ``"margin"`` or
    ``"accuracy"``); ``excludes``: the 95 % interval excludes 0."""
    m = result["matrix"]
    rows = []
    for r, line in zip(m["rows"], m["cells"]):
        for t, cell in zip(m["phenomena"], line):
            value, interval = cell[measure], cell[f"{measure}_interval"]
            excludes = interval is not None and (interval[0] > 0 or interval[1] < 0)
            rows.append({"row": r["label"], "phenomenon": _words(t), "value": value,
                         "low": None if interval is None else interval[0],
                         "high": None if interval is None else interval[1], "excludes": excludes,
                         "text": "—" if value is None else f"{value:+.2f}{'*' if excludes else ''}"})
    return pd.DataFrame(rows, columns=["row", "phenomenon", "value", "low", "high", "excludes", "text"])


def matrix_chart(result: dict, *, measure: str = "margin", cell: int = 34):
    """The head x phenomenon matrix: the change in mean margin (nats; red: the removal hurts) with each row's heads
    removed, on each phenomenon, its value written in the cell and starred where its 95 % interval excludes 0."""
    alt = altair_offline()

    if not result.get("matrix"):
        return not_drawn("the matrix", result.get("reason") or "the paper's heads were not looked up")
    frame = matrix_frame(result, measure)
    top = float(frame["value"].abs().max() or 1.0)
    rows = list(dict.fromkeys(frame["row"]))
    cols = list(dict.fromkeys(frame["phenomenon"]))
    base = alt.Chart(frame).encode(x=alt.X("phenomenon:N", sort=cols, title=None, axis=alt.Axis(labelAngle=-40)),
                                   y=alt.Y("row:N", sort=rows, title="heads removed"))
    unit = "nats" if measure == "margin" else "points"
    rect = base.mark_rect().encode(
        color=alt.Color("value:Q", title=f"change ({unit})", scale=alt.Scale(scheme="redblue", domain=[-top, top])),
        tooltip=["row:N", "phenomenon:N", alt.Tooltip("value:Q", format="+.3f", title=f"change ({unit})"),
                 alt.Tooltip("low:Q", format="+.3f", title="95 % low"),
                 alt.Tooltip("high:Q", format="+.3f", title="95 % high")])
    text = base.mark_text(fontSize=9).encode(text="text:N")
    return alt.layer(rect, text).properties(width=cell * len(cols), height=cell * 0.7 * len(rows))


def group_rows(result: dict) -> list[dict]:
    """One row per group: its heads, the change in mean margin on its target phenomena with the heads removed, and the
    three differences its claim judges (against its layer's other heads, the other relations' heads, and the other
    phenomena), each with its 95 % interval (nats; negative: the group's removal hurts more)."""
    rows = []
    for group, e in (result.get("groups") or {}).items():
        if e.get("missing"):
            rows.append({"heads": GROUP_TITLES[group], "which": ", ".join(e["heads"]), "targets": e["missing"]})
            continue
        diff = lambda part: "—" if e.get(part) is None else with_interval(e[part]["difference"]["value"],  # noqa: E731
                                                                e[part]["difference"]["interval"], ".2f", True)
        rows.append({"heads": GROUP_TITLES[group], "which": ", ".join(e["heads"]),
                     "targets": ", ".join(_words(t) for t in e["targets"]),
                     "pairs": e["removed"]["n"],
                     "full model's margin": with_interval(e["base_margin"]["value"], e["base_margin"]["interval"], ".2f"),
                     "change removed": with_interval(e["removed"]["value"], e["removed"]["interval"], ".2f", True),
                     "vs same layer": diff("same_layer"), "vs other heads": diff("others"),
                     "vs other phenomena": diff("off_target")})
    return rows


def ranking_rows(result: dict, group: str) -> list[dict]:
    """The group's exactly removed heads (the top heads by importance and its own), by their change in mean margin on
    its targets: rank, importance (mean ``|d margin / d xi|``), the first-order estimate, the exact change with its
    interval; the group's heads marked."""
    e = result["groups"][group]
    ranking = e["ranking"]
    rows = []
    for t in sorted(ranking["top"], key=lambda t: t["rank"]):
        rows.append({"rank": t["rank"], "head": t["head"] + (" (paper's)" if t["head"] in e["heads"] else ""),
                     "importance": f"{t['importance']:.3f}", "first-order change": f"{t['first_order']:+.3f}",
                     "exact change (nats)": with_interval(t["margin"]["value"], t["margin"]["interval"], ".3f", True)})
    return rows


def percentile_text(result: dict, group: str) -> str:
    """The group's heads' percentiles among all heads by importance, with their intervals."""
    ranking = result["groups"][group]["ranking"]
    return "; ".join(f"{label}: {with_interval(p['value'], p['interval'], '.0f')}" for label, p in ranking["percentiles"].items())


def mean_rows(result: dict) -> list[dict]:
    """Mean ablation beside zero ablation, per group, on its target phenomena: the change in mean margin each way and
    their difference (paired over the same pairs), with 95 % intervals."""
    rows = []
    for group, e in (result.get("groups") or {}).items():
        m = e.get("mean_ablation")
        if not m:
            continue
        f = lambda x: "—" if x is None else with_interval(x["value"], x["interval"], ".3f", True)  # noqa: E731
        rows.append({"heads": GROUP_TITLES[group], "which": ", ".join(e["heads"]), "zeroed": f(m["zero_target"]),
                     "mean context": f(m["target"]), "mean minus zero": f(m["difference"])})
    return rows


def provenance_note(result: dict) -> str:
    """Where the scored model's weights come from, for the page's Setup: a Q4_1-quantised GGUF dequantised (the
    registry's SmolLM2) is said so."""
    if "Q4_1" in result["origin"]:
        return ("ours are those of the weights this book loads: the registry's SmolLM2-135M-Instruct, quantised to 4 "
                "bits (Q4_1, a GGUF file) and dequantised to float32, so they may differ slightly from the original "
                "model's.")
    return f"ours are those of {result['origin']}."


def book_sentence(book: dict | None) -> str:
    """What the book's model does with the pairs: ``None`` when it is the decoder scored above; an encoder without a
    masked-LM head is not graded (its reason); one with its own head, its accuracy."""
    if book is None:
        return "It is the decoder above."
    if not book["applicable"]:
        return f"It is not graded: {book['reason']}."
    o = book["grammar"]["overall"]
    return f"{book['model']} scores the same pairs by {book['scorer']}: {with_interval(o['accuracy'], o['accuracy_interval'])} % right."


def sizes_note(result: dict) -> str:
    """What was run on how much, for the chapter's Setup."""
    s, g = result["settings"], result.get("grammar")
    if g is None:
        return "Nothing was scored: " + (result.get("reason") or "no pair was chosen") + "."
    n_par = g["overall"]["paradigms"]
    each = "every pair" if s["pairs"] is None else f"the first {s['pairs']}"
    text = (f"{each.capitalize()} of each of {n_par} paradigms ({g['overall']['n']:,} pairs) are scored for the model's "
            "grammar")
    if s["heads"] and result.get("matrix"):
        heads_each = "every pair" if s["head_pairs"] is None else f"the first {s['head_pairs']}"
        n = result["matrix"]["cells"][0] if result["matrix"]["cells"] else []
        total = sum(c["n"] for c in n)
        text += (f"; {heads_each} of each ({total:,} pairs) with heads removed, against {s['draws']} control sets a "
                 "group")
    where = ("an accelerator's sizes" if s["everything"] else
             f"the CPU's sizes (an accelerator scores every pair, and {ACCELERATOR_HEAD_PAIRS} a paradigm with heads "
             "removed)")
    return text + f": {where}."
