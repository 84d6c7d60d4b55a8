"""Numbers the paper reports, each with its source, so chapters never type them by hand.

Heads are the paper's 1-based ``"layer-head"`` labels. These are the paper's results on BERT-base
(uncased, English) with WSJ / Wikipedia / CoNLL-2012 data: references to show beside ours, never
our results.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reported:
    value: float | str
    source: str
    note: str = ""


SPLIT_WORD_FRACTION = Reported(0.08, "§4.1", "~8% of words split into several tokens (WSJ, BERT WordPiece)")
N_LAYERS = Reported(12, "§2", "BERT-base: 12 layers of 12 heads")
N_HEADS = Reported(12, "§2")

# §3 surface patterns (Wikipedia segments)
PREV_TOKEN_HEADS = Reported(4, "§3.1", "heads with >50% attention on the previous token, in layers 2, 4, 7, 8")
NEXT_TOKEN_HEADS = Reported(5, "§3.1", "heads with >50% attention on the next token, in layers 1, 2, 2, 3, 6")
SEP_SELF_ATTENTION = Reported(0.90, "§3.2 / Figure 2 bottom", "heads at [SEP] attend >90% to [SEP]")
CLS_ENTROPY_LAST_LAYER = Reported(3.89, "§3.3", "entropy (nats) of attention from [CLS], last layer")

# Table 1: relation -> (head, accuracy, baseline accuracy, baseline offset); Stanford Dependencies on WSJ.
# The auxpass row is printed as "4-10 82.5 40.5 (1)"; the authors' notebook prints 94.1 for that head
# with an 82.5 baseline, so the printed row is probably a transcription slip (see the book).
TABLE1 = {
    "all": ("7-6", 34.5, 26.3, 1), "prep": ("7-4", 66.7, 61.8, -1), "pobj": ("9-6", 76.3, 34.6, -2),
    "det": ("8-11", 94.3, 51.7, 1), "nn": ("4-10", 70.4, 70.2, 1), "nsubj": ("8-2", 58.5, 45.5, 1),
    "amod": ("4-10", 75.6, 68.3, 1), "dobj": ("8-10", 86.8, 40.0, -2), "advmod": ("7-6", 48.8, 40.2, 1),
    "aux": ("4-10", 81.1, 71.5, 1), "poss": ("7-6", 80.5, 47.7, 1), "auxpass": ("4-10", 82.5, 40.5, 1),
    "ccomp": ("8-1", 48.8, 12.4, -2), "mark": ("8-2", 50.7, 14.5, 2), "prt": ("6-7", 99.1, 91.4, -1),
}
TABLE1_SOURCE = "Table 1"

# Table 2: antecedent selection accuracy (%), All / Pronoun / Proper / Nominal, CoNLL-2012.
TABLE2 = {
    "Nearest": (27, 29, 29, 19), "Head match": (52, 47, 67, 40), "Rule-based": (69, 70, 77, 60),
    "Neural coref": (83, None, None, None), "Head 5-4": (65, 64, 73, 58),
}
TABLE2_SOURCE = "Table 2"

# Table 3: UAS on the WSJ dev set.
TABLE3 = {
    "Structural probe": 80, "Right-branching": 26, "Distances + GloVe": 58,
    "Random Init Attn + GloVe": 30, "Attn": 61, "Attn + GloVe": 77,
}
TABLE3_SOURCE = "Table 3"

# Closest UD counterpart of each Stanford Dependencies relation of Table 1 (../shared/data/README.md).
# UD attaches a preposition to its object, so SD prep ~ UD case and SD pobj ~ UD obl / nmod.
UD_TO_SD = {
    "case": "prep", "obl": "pobj", "nmod": "pobj", "det": "det", "compound": "nn", "nsubj": "nsubj",
    "amod": "amod", "obj": "dobj", "advmod": "advmod", "aux": "aux", "nmod:poss": "poss",
    "aux:pass": "auxpass", "ccomp": "ccomp", "mark": "mark", "compound:prt": "prt", "all": "all",
}


def table1_row(ud_relation: str) -> tuple[str, tuple] | None:
    """``(Stanford relation, (head, accuracy, baseline, offset))`` of Table 1 for a UD relation, if any."""
    sd = UD_TO_SD.get(ud_relation)
    return (sd, TABLE1[sd]) if sd in TABLE1 else None
