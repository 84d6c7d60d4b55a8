"""Segments of paper §3/§6: the authors' document construction against a plain re-implementation of the
specification, paragraph pairs, the reported lengths and the ``segments`` command."""
import json
import random
from types import SimpleNamespace

import numpy as np
import pytest

from helpers.cli import main
from helpers.data.corpora import Document
from helpers.core.encoding import encode_ids
from helpers.data.segments import (
    Segment,
    chunk_document,
    document_segments,
    encode_segments,
    paper_segments,
    segment_tokens,
    split_position,
    truncate_pair,
)


def spec_segments(sentences, budget, seed):
    """The authors' ``prep_document`` (book/methods.md, §Segments), written out plainly on token lists:
    accumulate sentences until the chunk has >= budget tokens or the document ends; split before sentence
    k ~ U{1..len-1} (k = 1 for one sentence); while too long, drop the first or last token (coin flip) of the
    longer part (the second on ties); an empty part ends the document."""
    rng = random.Random(seed)
    result, start = [], 0
    sentences = [s for s in sentences if s]
    while start < len(sentences):
        end = start
        while end < len(sentences) - 1 and sum(len(s) for s in sentences[start:end + 1]) < budget:
            end += 1
        chunk = sentences[start:end + 1]
        k = rng.randint(1, len(chunk) - 1) if len(chunk) > 1 else 1
        first = sum(chunk[:k], [])
        second = sum(chunk[k:], [])
        while len(first) + len(second) > budget:
            side = first if len(first) > len(second) else second
            if rng.random() < 0.5:
                side.pop(0)
            else:
                side.pop(-1)
        if len(first) == 0 or len(second) == 0:
            break
        result.append((start, first, second))
        start = end + 1
    return result


def toy_sentences(seed, n=40):
    rng = np.random.default_rng(seed)
    out, token = [], 1000
    for _ in range(n):
        length = int(rng.integers(0 if rng.random() < 0.05 else 1, 30))
        out.append(list(range(token, token + length)))
        token += length
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("budget", [10, 25, 125])
def test_chunks_match_the_specification(seed, budget):
    sentences = toy_sentences(seed)
    ours = chunk_document(sentences, budget, random.Random(seed), "doc")
    ref = spec_segments(sentences, budget, seed)
    assert [(s.paragraph, list(s.ids_a), list(s.ids_b)) for s in ours] == [
        (start, a, b) for start, a, b in ref]
    # the reference's start index counts non-empty sentences, like ours
    for s in ours:
        assert 0 < len(s.ids_a) and 0 < len(s.ids_b) and len(s.ids_a) + len(s.ids_b) <= budget
        joined = list(s.ids_a) + list(s.ids_b)
        # tokens are consecutive ids except at most one gap (the split), since truncation trims only ends
        gaps = np.flatnonzero(np.diff(joined) != 1)
        assert len(gaps) <= 1


def test_long_first_sentence_ends_the_document():
    # a one-sentence chunk has no second part: the original stops reading that document
    assert chunk_document([list(range(30)), [1, 2], [3, 4]], 25, random.Random(0)) == []


def test_truncation_takes_from_the_longer_side_second_on_ties():
    class Front:  # always drop from the front
        def random(self):
            return 0.0
    assert truncate_pair([1, 2, 3], [4, 5, 6], 4, Front()) == ([2, 3], [5, 6])
    assert truncate_pair([1, 2, 3], [4, 5, 6], 5, Front()) == ([1, 2, 3], [5, 6])  # tie: the second loses


def _doc(doc_id, sentences):
    return Document(doc_id, tuple(SimpleNamespace(words=tuple(words), new_par=False) for words in sentences))


def test_document_segments_are_full_length_seeded_and_shuffled(tiny_lm):
    tok = tiny_lm.tokenizer
    words = ["the", "cat", "sat", "on", "the", "mat", "."]
    docs = [_doc(f"d{k}", [words * (1 + (j % 3)) for j in range(12)]) for k in range(5)]
    segs = paper_segments(docs, tok, n=12, max_length=32, seed=3)
    assert segs == paper_segments(docs, tok, n=12, max_length=32, seed=3)
    assert segs != paper_segments(docs, tok, n=12, max_length=32, seed=4)
    assert len(segs) == 12 and len({s.doc_id for s in segs}) > 1
    batch = encode_segments(tok, segs, max_length=32)
    assert not batch.skipped and all(len(e) <= 32 for e in batch.examples)
    # each document on its own follows the specification with the tokenizer's ids
    assert np.mean([len(e) == 32 for e in batch.examples]) > 0.5


def test_paper_segments_dispatch_and_bad_source(tiny_lm):
    docs = [_doc("d", [["the", "cat", "sat"]] * 6)]
    budget = 12 - tiny_lm.tokenizer.num_special_tokens_to_add(pair=True)
    assert paper_segments(docs, tiny_lm.tokenizer, n=2, max_length=12, seed=0) == \
        document_segments(docs, tiny_lm.tokenizer, n=2, budget=budget, seed=0)
    with pytest.raises(ValueError, match="--segments-from 'books'"):
        paper_segments(docs, tiny_lm.tokenizer, source="books")


def test_segment_tokens_and_split_position(tiny_lm):
    tok = tiny_lm.tokenizer
    batch = encode_ids([[1] * 5, [1] * 9, [1] * 10], max_length=128)
    lengths = [5, 9, 10]
    # tolerance: a float mean (relative 1e-6)
    assert segment_tokens(batch) == {"count": 3, "mean": pytest.approx(np.mean(lengths)), "median": 9.0,
                                     "min": 5, "max": 10}
    seg = Segment("d", 0, (9, 11), (10, 12, 13))
    ids = encode_segments(tok, [seg]).examples[0].input_ids.tolist()
    k = split_position(tok, seg)
    assert ids[k:k + 3] == [10, 12, 13] and ids[k - 1] == tok.sep_token_id


def test_segments_command_writes_the_inputs(tiny_model_dir, fake_data, tmp_path):
    out = tmp_path / "segs.json"
    for source in ("documents", "paragraphs"):
        rc = main(["segments", "--model", str(tiny_model_dir), "--data-dir", str(fake_data), "--segments", "3",
                   "--segments-from", source, "--max-length", "20", "--json", str(out), "--quiet"])
        assert rc == 0
        result = json.loads(out.read_text())
        assert set(result) >= {"model", "segments"} and result["segments"]
        for seg in result["segments"]:
            ids = seg["input_ids"]
            assert set(seg) == {"doc", "input_ids", "split"} and seg["doc"].startswith("GUM_a")
            assert ids[0] == 2 and ids[-1] == 3 and ids[seg["split"] - 1] == 3 and 1 < seg["split"] < len(ids) - 1
            assert len(ids) <= 20


@pytest.mark.slow
def test_default_segments_are_nearly_full_length(shared_data):
    from helpers import load_model
    from helpers.pipeline.segments import draw_segments

    lm = load_model()
    segs, batch = draw_segments(lm, n_segments=1000, seed=0)
    stats = segment_tokens(batch)
    assert stats["count"] == 1000 and stats["mean"] >= 120 and stats["max"] <= 128
    assert len({s.doc_id for s in segs}) > 50


@pytest.mark.parametrize("source", ["documents", "paragraphs"])
def test_surface_and_cluster_report_the_segments_they_use(tiny_model_dir, fake_data, tmp_path, source):
    common = ["--model", str(tiny_model_dir), "--data-dir", str(fake_data), "--segments", "5", "--max-length", "40",
              "--segments-from", source, "--quiet", "--cache-dir", str(tmp_path / "c")]
    out = tmp_path / "out.json"
    assert main(["segments", *common, "--json", str(out)]) == 0
    lengths = [len(s["input_ids"]) for s in json.loads(out.read_text())["segments"]]
    # tolerance: a float mean (relative 1e-6)
    expected = {"count": len(lengths), "mean": pytest.approx(np.mean(lengths)), "median": float(np.median(lengths)),
                "min": min(lengths), "max": max(lengths)}
    for command in (["surface", "--no-gradients"], ["cluster", "--no-linguistic", "--permutations", "10"]):
        assert main([*command, *common, "--json", str(out)]) == 0
        result = json.loads(out.read_text())
        assert result["segment_tokens"] == expected and result["segments_from"] == source


def test_segment_construction_is_part_of_the_result_keys(tiny_lm):
    from helpers.core.encoding import encode_ids
    from helpers.surface.run import stats_key

    batch = encode_ids([[2, 9, 3, 11, 3]])
    assert stats_key(tiny_lm, batch, "documents") != stats_key(tiny_lm, batch, "paragraphs")
