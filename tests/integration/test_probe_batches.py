"""Probes trained from batches spilled to disk equal probes trained from maps held in memory."""
import numpy as np
import pytest
import torch

from helpers.probe.run import probe_data
from helpers.probe.stats import make_batch, predict, train_probe, uas

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


def test_batches_made_in_the_models_pass_equal_those_made_from_cached_maps(tiny_lm, tmp_path):
    """Without cached maps the batches are spilled from the model's pass and no map is written; they hold the
    same bytes as batches spilled from cached maps, and the file holds each sentence's maps once, unpadded."""
    from helpers.data.cache import cache_usage

    train_file = tmp_path / "train.conllu"
    random_treebank(train_file, 30, seed=5)
    kw = dict(max_length=60, shard_size=8, batch_size=4)
    streamed = probe_data(tiny_lm, str(train_file), cache_root=tmp_path / "a", **kw)
    cached = probe_data(tiny_lm, str(train_file), cache_root=tmp_path / "b", write_maps=True, **kw)
    folder = streamed.spilled.path.parent
    assert sorted(p.name for p in folder.iterdir()) == sorted(streamed.spilled.path.with_suffix(suffix).name
                                                              for suffix in (".bin", ".json", ".lock"))
    assert not list((tmp_path / "a").glob("*/shard-*")) and list((tmp_path / "b").glob("*/shard-*"))
    usage = cache_usage(tmp_path / "a")
    assert usage["maps"] == 0 and usage["probe_batches"] == sum(p.stat().st_size for p in folder.iterdir())
    assert streamed.spilled.path.read_bytes() == cached.spilled.path.read_bytes()
    K, dim = streamed.n_maps, streamed.dim
    words = [len(h) for h in streamed.heads]
    assert streamed.spilled.path.stat().st_size == sum((m + 2) ** 2 * K * 2 + m * dim * 4 for m in words)
    memory = probe_data(tiny_lm, str(train_file), cache_root=tmp_path / "b", spill=False, **kw)
    for a, b in zip(streamed.spilled, (make_batch(memory, g) for g in memory.batches(4)), strict=True):
        for name in ("features", "root_parts", "vectors", "heads", "cand_mask"):
            # tolerance: exact: the same float16 maps, converted by the same function
            torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0)


def test_the_probes_run_removes_its_batches_unless_maps_are_kept(tiny_model_dir, tmp_path):
    """`probe` leaves no spilled batches and no map of the training treebank or of the control in the cache (the
    model's maps of the evaluation treebanks stay: §4.2 reads them); with --keep-maps every map and batch stays.
    The table is the same either way."""
    import json

    from helpers.cli import main
    from helpers.data.cache import cache_entries, cache_usage

    files = {}
    for name, seed, count in (("train", 4, 30), ("dev", 5, 10), ("test", 6, 8)):
        files[name] = tmp_path / f"{name}.conllu"
        random_treebank(files[name], count, seed=seed)
    tables = {}
    for keep in (False, True):
        cache, out = tmp_path / f"cache-{keep}", tmp_path / f"probe-{keep}.json"
        assert main(["probe", "--model", str(tiny_model_dir), "--train", str(files["train"]), "--dev", str(files["dev"]),
                     "--test", str(files["test"]), "--seeds", "1", "--epochs", "1", "--max-length", "60", "--quiet",
                     "--json", str(out), "--cache-dir", str(cache), *(["--keep-maps"] if keep else [])]) == 0
        tables[keep] = json.loads(out.read_text())
        usage, entries = cache_usage(cache), cache_entries(cache)
        if keep:
            # 3 treebanks, of the model and of its control (the same model when the tiny model is a random-init one)
            assert usage["probe_batches"] > 0 and len(entries) == (3 if tables[keep]["control_is_model"] else 6)
        else:
            assert usage["probe_batches"] == 0 and not list(cache.glob("*/probe-*"))
            assert sorted(e["examples"] for e in entries) == [8, 10]  # the model's dev and test maps only
            assert all("random" not in e["model"] for e in entries)
    for table in tables.values():
        table.pop("seconds")
    assert tables[False] == tables[True]
    # keeping the maps changes no result's cache key: both runs stored their table under the same name
    names = [sorted(p.name for p in (tmp_path / f"cache-{keep}" / "artifacts").glob("probes-*.json")) for keep in (False, True)]
    assert names[0] == names[1] and len(names[0]) == 1


def test_a_control_reads_the_models_word_vectors_from_its_file(tiny_lm, tmp_path):
    """The random-init control's spill holds its maps only and reads the model's word vectors (the same
    sentences in the same batches): the batches equal those of a spill holding its own vectors, in fewer bytes."""
    from helpers.probe.run import control_model

    train_file = tmp_path / "train.conllu"
    random_treebank(train_file, 30, seed=7)
    kw = dict(max_length=60, shard_size=8, batch_size=4, cache_root=tmp_path / "cache")
    control = control_model(tiny_lm, seed=1)
    model = probe_data(tiny_lm, str(train_file), **kw)
    alone = probe_data(control, str(train_file), vectors_from=tiny_lm, **kw)
    shared = probe_data(control, str(train_file), vectors_from=tiny_lm, share_vectors=model, **kw)
    assert shared.spilled.vectors is model.spilled and shared.spilled.path != alone.spilled.path
    vector_bytes = sum(len(h) for h in model.heads) * model.dim * 4
    assert shared.spilled.path.stat().st_size == alone.spilled.path.stat().st_size - vector_bytes
    for spilled in (shared.spilled, shared.spilled.without_features()):
        other = alone.spilled if spilled.features else alone.spilled.without_features()
        for a, b in zip(spilled.stream(range(len(spilled))), (other[k] for k in range(len(other))), strict=True):
            for name in ("features", "root_parts", "vectors", "heads", "cand_mask"):
                # tolerance: exact: the same bytes read from two files
                torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0)
    again = probe_data(control, str(train_file), vectors_from=tiny_lm, share_vectors=model, **kw)
    assert again.spilled.path == shared.spilled.path and again.spilled.vectors is model.spilled  # reused


def test_a_spill_another_process_reads_is_left_to_it(tiny_lm, tmp_path):
    """Two runs of the same probes at once share one spill: each holds a shared lock on it (``hold``, taken before
    it is read or written), so the first to finish leaves it to the other, and the last one removes it. Another
    process's hold is an open description of the lock file of its own (as a second process's would be)."""
    import fcntl
    import os

    from helpers.probe import batches
    from helpers.probe.run import remove_spills

    train_file = tmp_path / "train.conllu"
    random_treebank(train_file, 12, seed=3)
    data = probe_data(tiny_lm, str(train_file), max_length=60, shard_size=8, batch_size=4, cache_root=tmp_path / "c")
    path = data.spilled.path
    lock = path.with_suffix(".lock")
    assert str(path) in batches._HELD and lock.is_file()
    other = os.open(lock, os.O_RDWR)  # the other run, still training on it
    fcntl.flock(other, fcntl.LOCK_SH)
    try:
        assert remove_spills([data]) == 0 and path.is_file() and str(path) not in batches._HELD
        batches.hold(path)  # this process reads it again ...
    finally:
        os.close(other)  # ... and the other run ends without removing it
    size = path.stat().st_size + path.with_suffix(".json").stat().st_size
    assert remove_spills([data]) == size and not path.exists() and not lock.exists()
    assert not path.parent.exists()  # nothing else was in its folder
