"""The probes' data down the one route: the accumulator (:class:`helpers.probe.stats.ProbeBatcher`) packs each
sentence's maps as its cached maps in the encoder's layout pack, one group per cache shard, for an encoder and
decoders; the batches made from the packed maps against a slow loop over the maps; a control shares the model's
word vectors; what the probes' run leaves in the cache; the command on any treebanks."""
import json

import numpy as np
import pytest
import torch

import tiny_decoders as td
from helpers import load_model
from helpers.context import RunContext
from helpers.pipeline.extraction import extract_treebank
from helpers.probe.run import control_model, probe_data
from helpers.probe.stats import HeldBatches, ProbeData, encoder_layout, make_batch, pack, train_probe

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "big", "is", "unaffable", "."]
FIELDS = ("features", "root_parts", "heads", "punct", "vectors", "mask", "cand_mask")


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


def slow_batch(data: ProbeData, indices) -> dict[str, np.ndarray]:
    """The reference :class:`~helpers.probe.stats.Batch` of sentences ``indices``, entry by entry from their maps in
    the encoder's layout ``A [layer, head, m + 2, m + 2]`` ([CLS] 0, [SEP] m + 1): ``F[b, i, 1 + j, k] = A_k[1 + i,
    1 + j]``, ``F[b, i, 1 + j, K + k] = A_k[1 + j, 1 + i]``, the ROOT parts ``A_k[1 + i, 0]``, ``A_k[1 + i, m + 1]``
    (and transposed), the vectors and labels; zero elsewhere."""
    B, n, K, dim = len(indices), max(len(data.heads[i]) for i in indices), data.n_maps, data.dim
    out = {"features": np.zeros((B, n, n + 1, 2 * K), np.float32), "root_parts": np.zeros((B, n, 2 * K, 2), np.float32),
           "vectors": np.zeros((B, n, dim), np.float32), "heads": np.full((B, n), -100),
           "punct": np.zeros((B, n), bool), "mask": np.zeros((B, n), bool), "cand_mask": np.zeros((B, n, n + 1), bool)}
    for b, s in enumerate(indices):
        A = np.asarray(data.maps[s], np.float32).reshape(K, *data.maps[s].shape[-2:])
        m = len(data.heads[s])
        for i in range(m):
            for k in range(K):
                for j in range(m):
                    out["features"][b, i, 1 + j, k] = A[k, 1 + i, 1 + j]
                    out["features"][b, i, 1 + j, K + k] = A[k, 1 + j, 1 + i]
                out["root_parts"][b, i, k] = A[k, 1 + i, 0], A[k, 1 + i, m + 1]
                out["root_parts"][b, i, K + k] = A[k, 0, 1 + i], A[k, m + 1, 1 + i]
            out["vectors"][b, i] = data.vectors[s][i]
            out["heads"][b, i], out["punct"][b, i], out["mask"][b, i] = data.heads[s][i], data.punct[s][i], True
            out["cand_mask"][b, i, : m + 1] = True
            out["cand_mask"][b, i, i + 1] = False  # never its own head
    return out


def assert_batch(batch, reference: dict, *, features: bool = True) -> None:
    """``batch`` is ``reference`` (:func:`slow_batch`); without ``features``, with none (and no ROOT parts)."""
    if not features:
        reference = {**reference, "features": reference["features"][..., :0],
                     "root_parts": reference["root_parts"][..., :0, :]}
    for name in FIELDS:
        got, want = getattr(batch, name), reference[name]
        assert tuple(got.shape) == want.shape, name
        # tolerance: exact: every value is copied from the maps (float16 to float32 is exact), none computed
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)


def toy_data(seed: int, count: int = 11, dtype=np.float16) -> ProbeData:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 9, size=count)
    maps = [rng.random((2, 3, m + 2, m + 2)).astype(dtype) for m in lengths]
    heads = [rng.integers(0, m + 1, size=m) for m in lengths]
    punct = [rng.random(m) < 0.2 for m in lengths]
    vectors = [rng.standard_normal((m, 5)).astype(np.float32) for m in lengths]
    return ProbeData(maps, heads, punct, vectors, groups=[list(range(0, 6)), list(range(6, count))], batch_size=4)


@pytest.mark.parametrize("lead, trail", [(1, 1), (1, 0), (0, 0)])
def test_pack_is_the_encoder_layout_of_the_maps(lead, trail):
    """An encoder's, a decoder's with BOS and one without: the block and ROOT parts that :func:`pack` copies from
    a sentence's maps are, entry by entry, those of its maps in the encoder's layout (zero where [CLS] or [SEP] is
    missing)."""
    rng = np.random.default_rng(lead * 2 + trail)
    K, m = 6, 5
    P = lead + m + trail
    maps = rng.random((K, P, P)).astype(np.float16)
    block, root = pack(torch.from_numpy(maps), lead, m, trail)
    A = encoder_layout(maps[None], lead, trail)[0]  # [K, m + 2, m + 2]
    assert block.dtype == root.dtype == torch.float16 and block.shape == (m, m, K) and root.shape == (m, 2 * K, 2)
    for i in range(m):
        for k in range(K):
            for j in range(m):
                assert block[i, j, k] == A[k, 1 + i, 1 + j]
            assert root[i, k, 0] == A[k, 1 + i, 0] and root[i, K + k, 0] == A[k, 0, 1 + i]
            assert root[i, k, 1] == A[k, 1 + i, m + 1] and root[i, K + k, 1] == A[k, m + 1, 1 + i]
    assert bool(root[..., 1].any()) == (trail > 0) and bool(root[..., 0].any()) == (lead > 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_batches_are_the_maps_entry_by_entry(dtype):
    """Every batch, made fresh (indexing, :func:`make_batch`) or into the buffers a stream reuses (in any order,
    after a longer batch has left its values there), is the slow reference; without features it holds the
    vectors and labels only."""
    data = toy_data(3, dtype=dtype)
    held = HeldBatches(data, 4)
    assert held.groups == data.batches(4) and len(held) == 4  # 6 and 5 sentences: 2 batches per group
    for k, group in enumerate(held.groups):
        assert_batch(held[k], slow_batch(data, group))
        assert_batch(make_batch(data, group), slow_batch(data, group))
    order = [3, 1, 0, 2, 1]
    for k, batch in zip(order, held.stream(order)):
        assert batch.indices == tuple(held.groups[k])
        assert_batch(batch, slow_batch(data, held.groups[k]))
    for k, batch in zip(order, held.without_features().stream(order)):
        assert_batch(batch, slow_batch(data, held.groups[k]), features=False)


def test_training_on_streamed_batches_is_training_on_fresh_ones():
    """A probe trained on the reused buffers of a stream is the one trained on fresh batches, bit for bit."""
    from helpers.probe.stats import build_probe, probe_loss, stream

    data = toy_data(5)
    held = HeldBatches(data, 4)
    runs = []
    for source in (held, [held[k] for k in range(len(held))]):
        torch.manual_seed(0)
        probe = build_probe("attn+words", data)
        optim = torch.optim.Adam(probe.parameters(), lr=0.01)
        for batch in stream(source, [1, 3, 0, 2]):
            loss = probe_loss(probe, batch)
            optim.zero_grad()
            loss.backward()
            optim.step()
        runs.append([p.detach().clone() for p in probe.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    path = tmp_path_factory.mktemp("probe-route") / "train.conllu"
    random_treebank(path, 300, seed=11)  # two cache shards (256 sentences each)
    return path


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe-route-decoders")
    gpt2, llama = td.save_gpt2(root / "gpt2"), td.save_llama(root / "llama")
    return {"gpt2": load_model(str(gpt2)), "llama-no-bos": load_model(str(llama), bos=False)}


def from_cached_maps(lm, path, cache) -> ProbeData:
    """The reference: the treebank's word-level maps extracted into the cache (float32), each put in the encoder's
    layout at half precision and packed in memory, in the order of the cache's shards."""
    sentences, store = extract_treebank(lm, str(path), max_length=60, cache_root=cache)
    maps, order = {}, [ex for shard in store.shards for ex in shard]
    for ex, attn in store.items():
        maps[ex.index] = encoder_layout(attn, ex.lead, ex.trail).astype(np.float16)
    return ProbeData([maps[ex.index] for ex in order], [np.asarray(sentences[ex.index].heads) for ex in order],
                     [np.zeros(ex.n_words, bool) for ex in order], [], names=[sentences[ex.index].sent_id for ex in order])


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama-no-bos"])
def test_the_route_packs_each_sentence_as_its_cached_maps(tiny_lm, decoders, treebank, tmp_path, kind):
    """Down the route, from the model's passes with nothing written, or with the maps kept and then read back from
    the cache, each sentence's packed maps are its cached maps in the encoder's layout at half precision, bit for
    bit, one group per cache shard in the shard's order."""
    lm = tiny_lm if kind == "bert" else decoders[kind]
    reference = from_cached_maps(lm, treebank, tmp_path / "reference")
    runs = {}
    for how, keep in (("made", False), ("kept", True), ("read", False)):
        cache = tmp_path / ("made" if how == "made" else "kept")
        runs[how] = probe_data(lm, str(treebank), max_length=60, batch_size=4, keep=keep, ctx=RunContext(cache_dir=cache))
        assert bool(list(cache.glob("*/shard-*"))) == (how != "made")  # written only when kept
    for data in runs.values():
        assert data.names == reference.names and [len(g) for g in data.groups] == [256, 44]
        assert data.groups == [list(range(256)), list(range(256, 300))] and data.batch_size == 4
        for (block, root), want in zip(data.packed, reference.packed, strict=True):
            # tolerance: exact: the same float32 maps rounded once to float16, copied into place
            assert torch.equal(block, want[0]) and torch.equal(root, want[1])
        assert data.n_maps == lm.n_layers * lm.n_heads and len(data.vectors) == len(data)
    roots = torch.cat([root for _, root in runs["made"].packed])  # [words, 2K, 2]
    assert bool(roots[..., 1].any()) == (kind == "bert")  # a decoder has no [SEP]
    assert bool(roots[..., 0].any()) == (kind != "llama-no-bos")  # BOS plays [CLS]'s part where there is one


def test_a_control_takes_the_models_word_vectors(tiny_lm, treebank, tmp_path):
    """The random-init control's data hold the model's word vectors (the same arrays, not made again), which are
    those it would make itself from the model; data of other sentences are refused."""
    ctx = RunContext(cache_dir=tmp_path)
    control = control_model(tiny_lm, seed=1)
    model = probe_data(tiny_lm, str(treebank), max_length=60, batch_size=4, ctx=ctx)
    shared = probe_data(control, str(treebank), vectors_from=tiny_lm, max_length=60, batch_size=4, vectors=model, ctx=ctx)
    alone = probe_data(control, str(treebank), vectors_from=tiny_lm, max_length=60, batch_size=4, ctx=ctx)
    assert shared.vectors is model.vectors  # the same rows (on the CPU, spilled to disk)
    for a, b in zip(shared.vectors, alone.vectors, strict=True):
        np.testing.assert_array_equal(a, b)  # tolerance: exact: the same arithmetic on the same embeddings
    assert not all(torch.equal(a[0], b[0]) for a, b in zip(shared.packed, model.packed))  # the control's own maps
    fewer = probe_data(control, str(treebank), vectors_from=tiny_lm, max_length=60, max_sentences=100, ctx=ctx)
    with pytest.raises(ValueError, match="other sentences"):
        probe_data(tiny_lm, str(treebank), max_length=60, vectors=fewer, ctx=ctx)


@pytest.mark.parametrize("kind", ["attn+words", "distances+words"])
def test_probes_on_the_routes_data_equal_probes_on_the_cached_maps(tiny_lm, treebank, tmp_path, kind):
    """Trained and scored on the route's data or on the same maps held in memory, a probe is the same, weight for
    weight."""
    data = probe_data(tiny_lm, str(treebank), max_length=60, batch_size=4, ctx=RunContext(cache_dir=tmp_path / "a"))
    memory = from_cached_maps(tiny_lm, treebank, tmp_path / "b")
    memory.vectors, memory.dim_, memory.punct = data.vectors, data.dim, data.punct
    memory.groups, memory.batch_size = data.groups, data.batch_size
    results = [train_probe(kind, d, d, seed=0, epochs=2) for d in (data, memory)]
    assert results[0][1] == results[1][1]
    for name, value in results[0][0].state_dict().items():
        # tolerance: exact: the same batches, the same arithmetic
        assert torch.equal(value, results[1][0].state_dict()[name]), name


def test_probe_on_any_treebanks(tiny_model_dir, tmp_path):
    """`probe --train --dev --test --test`: CoNLL-U files in place of GUM/EWT; one row per test set."""
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


def test_the_probes_run_writes_maps_only_where_kept(tiny_model_dir, tmp_path):
    """`probe` leaves no map of the training treebank or of the control in the cache (the model's maps of the
    evaluation treebanks stay: §4.2 reads them); with --keep-maps every map stays. The table is the same either
    way, and so is the name it is cached under."""
    from helpers.cli import main
    from helpers.data.cache import cache_entries

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
        entries = cache_entries(cache)
        assert not list(cache.glob("*/probe-*"))  # no batches on disk
        if keep:
            # 3 treebanks, of the model and of its control (the same model when the tiny model is a random-init one)
            assert len(entries) == (3 if tables[keep]["control_is_model"] else 6)
        else:
            assert sorted(e["examples"] for e in entries) == [8, 10]  # the model's dev and test maps only
            assert all("random" not in e["model"] for e in entries)
    for table in tables.values():
        table.pop("seconds")
    assert tables[False] == tables[True]
    names = [sorted(p.name for p in (tmp_path / f"cache-{keep}" / "artifacts").glob("probes-*.json")) for keep in (False, True)]
    assert names[0] == names[1] and len(names[0]) == 1
