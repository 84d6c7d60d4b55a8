"""A tiny BLiMP written here (no pair of BLiMP's own is copied into the tests): paradigm files shaped like
``blimp/data/*.jsonl`` in the phenomena the chapter's groups are matched with and one more, and the two summary files.
Sentences use the toy vocabularies of the tiny models (tests/conftest.py, tests/tiny_decoders.py)."""
from __future__ import annotations

import json
from pathlib import Path

# paradigm -> (phenomenon, [(good, bad, prefix or None, good word, bad word)])
PARADIGMS = {
    "determiner_noun_agreement_1": ("determiner_noun_agreement", [
        ("the cat sat on the mat .", "the cats sat on a mat .", None, None, None),
        ("a dog sat .", "a dogs sat .", "a", "dog", "dogs"),
        ("the dog is big .", "a dogs is big .", None, None, None)]),
    "determiner_noun_agreement_2": ("determiner_noun_agreement", [
        ("the cat is big .", "a cats is big .", None, None, None),
        ("a cat sat on the mat .", "a cats sat on the mat .", "a", "cat", "cats"),
        ("the mat is big .", "a mats is big .", None, None, None)]),
    "regular_plural_subject_verb_agreement_1": ("subject_verb_agreement", [
        ("the cat is big .", "the cat are big .", "the cat", "is", "are"),
        ("the cats sit on the mat .", "the cats sits on the mat .", "the cats", "sit", "sits"),
        ("the dog sat .", "the dog sit .", "the dog", "sat", "sit")]),
    "anaphor_gender_agreement": ("anaphor_agreement", [
        ("the cat sat on its mat .", "the cat sat on their mat .", "the cat sat on", "its", "their"),
        ("a dog is big .", "a dog are big .", "a dog", "is", "are"),
        ("the dog sat .", "the dog sit .", "the dog", "sat", "sit")]),
    "principle_A_case_1": ("binding", [
        ("the cat sat on the mat .", "the mat sat on the cat .", None, None, None),
        ("the dog is big .", "big is the dog .", None, None, None),
        ("a cat sat .", "sat a cat .", None, None, None)]),
    "adjunct_island": ("island_effects", [
        ("the cat sat on the mat .", "on the mat the cat sat .", None, None, None),
        ("the dog is big .", "is the dog big .", None, None, None),
        ("a dog sat on a mat .", "a dog on a mat sat .", None, None, None)]),
}


def write_blimp(data: Path) -> Path:
    """``data/blimp/data/*.jsonl``, ``data/blimp/results/*`` and ``data/blimp/COMMIT`` (``data`` is returned)."""
    root = data / "blimp"
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "results").mkdir(exist_ok=True)
    for uid, (term, pairs) in PARADIGMS.items():
        lines = []
        for n, (good, bad, prefix, word_good, word_bad) in enumerate(pairs):
            row = {"sentence_good": good, "sentence_bad": bad, "field": "morphology", "linguistics_term": term,
                   "UID": uid, "simple_LM_method": True, "one_prefix_method": prefix is not None,
                   "two_prefix_method": False, "lexically_identical": False, "pairID": str(n)}
            if prefix is not None:
                row.update(one_prefix_prefix=prefix, one_prefix_word_good=word_good, one_prefix_word_bad=word_bad)
            lines.append(json.dumps(row))
        (root / "data" / f"{uid}.jsonl").write_text("\n".join(lines) + "\n")
    summary = [{"UID": uid, "linguistics_term": term, "ngram": 0.6, "lstm": 0.7, "txl": 0.75, "gpt2": 0.8 + 0.02 * k}
               for k, (uid, (term, _)) in enumerate(PARADIGMS.items())]
    summary.append({"UID": "overall", "linguistics_term": "overall", "ngram": 0.6, "lstm": 0.7, "txl": 0.75, "gpt2": 0.85})
    (root / "results" / "models_summary.jsonl").write_text("\n".join(json.dumps(r) for r in summary) + "\n")
    (root / "results" / "human_validation_summary.csv").write_text(
        '"Condition","accepted","total_mean","count"\n' + "".join(f'"{uid}",5,0.9,100\n' for uid in PARADIGMS))
    (root / "COMMIT").write_text("0" * 40 + "\n")
    return data
