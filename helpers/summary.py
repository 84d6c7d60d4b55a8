"""Every claim of the paper in one table (the book's "Results at a glance"), from the chapters' runs.

Each row: ``(claim, paper, ours, verdict, chapter notebook)``. The verdict rules are the chapters'
own (thresholds named below and in each chapter).
"""
from __future__ import annotations

from . import paper
from .labels import head_label
from .syntax import ALL
from .syntax_pipeline import SPECIALISED_MARGIN

PROBE_GAIN = 10        # points that count as "far better" (as the probing chapter)
COREF_MARGIN, COREF_CLOSE = 10, 5
LAYER_P = 0.05


def _verdict(full: bool, partial: bool = False) -> str:
    return "reproduced" if full else ("partly" if partial else "not reproduced")


def all_claims(surface, heads_test, coref_dev, coref_test, probes: dict, cluster) -> list[tuple[str, str, str, str, str]]:
    """Rows for the summary table from a surface report, a GUM-test heads run, coreference runs on dev
    and test, the probes' result and the clustering result."""
    rows = [(c["claim"], c["paper"], c["ours"], c["verdict"], "03_surface_patterns") for c in surface.to_json()["claims"]]
    t1 = heads_test.scores.table()
    p_all = paper.TABLE1[ALL]
    rows.append(("best single head on all relations stays far from parsing",
                 f"{p_all[1]} ({p_all[0]}) vs baseline {p_all[2]}",
                 f"{t1[ALL]['accuracy']:.1f} ({t1[ALL]['best_head']}) vs baseline {t1[ALL]['baseline_accuracy']:.1f}",
                 _verdict(t1[ALL]["accuracy"] < 50), "04_syntax_heads"))
    for rel in ("det", "obj", "nmod:poss", "aux:pass", "compound:prt"):
        ref = paper.table1_row(rel)
        if rel in t1 and ref:
            sd, (head, acc, base, _) = ref
            gain = t1[rel]["accuracy"] - t1[rel]["baseline_accuracy"]
            rows.append((f"a head specialises in {rel} (paper: {sd})", f"{acc} ({head}) vs {base}",
                         f"{t1[rel]['accuracy']:.1f} ({t1[rel]['best_head']}) vs {t1[rel]['baseline_accuracy']:.1f}",
                         _verdict(gain >= SPECIALISED_MARGIN, gain > 5), "04_syntax_heads"))
    layer, head = coref_dev.best_head()
    acc, base = coref_test.accuracy()["all"][layer, head], coref_test.baseline_accuracy()
    hm, rb = base["head match"]["all"], base["rule-based"]["all"]
    rows.append(("a head selects antecedents >10 points above head-word matching, close to the rule-based system",
                 f"{paper.TABLE2['Head 5-4'][0]} (5-4) vs {paper.TABLE2['Head match'][0]} and {paper.TABLE2['Rule-based'][0]}",
                 f"{acc:.1f} ({head_label(layer, head)}, chosen on dev) vs {hm:.1f} and {rb:.1f}",
                 _verdict(acc - hm > COREF_MARGIN and acc >= rb - COREF_CLOSE, acc > hm), "04_coreference_heads"))
    m = {name: r["test"]["mean"] for name, r in probes["rows"].items()}
    rows.append(("attention-only probe parses far better than right-branching",
                 f"{paper.TABLE3['Attn']} vs {paper.TABLE3['Right-branching']} UAS",
                 f"{m['Attn']:.1f} vs {m['Right-branching']:.1f} UAS (GUM test)",
                 _verdict(m["Attn"] - m["Right-branching"] >= PROBE_GAIN, m["Attn"] > m["Right-branching"]),
                 "05_probing_classifiers"))
    rows.append(("attention-and-words probe beats attention-only and distances-and-words",
                 f"{paper.TABLE3['Attn + GloVe']} vs {paper.TABLE3['Attn']} and {paper.TABLE3['Distances + GloVe']}",
                 f"{m['Attn + words']:.1f} vs {m['Attn']:.1f} and {m['Distances + words']:.1f}",
                 _verdict(m["Attn + words"] > max(m["Attn"], m["Distances + words"])), "05_probing_classifiers"))
    rows.append(("random-init attention makes the probe fail", f"{paper.TABLE3['Random Init Attn + GloVe']} UAS",
                 f"{m['Random-init Attn + words']:.1f} UAS",
                 _verdict(m["Attn + words"] - m["Random-init Attn + words"] >= PROBE_GAIN), "05_probing_classifiers"))
    sim = cluster.similarity
    rows.append(("heads in the same layer behave alike", "observed in Figure 6",
                 f"within/between distance {sim['ratio']:.2f}, permutation p = {sim['p_value']:.3f}",
                 _verdict(sim["p_value"] < LAYER_P), "06_clustering_heads"))
    return rows


def claims_html(rows) -> str:
    """The rows as an HTML table with bold verdicts and links to the chapters' pages."""
    from html import escape

    import pandas as pd

    return pd.DataFrame([{"claim": escape(c), "paper": escape(p), "ours": escape(o), "verdict": f"<b>{v}</b>",
                          "chapter": f'<a href="{ch}.html">{escape(ch.split("_", 1)[1].replace("_", " "))}</a>'}
                         for c, p, o, v, ch in rows]).to_html(escape=False, index=False)
