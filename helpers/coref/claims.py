"""Paper §4.3's claims: thresholds as named constants, one verdict rule per claim, and :func:`claims`.
"""
from __future__ import annotations

from helpers import paper
from helpers.claims import (
    Claim,
    Verdict,
    at_most_partly_if_overlaps,
    interval_text,
    verdict,
)
from helpers.core.labels import head_label
from helpers.coref.run import CorefRun, Setting

# Thresholds of the §4.3 verdict (see :func:`verdict_coref_head`).
PAPER_SECTION = "§4.3"  # the paper section of these claims (the record's ``paper``)
COREF_MARGIN = 10  # points: the paper's "improving by over 10 accuracy points on the string-matching baseline"
COREF_CLOSE = 5    # points: "close to the rule-based system" = at most this far below it
CLAIM_SETTING: Setting = "windows"  # the verdict rests on the largest evaluation: whole documents


def verdict_coref_head(accuracy: float, head_match: float, rule_based: float, interval) -> Verdict:
    """§4.3: the head beats head-word matching by more than :data:`COREF_MARGIN` points and is at most
    :data:`COREF_CLOSE` points below the rule-based system (reproduced), or does one of the two (partly);
    "partly" at best when the head's 95% ``interval`` holds either baseline's accuracy."""
    beats = accuracy - head_match > COREF_MARGIN
    close = accuracy >= rule_based - COREF_CLOSE
    return at_most_partly_if_overlaps(verdict(beats and close, beats or close), interval, head_match, rule_based)


def claims(dev: CorefRun, test: CorefRun) -> list[Claim]:
    """The §4.3 claim from whole-document runs (``setting="windows"``, the largest evaluation) on GUM dev,
    where the head is chosen, and GUM test, where it is scored with a 95% interval over documents."""
    for run in (dev, test):
        if run.setting != CLAIM_SETTING:
            raise ValueError(f"coref claims rest on the {CLAIM_SETTING!r} setting; got a {run.setting!r} run of {run.split}")
    layer, head = dev.best_head()
    acc = float(test.accuracy()["all"][layer, head])
    base = test.baseline_accuracy()
    hm, rb = base["head match"]["all"], base["rule-based"]["all"]
    interval = test.head_interval(layer, head)
    p = paper.TABLE2
    return [Claim("coref-head", PAPER_SECTION,
                  f"a head selects antecedents over {COREF_MARGIN} points above head-word matching, close to the rule-based system",
                  f"{p[paper.COREF_HEAD_ROW].all} ({paper.COREF_HEAD.value}) vs {p['Head match'].all} and {p['Rule-based'].all}",
                  f"{interval_text(acc, interval)} ({head_label(layer, head)}, chosen on dev) vs {hm:.1f} and {rb:.1f} "
                  f"({test.counts()['all']:,} mentions, whole documents)",
                  acc, verdict_coref_head(acc, hm, rb, interval))]
