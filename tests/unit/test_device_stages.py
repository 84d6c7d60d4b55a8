"""The whole build on the device it is given: the probe trainings, the masked-LM head fit and the statistics of the
one route (which hands every map over on the model's device) run on the model's device (``--device`` / ``$BERT_ATTENTION_DEVICE``), with the CPU's numbers.

No GPU is needed. Each stage is handed ``cuda`` with CUDA's placement calls patched to record the device and keep
the tensors where they are: the test checks what each stage puts there, and that the code it runs then gives the
CPU's numbers (the device path and the CPU path are one code; on an accelerator only the placement differs, and
with it the float32 round-off).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from helpers.context import RunContext
from helpers.probe.stats import Batch, ProbeData, train_probe


@pytest.fixture
def placement(monkeypatch):
    """Pretend CUDA is there: ``Module.to``, ``Tensor.to`` and ``Batch.to`` record a CUDA device they are handed
    and leave the tensors on the CPU (anything else goes through). Yields the list of recorded ``(what, device)``."""
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # the probes ask how much device memory is free before holding their batches there (plenty, here)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (16 << 30, 80 << 30))
    module_to, tensor_to = nn.Module.to, torch.Tensor.to

    def device_of(args, kwargs):
        for a in (*args, kwargs.get("device")):
            if isinstance(a, (str, torch.device)):
                return str(a)
        return None

    def fake_module_to(self, *args, **kwargs):
        device = device_of(args, kwargs)
        if device and device.startswith("cuda"):
            seen.append(("module", device))
            return self
        return module_to(self, *args, **kwargs)

    def fake_tensor_to(self, *args, **kwargs):
        device = device_of(args, kwargs)
        if device and device.startswith("cuda"):
            seen.append(("tensor", device))
            dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
            return self if dtype is None else tensor_to(self, dtype)
        return tensor_to(self, *args, **kwargs)

    def fake_batch_to(self, device):
        if str(device).startswith("cuda"):
            seen.append(("batch", str(device)))
        return self

    monkeypatch.setattr(nn.Module, "to", fake_module_to)
    monkeypatch.setattr(torch.Tensor, "to", fake_tensor_to)
    monkeypatch.setattr(Batch, "to", fake_batch_to)
    yield seen


def toy_probe_data(n_sentences: int = 12, seed: int = 0) -> ProbeData:
    rng = np.random.default_rng(seed)
    maps, heads, punct, vectors = [], [], [], []
    for _ in range(n_sentences):
        m = int(rng.integers(3, 8))
        raw = rng.random((2, 3, m + 2, m + 2))
        maps.append((raw / raw.sum(-1, keepdims=True)).astype(np.float16))
        heads.append(np.array([int(rng.integers(0, m + 1)) for _ in range(m)]))
        punct.append(np.zeros(m, bool))
        vectors.append(rng.standard_normal((m, 5)).astype(np.float32))
    return ProbeData(maps, heads, punct, vectors, groups=[list(range(n_sentences // 2)), list(range(n_sentences // 2, n_sentences))])


@pytest.mark.parametrize("kind", ["attn", "attn+words", "distances+words"])
def test_a_probe_trains_and_predicts_on_its_device(placement, kind):
    data = toy_probe_data()
    reference, ref_info = train_probe(kind, data, data, seed=0, epochs=2, batch_size=4)
    assert placement == []  # nothing asked for CUDA
    model, info = train_probe(kind, data, data, seed=0, epochs=2, batch_size=4, device="cuda")
    assert ("module", "cuda") in placement
    batches = [d for what, d in placement if what == "batch"]
    assert batches and set(batches) == {"cuda"}
    assert len(batches) == 2 * (len(data.batches(4)) + len(data.batches(64)))  # every training and dev batch, each epoch
    assert info == ref_info
    for name, value in model.state_dict().items():
        # tolerance: exact: the same arithmetic on the same (CPU) tensors; on a GPU, float32 round-off
        torch.testing.assert_close(value, reference.state_dict()[name], rtol=0, atol=0)


def test_the_trainings_take_turns_on_an_accelerator(monkeypatch):
    """On an accelerator the trainings run one after another in this process, each handed the device."""
    import helpers.probe.run as run

    calls = []
    monkeypatch.setattr(run, "train_one", lambda job, sets, tests, epochs, device=None: calls.append((job, device)) or {})
    jobs = run.training_jobs((0, 1))
    run.train_all(jobs, {}, [], epochs=1, device=torch.device("cuda"))
    assert [job for job, _ in calls] == jobs and {str(d) for _, d in calls} == {"cuda"}


def test_the_probes_run_hands_the_models_device_to_the_trainings(tiny_lm, tmp_path, monkeypatch):
    import helpers.probe.run as run
    from tests.integration.test_probe_batches import random_treebank

    class Handed(Exception):
        pass

    def fake_train_all(*args, device=None, **kwargs):
        raise Handed(device)

    monkeypatch.setattr(run, "train_all", fake_train_all)
    files = {}
    for name, seed in (("train", 1), ("dev", 2), ("test", 3)):
        files[name] = str(tmp_path / f"{name}.conllu")
        random_treebank(tmp_path / f"{name}.conllu", 6, seed=seed)
    with pytest.raises(Handed) as handed:
        run.run_probes(tiny_lm, RunContext(cache_dir=tmp_path / "cache"), seeds=(0,), epochs=1, max_length=60,
                       corpora=files)
    assert handed.value.args[0] == tiny_lm.device


def test_the_masked_lm_head_is_fitted_on_its_device(tiny_lm, placement):
    from helpers.core.encoding import encode_words
    from helpers.surface.mlm import fit_head

    rng = np.random.default_rng(1)
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", ".", ","]
    batch = encode_words(tiny_lm.tokenizer, [list(rng.choice(words, size=rng.integers(4, 10))) for _ in range(12)])
    head, report = fit_head(tiny_lm, batch, batch, seed=0, epochs=2)
    assert placement == []  # the tiny model is on the CPU: so is the fit
    on_device, device_report = fit_head(tiny_lm, batch, batch, seed=0, epochs=2, device="cuda")
    assert ("module", "cuda") in placement
    assert sum(what == "tensor" for what, _ in placement) >= 4 + 2  # the hidden states, the labels, each epoch's order
    assert device_report == report
    for name, value in on_device.state_dict().items():
        # tolerance: exact: the same arithmetic on the same (CPU) tensors
        torch.testing.assert_close(value, head.state_dict()[name], rtol=0, atol=0)


def test_the_route_hands_the_maps_over_on_the_models_device(placement, tiny_lm, tmp_path):
    """The JS distances and the norm statistics compute where their maps are: the route's, on the model's device,
    whether the model's passes made them or the cache held them (read, then moved there); the same numbers."""
    from functools import partial

    from helpers.cluster.stats import JSAccumulator
    from helpers.core.encoding import encode_ids
    from helpers.pipeline.route import reduce_maps

    rng = np.random.default_rng(0)
    batch = encode_ids([[2, *rng.integers(5, 23, int(rng.integers(2, 9))), 3] for _ in range(40)], max_length=32)
    ctx = RunContext(cache_dir=tmp_path)
    make = partial(JSAccumulator, tiny_lm.n_layers * tiny_lm.n_heads)
    cpu = reduce_maps(tiny_lm, batch, make, keep=True, ctx=ctx).result()
    placement.clear()
    class OnCuda:  # the model, said to be on a CUDA device
        device = "cuda"

        def __getattr__(self, name):
            return getattr(tiny_lm, name)

    on_device = reduce_maps(OnCuda(), batch, make, ctx=ctx).result()  # read back from the cache
    assert ("tensor", "cuda") in placement
    # tolerance: exact: the same arithmetic on the same (CPU) tensors
    np.testing.assert_array_equal(on_device, cpu)
