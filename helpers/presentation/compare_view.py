"""Tables, charts and paragraphs of the model comparison (chapter 08): verdicts side by side, depth profiles,
values, and the chapter's text (the models compared, the sizes they ran at, the findings), so that a cell calls
one function here and shows or glues what it returns.
"""
from __future__ import annotations

from helpers.claims import NOT_APPLICABLE, VERDICTS, by_id
from helpers.compare.findings import findings, verdict_counts
from helpers.compare.run import DEPTH_STATISTICS, ModelResult, chapter_sizes, compare_json, id_list, sizes_text
from helpers.presentation.verdicts import VERDICT_COLOURS, verdict_legend_html
from helpers.presentation.views import altair_offline

# ------------------------------------------------------------------------------- chapter views


def compare_html(results: list[ModelResult]) -> str:
    """Every claim x model as an HTML table, after a legend of the colours: the paper's number, then each model's
    number with its verdict on its colour (:data:`VERDICT_COLOURS`)."""
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
    return verdict_legend_html() + (f"<table class='dataframe'><thead><tr><th>§</th><th>claim</th><th>paper (BERT-base)</th>{head}</tr></thead>"
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
            for layer, v in enumerate(r.depth.get(key, ())):  # a decoder has no [SEP] (absent: no line)
                rows.append({"model": r.card["name"], "layer": layer + 1, "relative_depth": (layer + 1) / n,
                             "series": DEPTH_STATISTICS.get(key, key), "value": float(v)})
    return pd.DataFrame(rows, columns=["model", "layer", "relative_depth", "series", "value"])


def decoder_note(decoder: ModelResult | None) -> str:
    """The sentence that says which decoder the depth figures draw beside the encoders (:func:`helpers.compare.run.
    decoder_spec`), or that none is installed."""
    if decoder is None:
        return ("No trained decoder is installed (python -m helpers install-model smollm2), so the figures show the "
                "encoders only.")
    card = decoder.card
    return (f"The decoder of the attention sinks chapter, {card['name']} ({card['layers']} layers x {card['heads']} "
            "heads), is drawn beside them on relative depth: its attention to its first position (BOS) takes [CLS]'s "
            "line, and it has no [SEP]. Its claims are in that chapter; the paper's claims are not run again for it here.")


def models_text(results: list[ModelResult]) -> str:
    """The models compared, each with its shape: ``"a (2 layers x 4 heads); b (12 layers x 12 heads)"``."""
    return "; ".join(f"{r.card['name']} ({r.card['layers']} layers x {r.card['heads']} heads)" for r in results)


def sizes_note(results: list[ModelResult], ctx) -> str:
    """The sentence that says at which sizes the models ran: the book's model at the chapters' sizes (the small test
    configuration's in a small build, ``ctx.small``), the others, if any, at the reduced sizes of
    :func:`helpers.compare.run.chapter_sizes` (those of the first of them, the same for all)."""
    others = [r for r in results if chapter_sizes(r.spec, ctx)]
    note = ("The book's model's rows are those of the chapters (same sizes, read from their cache"
            + ("; this build uses the small test configuration" if ctx.small else "") + ").")
    if others:
        note += (f" To keep the book's build within budget, {id_list([r.card['name'] for r in others])} use reduced "
                 f"sizes: {sizes_text(chapter_sizes(others[0].spec, ctx))}; their verdicts rest on less data than the "
                 "book's model.")
    return note


def _claims(n: int, verb: str | None = None) -> str:
    """``"1 claim"``, ``"2 claims"``; with ``verb`` (its plural, "are", "depend"), the verb agreeing after it."""
    text = f"{n} claim" + ("" if n == 1 else "s")
    if verb is None:
        return text
    return f"{text} {verb if n != 1 else {'are': 'is', 'apply': 'applies'}.get(verb, verb + 's')}"


def findings_text(results: list[ModelResult]) -> str:
    """The chapter's findings paragraph, from :func:`helpers.compare.findings.findings`: the claims every pre-trained
    model reproduces (and what that suggests, with more than one such model), those that depend on the model, those
    none reproduces, each pre-trained model's "partly" and "inconclusive" claims (shown as themselves, never as
    holding), those that apply to no pre-trained model (if any), and, with random-init controls among ``results``,
    the claims they reproduce too, judged on the trained-minus-random difference (and, apart, those only their own
    verdict speaks for, and those pre-training adds to)."""
    groups = findings(results)
    trained = [r for r in results if not r.card["random_init"]]
    controls = [r.card["name"] for r in results if r.card["random_init"]]
    parts = [f"Across the pre-trained models ({id_list([r.card['name'] for r in trained])}), "
             f"{_claims(len(groups.shared), 'are')} reproduced by every one of "
             f"them: {id_list(groups.shared)}. "
             + ("These look like properties of pre-trained transformers rather than of one model." if len(trained) > 1
                else "With one pre-trained model, nothing can be said yet about other models."),
             f"{_claims(len(groups.model_dependent), 'depend')} on the model (reproduced by some, not by others): "
             f"{id_list(groups.model_dependent)}.",
             f"{_claims(len(groups.none), 'are')} reproduced by none of them: "
             f"{id_list(groups.none)}.",
             "Short of reproduced, " + "; ".join(
                 f"{r.card['name']} gives \"partly\" for {_claims(len(groups.partly[r.spec]))} "
                 f"({id_list(groups.partly[r.spec])}) and \"inconclusive\" for {_claims(len(groups.inconclusive[r.spec]))} "
                 f"({id_list(groups.inconclusive[r.spec])})" for r in trained) + "."]
    if groups.not_applicable:
        parts.append(f"{_claims(len(groups.not_applicable), 'apply')} to none of them: {id_list(groups.not_applicable)}.")
    if controls:
        if groups.random_too:
            parts.append(f"The random-init controls ({id_list(controls)}) reproduce {_claims(len(groups.random_too))} "
                         f"too: {id_list(groups.random_too)} (their own verdict is \"reproduced\" or \"partly\", and "
                         "the pre-trained model's statistic does not exceed theirs beyond chance); for these the verdict "
                         "does not need pre-training (the pattern comes with the architecture or the input format, or "
                         "the claim is a negative one that an untrained model satisfies too).")
        else:
            parts.append(f"Judged on the difference of their statistics, the random-init controls ({id_list(controls)}) "
                         "reproduce no claim too.")
        if groups.random_learned:
            parts.append(f"For {_claims(len(groups.random_learned))} a control's own verdict is \"reproduced\" or "
                         f"\"partly\", but pre-training adds to the pattern beyond chance: "
                         f"{id_list(groups.random_learned)}.")
        if groups.random_own_verdict:
            parts.append(f"For {_claims(len(groups.random_own_verdict))} a control's own verdict is \"reproduced\" or "
                         "\"partly\" but the two rows carry no intervals on a common scale, so that verdict alone "
                         f"says the control reproduces {'it' if len(groups.random_own_verdict) == 1 else 'them'} too: "
                         f"{id_list(groups.random_own_verdict)}.")
    return " ".join(parts)


def verdict_table(results: list[ModelResult]):
    """``model | reproduced | partly | inconclusive | not reproduced | not applicable``: how many of its claims each
    model gets each verdict for (:func:`helpers.compare.findings.verdict_counts`), one row per model."""
    import pandas as pd

    counts = verdict_counts(results)
    frame = pd.DataFrame([{"model": r.card["name"], **counts[r.spec]} for r in results],
                         columns=["model", *VERDICTS, NOT_APPLICABLE])
    return frame.set_index("model")


def random_table(results: list[ModelResult]):
    """The random-init controls' test, one row per claim a control gets "reproduced" or "partly" for, and per
    statistic it is judged on (a combined claim's parts one by one): ``claim | control | its verdict | statistic |
    pre-trained | control's | difference | reproduces too``, each number with its 95 % interval; "—" where the two rows carry no
    interval on a common scale (then the control's own verdict decides: "own verdict only"). Without such a claim
    (or without a control), one row whose claim is "none"."""
    import pandas as pd

    from helpers.claims import interval_text
    from helpers.compare.findings import HOLDS_TOO

    names = {r.spec: r.card["name"] for r in results}
    rows = []
    for t in findings(results).tests:
        if t.verdict not in HOLDS_TOO:
            continue
        base = {"claim": t.claim, "control": names[t.control], "its verdict": t.verdict}
        if not t.differences:
            rows.append({**base, "statistic": None, "pre-trained": None, "control's": None, "difference": None,
                         "reproduces too": "yes, on its own verdict only" if t.too else "no"})
        for d in t.differences:
            rows.append({**base, "statistic": d.name or "estimate",
                         "pre-trained": interval_text(d.trained, d.trained_interval, ".3g"),
                         "control's": interval_text(d.random, d.random_interval, ".3g"),
                         "difference": interval_text(d.estimate, d.interval, ".3g"),
                         "reproduces too": "no: pre-training adds to it" if d.learned else "yes" if t.too else "no"})
    columns = ["claim", "control", "its verdict", "statistic", "pre-trained", "control's", "difference",
               "reproduces too"]
    return pd.DataFrame(rows or [{"claim": "none"}], columns=columns)


def cost_table(results: list[ModelResult]):
    """``model | sizes | seconds | peak resident memory (GiB)``: each model's run in this build, at its sizes (the
    reduced ones as :func:`helpers.compare.run.sizes_text` says them, else the chapters')."""
    import pandas as pd

    cost = pd.DataFrame([{"model": r.card["name"],
                          "sizes": sizes_text(r.sizes) if "n_segments" in r.sizes else "the chapters' sizes",
                          "seconds": r.seconds, "peak resident memory (GiB)": r.peak_rss_gib} for r in results])
    return cost.set_index("model")


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
    alt = altair_offline()

    from helpers.presentation.charts import PALETTE

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
    alt = altair_offline()

    from helpers.presentation.charts import PALETTE

    frame = value_frame(results, ids)
    models = list(dict.fromkeys(frame["model"]))
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("id:N", sort=ids, title=None), xOffset=alt.XOffset("model:N", sort=models),
        y=alt.Y("value:Q", title=y_title),
        color=alt.Color("model:N", sort=models, scale=alt.Scale(domain=models, range=PALETTE[: len(models)]), title=None),
        tooltip=["model:N", "id:N", alt.Tooltip("value:Q", format=".1f"), "verdict:N"],
    ).properties(width=width, height=height)
