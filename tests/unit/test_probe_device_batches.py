"""The probes' batches made on the device from the model's passes (helpers.probe.device_batches) are, bit for bit,
the batches spilled to disk and then held on the device (helpers.probe.batches + ResidentBatches): for an encoder,
its random-init control and decoders with and without BOS. No GPU is needed: the device path is forced onto the
CPU (``resident_on="cpu"``), the same code."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tiny_decoders as td
from helpers import load_model
from helpers.probe.batches import DiskBatches
from helpers.probe.device_batches import batch_features
from helpers.probe.stats import ResidentBatches, batches_on, encoder_layout, fill_sentence, train_probe
from helpers.probe.run import control_model, probe_data, remove_spills
from tests.integration.test_probe_batches import random_treebank
from tests.unit.test_device_stages import placement  # noqa: F401 (the fixture: CUDA's placement faked)

FIELDS = ("features", "root_parts", "heads", "punct", "vectors", "mask", "cand_mask")


@pytest.mark.parametrize("lead, trail", [(1, 1), (1, 0), (0, 0)])
def test_batch_features_are_fill_sentence_of_each_sentence(lead, trail):
    """Right-padded maps of sentences of other lengths against fill_sentence of each one's map in the encoder's
    layout (the slow, per-sentence NumPy form the spill reads with)."""
    rng = np.random.default_rng(lead * 2 + trail)
    words, K, n = [5, 2, 7, 1], 6, 8  # n: longer than the longest sentence, as a batch of a shard may be
    P = lead + max(words) + trail + 1  # one more position of padding than any sentence holds
    maps = np.full((len(words), K, P, P), 7.0, np.float16)  # padding: a value that must never be read
    for b, m in enumerate(words):
        size = lead + m + trail
        maps[b, :, :size, :size] = rng.random((K, size, size)).astype(np.float16)
    as_long = lambda values: torch.tensor(values, dtype=torch.long)  # noqa: E731
    feats, root = batch_features(torch.from_numpy(maps), as_long(words), as_long([lead] * len(words)),
                                 as_long([trail] * len(words)), n)
    assert feats.shape == (len(words), n, n + 1, 2 * K) and root.shape == (len(words), n, 2 * K, 2)
    assert feats.dtype == root.dtype == torch.float16
    for b, m in enumerate(words):
        size = lead + m + trail
        A = encoder_layout(maps[b, :, :size, :size][None], lead, trail)[0]  # [K, m + 2, m + 2]
        F, R = np.zeros((n, n + 1, 2 * K), np.float16), np.zeros((n, 2 * K, 2), np.float16)
        fill_sentence(F, R, np.zeros((n, 1), np.float32), A.transpose(1, 2, 0), np.zeros((m, 1), np.float32))
        # tolerance: exact: values copied, none computed
        np.testing.assert_array_equal(feats[b].numpy(), F)
        np.testing.assert_array_equal(root[b].numpy(), R)


def spilled_then_held(lm, path, **kw):
    """Today's path: the batches spilled (resident_on=False) and then held on a device (here the CPU)."""
    data = probe_data(lm, str(path), resident_on=False, **kw)
    assert isinstance(data.spilled, DiskBatches)
    return data, ResidentBatches(data.spilled, "cpu")


def assert_same_batches(made, reference):
    assert len(made) == len(reference) > 1
    for a, b in zip(made.held, reference.held, strict=True):
        assert a.indices == b.indices
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and x.shape == y.shape, name
            # tolerance: exact: the same float16 maps, copied into place
            assert torch.equal(x, y), name


def made_on_cpu(lm, path, **kw):
    data = probe_data(lm, str(path), resident_on="cpu", **kw)
    assert isinstance(data.spilled, ResidentBatches) and data._resident == {("cpu", kw["batch_size"]): data.spilled}
    return data, data.spilled


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    path = tmp_path_factory.mktemp("device-batches") / "train.conllu"
    random_treebank(path, 30, seed=11)
    return path


def test_batches_made_from_the_passes_are_the_spilled_ones(tiny_lm, treebank, tmp_path):
    """The model's and its random-init control's batches (the control with the model's word vectors, shared on the
    device), across several cache shards; nothing is written to the cache."""
    kw = dict(max_length=60, shard_size=8, batch_size=4)
    model, held = made_on_cpu(tiny_lm, treebank, cache_root=tmp_path / "device", **kw)
    from helpers.data.cache import cache_usage

    usage = cache_usage(tmp_path / "device")
    assert usage["maps"] == usage["probe_batches"] == 0 and not list((tmp_path / "device").glob("*/*.bin"))
    reference_data, reference = spilled_then_held(tiny_lm, treebank, cache_root=tmp_path / "spill", **kw)
    assert len(model.groups) > 2 and (model.n_maps, model.dim) == (reference_data.n_maps, reference_data.dim)
    assert model.heads is not reference_data.heads and [h.tolist() for h in model.heads] == [
        h.tolist() for h in reference_data.heads]
    assert_same_batches(held, reference)

    control = control_model(tiny_lm, seed=1)
    ctrl, ctrl_held = made_on_cpu(control, treebank, cache_root=tmp_path / "device", vectors_from=tiny_lm,
                                  share_vectors=model, **kw)
    assert all(a.vectors is b.vectors for a, b in zip(ctrl_held.held, held.held))  # the model's, not copied
    _, ctrl_reference = spilled_then_held(control, treebank, cache_root=tmp_path / "spill", vectors_from=tiny_lm,
                                          share_vectors=reference_data, **kw)
    assert_same_batches(ctrl_held, ctrl_reference)
    assert remove_spills([model, ctrl]) == 0  # nothing on disk
    assert model.spilled is None and ctrl.spilled is None and "_resident" not in model.__dict__  # the device's memory


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("device-batches-decoders")
    gpt2, llama = td.save_gpt2(root / "gpt2"), td.save_llama(root / "llama")
    return {"gpt2": load_model(str(gpt2)), "llama-no-bos": load_model(str(llama), bos=False)}


@pytest.mark.parametrize("kind", ["gpt2", "llama-no-bos"])
def test_a_decoders_batches_made_from_the_passes_are_the_spilled_ones(decoders, kind, treebank, tmp_path):
    """A decoder's maps have no [SEP] (and, without BOS, no [CLS]): its ROOT parts are zero there, as spilled."""
    lm = decoders[kind]
    kw = dict(max_length=60, shard_size=8, batch_size=4)
    _, held = made_on_cpu(lm, treebank, cache_root=tmp_path / "device", **kw)
    _, reference = spilled_then_held(lm, treebank, cache_root=tmp_path / "spill", **kw)
    assert_same_batches(held, reference)
    roots = torch.cat([b.root_parts.flatten(0, 1) for b in held.held])  # [words, 2K, 2]
    assert not roots[..., 1].any()  # no [SEP]
    assert roots[..., 0].any() == (kind == "gpt2")  # BOS plays [CLS]'s part when there is one


def test_cached_maps_and_batches_too_large_for_the_device_are_spilled(tiny_lm, treebank, tmp_path, monkeypatch):
    """Today's path, unchanged, where the maps are in the cache (keep_maps) or the batches would take more than
    the device's share of its free memory; and on the CPU by default."""
    kw = dict(max_length=60, shard_size=8, batch_size=4)
    kept = probe_data(tiny_lm, str(treebank), cache_root=tmp_path / "kept", write_maps=True, resident_on="cpu", **kw)
    assert isinstance(kept.spilled, DiskBatches) and "_resident" not in kept.__dict__
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1 << 10, 80 << 30))  # 1 KiB free
    full = probe_data(tiny_lm, str(treebank), cache_root=tmp_path / "full", resident_on="cuda", **kw)
    assert isinstance(full.spilled, DiskBatches) and "_resident" not in full.__dict__
    cpu = probe_data(tiny_lm, str(treebank), cache_root=tmp_path / "cpu", **kw)  # the tiny model is on the CPU
    assert isinstance(cpu.spilled, DiskBatches)


@pytest.mark.parametrize("kind", ["attn+words", "distances+words"])
def test_probes_trained_on_batches_made_from_the_passes_equal_the_spilled_ones(tiny_lm, treebank, tmp_path,
                                                                                placement, kind):
    """Training and evaluation find the batches made on the device (batches_on, for the training's size and the
    evaluation's): with CUDA's placement faked (the tensors stay on the CPU), a probe trained on them is the one
    trained on the CPU on the spilled batches, weight for weight."""
    kw = dict(max_length=60, shard_size=8, batch_size=4)
    made, _ = made_on_cpu(tiny_lm, treebank, cache_root=tmp_path / "device", **kw)
    made.__dict__["_resident"] = {("cuda", 4): made.spilled}  # as if made on "cuda"
    spilled = probe_data(tiny_lm, str(treebank), cache_root=tmp_path / "spill", resident_on=False, **kw)
    results = [train_probe(kind, made, made, seed=0, epochs=2, device="cuda"),
               train_probe(kind, spilled, spilled, seed=0, epochs=2)]  # on the CPU, streamed from the spill
    assert ("batch", "cuda") in placement
    assert batches_on(made, None, "cuda") is made.spilled and batches_on(made, None, "cpu") is made.spilled
    assert results[0][1] == results[1][1]
    for name, value in results[0][0].state_dict().items():
        # tolerance: exact: the same arithmetic on the same batches
        assert torch.equal(value, results[1][0].state_dict()[name]), name


def test_one_passs_float32_maps_at_a_time(tiny_lm, treebank, tmp_path, monkeypatch):
    """The float32 maps of a pass are gone when the next pass's are made, in a shard and across shards (only the
    float16 batches stay)."""
    import weakref

    import helpers.core.map_batches as map_batches

    real, alive, passes, previous = map_batches.iter_map_batches, [], [], []

    def watched(*args, **kwargs):
        for mb in real(*args, **kwargs):  # (each shard's passes: one call a shard)
            if previous:
                alive.append(previous[-1]() is not None)
            previous.append(weakref.ref(mb.weights))
            passes.append(mb.weights.dtype)
            yield mb
            del mb

    monkeypatch.setattr(map_batches, "iter_map_batches", watched)
    probe_data(tiny_lm, str(treebank), cache_root=tmp_path, max_length=60, shard_size=8, batch_size=4,
               resident_on="cpu")
    assert len(alive) >= 3 and not any(alive) and set(passes) == {torch.float32}


def test_the_probes_run_on_batches_made_from_the_passes_gives_the_spilled_runs_table(tiny_lm, tmp_path, monkeypatch):
    """Table 3 of a run whose batches of uncached maps (the training treebank's, the control's) are made from the
    passes (forced onto the CPU here) is the spilled run's; the evaluation treebanks' maps are written to the cache,
    so theirs are spilled as ever; no batches are left behind, and the made ones are let go."""
    import helpers.probe.run as run
    from helpers.context import RunContext

    files = {}
    for name, seed, count in (("train", 4, 20), ("dev", 5, 8), ("test", 6, 8)):
        files[name] = str(tmp_path / f"{name}.conllu")
        random_treebank(tmp_path / f"{name}.conllu", count, seed=seed)
    made, original = [], run.probe_data

    def on_cpu(lm, spec, **kwargs):
        data = original(lm, spec, resident_on="cpu", **kwargs)
        made.append((lm is tiny_lm, spec, type(data.spilled).__name__, data))
        return data

    on_cpu.__module__ = run.__name__  # the spill's key digests probe_data's module (helpers.digest): the same code

    tables = {}
    for label in ("spilled", "made"):
        if label == "made":
            monkeypatch.setattr(run, "probe_data", on_cpu)
        tables[label] = run.run_probes(tiny_lm, RunContext(cache_dir=tmp_path / label), seeds=(0,), epochs=1,
                                       max_length=60, corpora=files, workers=1)
        tables[label].pop("seconds")
        assert not list((tmp_path / label).glob("*/probe-*"))
    assert tables["made"] == tables["spilled"]
    kinds = {(own, spec): kind for own, spec, kind, _ in made}
    assert kinds[(True, files["train"])] == "ResidentBatches"
    assert kinds[(True, files["dev"])] == kinds[(True, files["test"])] == "DiskBatches"
    if not tables["made"]["control_is_model"]:
        assert {kinds[(False, files[name])] for name in files} == {"ResidentBatches"}
    assert all(data.spilled is None for *_, kind, data in made if kind == "ResidentBatches")  # let go (remove_spills)
