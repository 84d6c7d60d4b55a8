"""Paper §5's claims: thresholds as named constants, one verdict rule per claim, and :func:`claims`.
"""
from __future__ import annotations

import numpy as np

from helpers import paper
from helpers.claims import (
    Claim,
    Verdict,
    at_most_partly_if_overlaps,
    interval_text,
    verdict,
)
from helpers.probe.run import seed_interval

# Thresholds of the §5 verdicts (see :func:`claims`).
PAPER_SECTION = "§5"  # the paper section of these claims (the record's ``paper``)
PROBE_GAIN = 10        # UAS points that count as "far better" / "does poorly" (the paper's gaps are 16-47 points)
CLAIM_TEST = "test"    # the test set the verdicts rest on: GUM test, in the domain the probes were trained on


def verdict_probe_attn(attn: float, right_branching: float, interval) -> Verdict:
    """§5: the attention-only probe beats right-branching by at least :data:`PROBE_GAIN` UAS points
    (reproduced) or at all (partly); "partly" at best when its seed ``interval`` holds right-branching."""
    return at_most_partly_if_overlaps(verdict(attn - right_branching >= PROBE_GAIN, attn > right_branching),
                                      interval, right_branching)


def verdict_probe_attn_words(attn_words: float, attn: float, distances_words: float, interval) -> Verdict:
    """§5: attention-and-words beats distances-and-words and beats attention-only by at least
    :data:`PROBE_GAIN` points (reproduced), or beats attention-only at all (partly); "partly" at best
    when its seed ``interval`` holds either compared number."""
    full = attn_words > max(attn, distances_words) and attn_words - attn >= PROBE_GAIN
    return at_most_partly_if_overlaps(verdict(full, attn_words > attn), interval, attn, distances_words)


def verdict_probe_random_init(attn_words: float, random_init: float, interval) -> Verdict:
    """§5: with a randomly initialised model's attention the probe loses at least :data:`PROBE_GAIN` points
    (reproduced), else not; "partly" at best when the trained model's seed ``interval`` holds the
    random-init number."""
    return at_most_partly_if_overlaps(verdict(attn_words - random_init >= PROBE_GAIN), interval, random_init)


def claims(result: dict) -> list[Claim]:
    """The §5 claims from :func:`run_probes`'s result, on GUM test (:data:`CLAIM_TEST`), each verdict from
    its rule above; intervals are Student-t over seeds."""
    rows = result["rows"]
    runs = {name: r[CLAIM_TEST]["runs"] for name, r in rows.items() if CLAIM_TEST in r}
    m = {name: float(np.mean(v)) for name, v in runs.items()}
    ci = {name: seed_interval(v) for name, v in runs.items()}
    p = paper.table3  # the paper's UAS for our probe of that name
    n_seeds = len(runs["Attn"])
    where = f"UAS, GUM test, {n_seeds} seed{'s' if n_seeds != 1 else ''}"
    return [
        Claim("probe-attn-over-right-branching", PAPER_SECTION, "attention-only probe parses far better than right-branching",
              f"{p('Attn')} vs {p('Right-branching')} UAS",
              f"{interval_text(m['Attn'], ci['Attn'])} vs {m['Right-branching']:.1f} ({where})", m["Attn"],
              verdict_probe_attn(m["Attn"], m["Right-branching"], ci["Attn"])),
        Claim("probe-attn-words-best", PAPER_SECTION, "attention-and-words probe beats attention-only and distances-and-words",
              f"{p('Attn + words')} vs {p('Attn')} and {p('Distances + words')} UAS",
              f"{interval_text(m['Attn + words'], ci['Attn + words'])} vs {m['Attn']:.1f} and {m['Distances + words']:.1f} ({where})",
              m["Attn + words"],
              verdict_probe_attn_words(m["Attn + words"], m["Attn"], m["Distances + words"], ci["Attn + words"])),
        Claim("probe-random-init-fails", PAPER_SECTION, "random-init attention makes the probe fail",
              f"{p('Random-init Attn + words')} vs {p('Attn + words')} UAS",
              f"{interval_text(m['Random-init Attn + words'], ci['Random-init Attn + words'])} vs {m['Attn + words']:.1f} ({where})",
              m["Random-init Attn + words"],
              verdict_probe_random_init(m["Attn + words"], m["Random-init Attn + words"], ci["Attn + words"])),
    ]
