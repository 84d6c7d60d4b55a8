"""Probes trained from batches spilled to disk equal probes trained from maps held in memory."""
import numpy as np
import pytest
import torch

from helpers.probe.run import probe_data
from helpers.probe.probes import predict, train_probe, uas

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "big", "is", "unaffable", "."]


def random_treebank(path, count: int, seed: int = 0) -> None:
    """``count`` sentences of 3-9 toy words with random projective-or-not trees, as CoNLL-U."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(count):
        n = int(rng.integers(3, 10))
        order = rng.permutation(n) + 1
        heads = np.zeros(n, int)
        for k, node in enumerate(order[1:], start=1):
            heads[node - 1] = order[rng.integers(0, k)]
        lines += [f"# sent_id = s{s}", "# text = x"]
        for i in range(n):
            word = WORDS[rng.integers(len(WORDS))]
            upos = "PUNCT" if word == "." else "NOUN"
            rel = "root" if heads[i] == 0 else ("punct" if word == "." else "dep")
            lines.append(f"{i + 1}\t{word}\t{word}\t{upos}\t_\t_\t{heads[i]}\t{rel}\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("kind", ["attn+words", "distances+words"])
def test_spilled_probe_equals_in_memory(tiny_lm, tmp_path, kind):
    train_file, dev_file = tmp_path / "train.conllu", tmp_path / "dev.conllu"
    random_treebank(train_file, 40, seed=1)
    random_treebank(dev_file, 15, seed=2)
    kw = dict(max_length=60, cache_root=tmp_path / "cache", shard_size=16)  # several shards per corpus
    spilled = {name: probe_data(tiny_lm, str(f), batch_size=4, **kw) for name, f in (("train", train_file), ("dev", dev_file))}
    memory = {name: probe_data(tiny_lm, str(f), batch_size=4, spill=False, **kw)
              for name, f in (("train", train_file), ("dev", dev_file))}
    assert spilled["train"].maps == [] and spilled["train"].vectors == []  # nothing corpus-sized in RAM
    assert spilled["train"].spilled is not None and len(spilled["train"].groups) == 3
    assert memory["train"].spilled is None and len(memory["train"].maps) == 40  # held in memory, not spilled
    assert spilled["train"].batches(4) == memory["train"].batches(4)

    results = []
    for data in (spilled, memory):
        model, info = train_probe(kind, data["train"], data["dev"], seed=0, epochs=2)
        logits = predict(model, data["dev"])
        results.append((info["dev_uas"], uas(logits, data["dev"]), logits, model.state_dict()))
    (hist_s, uas_s, logits_s, state_s), (hist_m, uas_m, logits_m, state_m) = results
    assert hist_s == hist_m and uas_s == uas_m
    for a, b in zip(logits_s, logits_m):
        np.testing.assert_array_equal(a, b)  # the same float32 inputs: bit for bit
    for name in state_s:
        # tolerance: exact: spilled and in-memory batches hold the same bytes, so training is bit-identical
        torch.testing.assert_close(state_s[name], state_m[name], rtol=0, atol=0)

    # a second run reuses the spilled file instead of rebuilding it
    again = probe_data(tiny_lm, str(train_file), batch_size=4, **kw)
    assert again.spilled.path == spilled["train"].spilled.path
    mtime = again.spilled.path.stat().st_mtime_ns
    probe_data(tiny_lm, str(train_file), batch_size=4, **kw)
    assert again.spilled.path.stat().st_mtime_ns == mtime


def test_damaged_spill_is_rebuilt(tiny_lm, tmp_path):
    train_file = tmp_path / "train.conllu"
    random_treebank(train_file, 20, seed=3)
    kw = dict(max_length=60, cache_root=tmp_path / "cache", shard_size=8, batch_size=4)
    first = probe_data(tiny_lm, str(train_file), **kw)
    reference = [b.features.clone() for b in first.spilled]
    with open(first.spilled.path, "r+b") as handle:  # truncate: the index no longer matches the file
        handle.truncate(first.spilled.path.stat().st_size // 2)
    second = probe_data(tiny_lm, str(train_file), **kw)
    for a, b in zip(reference, second.spilled):
        # tolerance: exact: the spill file stores features as they were built
        torch.testing.assert_close(a, b.features, rtol=0, atol=0)


def test_probe_on_any_treebanks(tiny_model_dir, tmp_path):
    """`probe --train --dev --test --test`: CoNLL-U files in place of GUM/EWT; one row per test set."""
    import json

    from helpers.cli import main

    files = {}
    for name, seed, count in (("train", 4, 30), ("dev", 5, 10), ("a", 6, 8), ("b", 7, 9)):
        files[name] = tmp_path / f"{name}.conllu"
        random_treebank(files[name], count, seed=seed)
    out = tmp_path / "probe.json"
    rc = main(["probe", "--model", str(tiny_model_dir), "--train", str(files["train"]), "--dev", str(files["dev"]),
               "--test", str(files["a"]), "--test", str(files["b"]), "--seeds", "1", "--epochs", "1", "--max-length", "60",
               "--quiet", "--json", str(out), "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["corpora"] == {"train": str(files["train"]), "dev": str(files["dev"]), "test": str(files["a"]),
                                 "test2": str(files["b"])}
    assert result["sentences"] == {"train": 30, "dev": 10, "test": 8, "test2": 9}
    for row in ("Attn", "Attn + words", "Distances + words", "Random-init Attn + words"):
        assert set(result["rows"][row]) >= {"dev", "test", "test_mst", "test2", "epochs"}
        assert "ewt" not in result["rows"][row]
    assert set(result["rows"]["Right-branching"]) == {"test", "test2"}
