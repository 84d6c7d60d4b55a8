"""Probes: a probe on synthetic maps with a gold-pointing head reaches UAS near 100; MST decoding
returns valid trees that match networkx; distance features; GloVe reading; the CLI."""
import json
import shutil

import networkx as nx
import numpy as np
import pytest

from helpers.cli import main
from helpers.context import RunContext
from helpers.probe.run import load_glove
from helpers.probe.stats import (
    ProbeData,
    build_probe,
    chu_liu_edmonds,
    distance_features,
    distance_parts,
    make_batch,
    mst_heads,
    predict,
    right_branching_uas,
    train_probe,
    uas,
)
from tolerances import float64_passes, round_off


def probe_in_float64(model, batch):
    """A probe and a batch in float64: where the probe's logits are compared with another evaluation of
    them, the two then differ by float64 round-off (:data:`tolerances.FLOAT64_PASSES`)."""
    import dataclasses

    return model.double(), dataclasses.replace(batch, features=batch.features.double(),
                                               root_parts=batch.root_parts.double(), vectors=batch.vectors.double())


def random_tree(rng, n):
    heads = np.zeros(n, dtype=np.int64)
    order = rng.permutation(n) + 1
    heads[order[0] - 1] = 0
    for k, node in enumerate(order[1:], start=1):
        heads[node - 1] = order[rng.integers(0, k)]
    return heads


def synthetic(rng, count, n_layers=2, n_heads=3, good=(1, 1)):
    """Random maps except one head, in which each word attends to its gold head ([CLS] for the root)."""
    maps, heads, punct, vecs = [], [], [], []
    for _ in range(count):
        n = int(rng.integers(3, 12))
        tree = random_tree(rng, n)
        attn = rng.dirichlet(np.ones(n + 2), size=(n_layers, n_heads, n + 2))
        attn[good] = 0.0
        for i, h in enumerate(tree):
            attn[good][i + 1, h] = 1.0
        attn[good][0, 0] = attn[good][n + 1, n + 1] = 1.0
        maps.append(attn.astype(np.float16))
        heads.append(tree)
        punct.append(np.zeros(n, bool))
        vecs.append(rng.normal(size=(n, 4)).astype(np.float32))
    return ProbeData(maps, heads, punct, vecs)


def test_probe_finds_the_gold_head():
    rng = np.random.default_rng(0)
    train, dev = synthetic(rng, 200), synthetic(rng, 60)
    for kind, epochs in (("attn", 3), ("attn+words", 12)):  # the word-weighted probe needs more steps here
        model, info = train_probe(kind, train, dev, epochs=epochs, seed=0)
        assert uas(predict(model, dev), dev) > 97, (kind, info)
    model, _ = train_probe("distances+words", train, dev, epochs=1)
    assert uas(predict(model, dev), dev) < 80  # no attention, random trees: far from perfect


def test_mst_valid_tree_and_matches_networkx():
    rng = np.random.default_rng(1)
    for trial in range(30):
        n = int(rng.integers(2, 12))
        scores = rng.normal(size=(n, n + 1))
        scores[np.arange(n), np.arange(n) + 1] = -1e9
        heads = mst_heads(scores)
        # a valid tree: every word has one head, following heads always reaches ROOT
        for start in range(1, n + 1):
            seen, node = set(), start
            while node != 0:
                assert node not in seen
                seen.add(node)
                node = heads[node - 1]
        g = nx.DiGraph()
        for i in range(n):
            for c in range(n + 1):
                if c != i + 1:
                    g.add_edge(c, i + 1, weight=scores[i, c])
        ref = nx.maximum_spanning_arborescence(g)
        best = sum(scores[d - 1, h] for h, d in ref.edges())
        # tolerance: a sum of the same float64 scores (relative 1e-6)
        assert sum(scores[i, heads[i]] for i in range(n)) == pytest.approx(best)


def test_chu_liu_edmonds_breaks_a_cycle():
    s = np.full((4, 4), -np.inf)
    s[0, 1] = 5
    s[1, 2], s[2, 1] = 10, 10  # 1 <-> 2 cycle
    s[2, 3], s[0, 3] = 8, 1
    s[0, 2] = 2
    heads = chu_liu_edmonds(s)
    assert heads.tolist() == [-1, 0, 1, 2]


def test_distance_features_and_misalignment():
    f = distance_features(3).numpy()
    assert f.shape == (3, 4, 8)
    assert f[0, 0].tolist() == [0, 0, 0, 0, 0, 0, 0, 1]  # ROOT column
    third = pytest.approx(1 / 3, rel=0, abs=round_off(1 / 3))  # tolerance: a float32 third (one rounding)
    assert f[0, 2, 0] == third and f[0, 2, 4] == 1  # word 1 -> candidate 2: next word
    assert f[1, 1, 1] == third and f[1, 1, 3] == 1  # word 2 -> candidate 1: previous
    data = synthetic(np.random.default_rng(2), 2)
    batch = make_batch(data, [0])
    v, shifted = batch.word_vectors(), batch.word_vectors(misaligned=True)
    n = len(data.heads[0])
    assert np.array_equal(shifted[0, : n - 1], v[0, 1:n]) and not shifted[0, n - 1].any()  # exact: a shifted copy


def test_fused_pair_loss_matches_plain_autograd():
    """The fused loss of Distances + words (values and every gradient) against the expression written
    out one (sentence, dependent, candidate) at a time and differentiated by autograd (float64)."""
    torch = pytest.importorskip("torch")
    from helpers.probe.stats import PairTanhLoss

    gen = torch.Generator().manual_seed(0)
    lengths, n, hidden = [4, 2, 3], 4, 3
    b = len(lengths)
    shapes = [(b, n, hidden), (b, n + 1, hidden), (hidden, 8), (hidden,), (1,)]
    leaves = [torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True) for shape in shapes]
    heads = [torch.tensor([(i + 2) % (m + 1) for i in range(m)]) for m in lengths]  # never its own head
    fused = PairTanhLoss.apply(*leaves, heads)
    (2.5 * fused).backward()
    fused_grads = [x.grad.clone() for x in leaves]
    for x in leaves:
        x.grad = None
    dep, cand, dist_weight, w, bias = leaves
    plain = torch.zeros((), dtype=torch.float64)
    for k, m in enumerate(lengths):
        f = distance_features(m, torch.float64)  # [m, m + 1, 8], as the fused loss makes them in float64
        for i in range(m):
            scores = torch.stack([torch.dot(w, torch.tanh(dep[k, i] + cand[k, c] + dist_weight @ f[i, c])) + bias[0]
                                  if c != i + 1 else torch.tensor(-1e9, dtype=torch.float64) for c in range(m + 1)])
            plain = plain - torch.log_softmax(scores, 0)[heads[k][i]]
    plain = plain / b
    (2.5 * plain).backward()
    # tolerance: float64 on both sides, the same terms in other orders; gradients on the scale of the largest one
    # (the bias's sums softmax - one-hot to about 0: its terms are of that size, not of the result's)
    torch.testing.assert_close(fused, plain, rtol=0, atol=float64_passes(plain.detach()))
    scale = max(float(x.grad.abs().max()) for x in leaves)
    for got, x in zip(fused_grads, leaves):
        torch.testing.assert_close(got, x.grad, rtol=0, atol=float64_passes(scale))


def test_distance_probe_loss_is_the_cross_entropy_of_its_logits():
    """The fused training loss equals the cross-entropy of the probe's own logits (what evaluation uses),
    padding included, with the same gradients."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from helpers.probe.stats import probe_loss

    data = synthetic(np.random.default_rng(6), 5)
    torch.manual_seed(0)
    model, batch = probe_in_float64(build_probe("distances+words", data), make_batch(data, list(range(5))))
    fused = probe_loss(model, batch)
    fused.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits = model(batch)
    plain = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.heads.reshape(-1),
                                        ignore_index=-100, reduction="sum") / 5
    plain.backward()
    # tolerance: float64 (probe_in_float64), two summation orders of the same terms; gradients on the scale of the
    # largest one (as in test_fused_pair_loss_matches_plain_autograd)
    torch.testing.assert_close(fused, plain, rtol=0, atol=float64_passes(plain.detach()))
    scale = max(float(p.grad.abs().max()) for p in model.parameters())
    for got, p in zip(grads, model.parameters()):
        torch.testing.assert_close(got, p.grad, rtol=0, atol=float64_passes(scale))


def test_distance_probe_does_not_depend_on_the_batch():
    """A sentence's Distances + words logits are the same alone and padded beside a longer sentence: its
    relative distances are divided by its own length (paper footnote 5; the original ran one sentence
    at a time), not by the batch's padded length."""
    torch = pytest.importorskip("torch")
    data = synthetic(np.random.default_rng(5), 6)
    order = sorted(range(len(data)), key=lambda i: len(data.heads[i]))
    short, long = order[0], order[-1]
    assert len(data.heads[short]) < len(data.heads[long])
    torch.manual_seed(0)
    model, batch_alone = probe_in_float64(build_probe("distances+words", data).eval(), make_batch(data, [short]))
    batch_padded = probe_in_float64(model, make_batch(data, [short, long]))[1]
    with torch.no_grad():
        alone, padded = model(batch_alone)[0], model(batch_padded)[0]
    m = len(data.heads[short])
    # tolerance: float64 (probe_in_float64): padding changes the length of the matmul reductions
    torch.testing.assert_close(padded[:m, : m + 1], alone[:m, : m + 1], rtol=0, atol=float64_passes(alone[:m, : m + 1]))
    indicators, distances = distance_parts(len(data.heads[long]))
    want = distance_features(m)
    # tolerance: float32 quotients of small integers, one rounding on each side
    torch.testing.assert_close(indicators[:m, : m + 1] + distances[:m, : m + 1] / m, want, rtol=0, atol=round_off(want))


def test_batch_features_follow_the_maps():
    """Every entry of a padded batch, checked one index at a time against the sentence's maps."""
    data = synthetic(np.random.default_rng(3), 3)
    batch = make_batch(data, [0, 1, 2])
    K = data.n_maps
    for b in range(3):
        A = data.maps[b].reshape(K, *data.maps[b].shape[2:]).astype(np.float32)
        m = A.shape[-1] - 2
        for i in range(m):
            for k in range(K):
                assert batch.root_parts[b, i, k].tolist() == [A[k, i + 1, 0], A[k, i + 1, m + 1]]
                assert batch.root_parts[b, i, K + k].tolist() == [A[k, 0, i + 1], A[k, m + 1, i + 1]]
                for j in range(m):
                    assert batch.features[b, i, j + 1, k] == A[k, i + 1, j + 1]
                    assert batch.features[b, i, j + 1, K + k] == A[k, j + 1, i + 1]
        assert not batch.features[b, m:].any() and not batch.features[b, :, m + 1 :].any()  # padding


@pytest.mark.parametrize("misaligned", [False, True])
def test_attn_words_logits_follow_the_formula(misaligned):
    """Attn + words logits against the paper's formula evaluated one (dependent, candidate) at a time."""
    torch = pytest.importorskip("torch")
    data = synthetic(np.random.default_rng(4), 3)
    torch.manual_seed(0)
    probe, batch = probe_in_float64(build_probe("attn+words", data), make_batch(data, [0, 1, 2]))
    with torch.no_grad():
        for param in probe.parameters():
            param.normal_()
        logits = probe(batch, misaligned)
        v = batch.word_vectors(misaligned)
        r_s, r_e = probe.root
        for b in range(3):
            m = len(data.heads[b])
            for i in range(m):
                weights_root = probe.dep(v[b, i])  # [v_i; 0]
                root = r_s * batch.root_parts[b, i, :, 0] + r_e * batch.root_parts[b, i, :, 1]
                terms = weights_root * root
                # tolerance: float64 (probe_in_float64): a dot product against an explicit sum of the same terms, on
                # the scale of the terms (they can cancel)
                torch.testing.assert_close(logits[b, i, 0], terms.sum(), rtol=0, atol=float64_passes(terms.abs().sum()))
                for j in range(m):
                    if j == i:
                        continue
                    weights = probe.dep(v[b, i]) + probe.cand(v[b, j])  # W [v_i; v_j] + b
                    terms = weights * batch.features[b, i, j + 1]
                    torch.testing.assert_close(logits[b, i, j + 1], terms.sum(), rtol=0,
                                               atol=float64_passes(terms.abs().sum()))  # as above


def test_right_branching():
    data = ProbeData([np.zeros((1, 1, 5, 5), np.float16)], [np.array([2, 3, 0])], [np.zeros(3, bool)], [np.zeros((3, 2))])
    assert right_branching_uas(data) == 100.0


def test_sentence_counts_are_uas_sentence_by_sentence():
    from helpers.probe.stats import right_branching_correct, sentence_correct, sentence_totals

    rng = np.random.default_rng(0)
    heads = [np.array([2, 0, 2]), np.array([0, 1]), np.array([3, 3, 0, 3])]
    punct = [np.array([False, False, True]), np.array([True, True]), np.array([False, True, False, False])]
    data = ProbeData([], heads, punct, [])
    logits = [rng.normal(size=(len(h), len(h) + 1)) for h in heads]
    correct, totals = sentence_correct(logits, data), sentence_totals(data)
    assert totals.tolist() == [2, 0, 3]
    for k, (scores, h, p) in enumerate(zip(logits, heads, punct)):  # a loop over words
        assert correct[k] == sum(int(scores[i].argmax() == h[i]) for i in range(len(h)) if not p[i])
    assert uas(logits, data) == 100.0 * correct.sum() / totals.sum()
    rb = right_branching_correct(data)
    assert rb.tolist() == [1, 0, 0] and right_branching_uas(data) == 100.0 * 1 / 5  # each word: is its head the next?


@pytest.mark.parametrize("baseline_runs", [None, 1, 3])
def test_pooled_replicates_resample_sentences_within_each_seed_against_a_loop(baseline_runs):
    """Probes over seeds: each seed's test sentences resampled with its own draws (seed + s), paired with a
    baseline's counts on the same draws (one baseline run for every seed, or one per seed), the seeds pooled."""
    from helpers.probe.stats import pooled_uas_gain, pooled_uas_replicates

    rng = np.random.default_rng(1)
    n, seeds, n_boot = 25, 3, 200
    total = rng.integers(0, 12, n)
    runs = [rng.binomial(total, p) for p in (0.6, 0.65, 0.7)]
    base = None if baseline_runs is None else [rng.binomial(total, 0.3) for _ in range(baseline_runs)]
    got = pooled_uas_replicates(runs, total, baseline=base, n_boot=n_boot, seed=10)
    want = []
    for s in range(seeds):
        draws = np.random.default_rng(10 + s).integers(0, n, size=(n_boot, n))
        for i in draws:
            value = 100.0 * runs[s][i].sum() / total[i].sum()
            if base is not None:
                value -= 100.0 * base[s if len(base) > 1 else 0][i].sum() / total[i].sum()
            want.append(value)
    # tolerance: sums of whole numbers (exact), a division or two: float64 round-off of values <= 100
    np.testing.assert_allclose(got, want, rtol=0, atol=round_off(100.0, 4, eps=2.0 ** -52))
    estimate = np.mean([100.0 * (r.sum() - (0 if base is None else base[s if len(base) > 1 else 0].sum())) / total.sum()
                        for s, r in enumerate(runs)])
    assert pooled_uas_gain(runs, total, base) == pytest.approx(estimate, abs=round_off(100.0, 4, eps=2.0 ** -52))
    with pytest.raises(ValueError, match="same sentences"):
        pooled_uas_replicates([runs[0][:-1]], total)


def test_glove_reader(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("the 0.1 0.2\nCat 0.3 0.4\n")
    vectors = load_glove(f)
    assert set(vectors) == {"the", "cat"}
    # tolerance: parsed from decimal text into float32 (one rounding)
    assert vectors["cat"].tolist() == pytest.approx([0.3, 0.4], rel=0, abs=round_off(0.4))
    f.write_text("the 0.1 0.2\ncat 0.3\n")
    with pytest.raises(ValueError, match=r"g.txt:2: 1 numbers, expected 2"):
        load_glove(f)


def test_probe_command(tiny_model_dir, fake_data, toy_conllu, tmp_path):
    (fake_data / "ud-english-ewt").mkdir()
    shutil.copy(toy_conllu, fake_data / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    out = tmp_path / "probe.json"
    rc = main(["probe", "--model", str(tiny_model_dir), "--data-dir", str(fake_data), "--seeds", "2", "--epochs", "1",
               "--max-length", "60",
               "--json", str(out), "--quiet", "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    assert {"Right-branching", "Attn", "Attn + words", "Distances + words", "Random-init Attn + words"} <= set(result["rows"])
    assert len(result["rows"]["Attn"]["test"]["runs"]) == 2 and 0 <= result["rows"]["Attn"]["test"]["mean"] <= 100
    assert result["paper"]["Attn + GloVe"] == 77
    # per sentence, the words each probe gets right with each seed: the UAS of the table, sentence by sentence
    per = result["per_sentence"]
    for name in ("test", "ewt"):
        totals = np.asarray(per["totals"][name])
        assert len(totals) == result["sentences"][name]
        for probe, row in result["rows"].items():
            runs = per["correct"][probe][name]
            assert len(runs) == len(row[name]["runs"])
            for correct, shown in zip(runs, row[name]["runs"]):
                assert len(correct) == len(totals) and all(0 <= c <= t for c, t in zip(correct, totals))
                assert round(100.0 * sum(correct) / totals.sum(), 2) == shown  # the table's rounded UAS


def test_the_models_and_the_controls_maps_are_never_held_together(tiny_model_dir, fake_data, toy_conllu, tmp_path,
                                                                   monkeypatch):
    """The trainings on the model's maps run first; its packed maps are let go before the control's are made (one
    model's maps held, not two, spilled to disk: their folders are removed when let go), and the control's data take
    the model's word vectors. With --keep-maps too
    (the maps are then in the cache, not held twice in memory either); the table is the same."""
    import gc
    import weakref

    import helpers.probe.run as run
    from helpers import load_model

    (fake_data / "ud-english-ewt").mkdir()
    shutil.copy(toy_conllu, fake_data / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    lm = load_model(str(tiny_model_dir))
    made, phases, folders = [], [], []  # the model's four data are made first (train, dev, test, ewt), then the control's
    real_probe_data, real_train_all = run.probe_data, run.train_all

    def alive() -> int:
        gc.collect()
        return sum(ref() is not None for _, refs in made for ref in refs)

    def recording_data(model, spec, **kwargs):
        made_before = alive() if model is not lm else None
        data = real_probe_data(model, spec, **kwargs)
        made.append((made_before, [weakref.ref(data.packed)] if model is lm else []))
        folders.append(data.packed.folder)  # the CPU: spilled to disk
        if model is not lm:
            assert data.vectors is kwargs["vectors"].vectors  # the same rows (spilled to disk: the CPU)
        return data

    def recording_train(jobs, sets, *args, **kwargs):
        phases.append({job[2] for job in jobs})
        return real_train_all(jobs, sets, *args, **kwargs)

    monkeypatch.setattr(run, "probe_data", recording_data)
    monkeypatch.setattr(run, "train_all", recording_train)
    # (the tiny model was made as its seed-0 control is: another seed, so that the control differs from it)
    monkeypatch.setattr(run, "control_model", lambda model: load_model(model.spec, random_init=True, seed=1))
    kw = dict(seeds=(0, 1), epochs=1, max_length=60, workers=1)
    tables = []
    for keep in (False, True):
        made.clear(), phases.clear()
        ctx = RunContext(data_dir=fake_data, cache_dir=tmp_path / f"c{keep}", keep_maps=keep)
        tables.append(run.run_probes(lm, ctx, **kw))
        assert not tables[-1]["control_is_model"] and len(made) == 8
        assert [before for before, _ in made[4:]] == [0] * 4  # none of the model's maps left when the control's come
        assert phases == [{"maps"}, {"random"}]
        gc.collect()
        assert len(folders) == 8 * (1 + keep) and not any(folder.exists() for folder in folders)  # the spills removed
    assert tables[0]["rows"] == tables[1]["rows"]
    assert tables[0]["trainings"] == len(run.training_jobs((0, 1)))


def spilled_copy(data, folder):
    """``data`` with its packed maps and word vectors written to files in ``folder`` (as the probe command holds a
    treebank's), read back from there."""
    import dataclasses

    from helpers.probe.stats import SpilledRows

    folder.mkdir(exist_ok=True)
    packed, vectors = SpilledRows(folder), SpilledRows(folder, single=True)
    for row, vec in zip(data.packed, data.vectors):
        packed.append(row)
        vectors.append(vec)
    return dataclasses.replace(data, maps=[], packed=packed, vectors=vectors)


def test_trainings_two_at_a_time_equal_trainings_one_at_a_time(tmp_path, monkeypatch):
    """Table 3's trainings run two at a time, in threads of this process (small data) or in spawned processes (from
    SPAWN_FROM sentence-epochs; the data sent to each, spilled to files as the command's and in memory), torch on one
    thread; every score is the same as when they run one after another, for every probe kind, and this process's
    thread count is restored."""
    import concurrent.futures

    import torch

    from helpers.probe import run
    from helpers.probe.run import CONFIGS, train_all, training_jobs

    spawned = []

    class Recording(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            spawned.append(kwargs["max_workers"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Recording)
    rng = np.random.default_rng(3)
    maps = {"train": synthetic(rng, 80), "dev": synthetic(rng, 30), "test": synthetic(rng, 30), "ewt": synthetic(rng, 20)}
    random = {name: synthetic(rng, len(data)) for name, data in maps.items()}
    for data in (*maps.values(), *random.values()):
        data.batch_size = 16
    jobs = training_jobs((0, 1))
    assert sorted({job[0] for job in jobs}) == sorted(label for label, *_ in CONFIGS)
    assert len(jobs) == 2 * (len(CONFIGS) - 1) + 1  # the misaligned row: one seed
    threads = torch.get_num_threads()
    one = train_all(jobs, {"maps": maps, "random": random}, ["test", "ewt"], epochs=2, workers=1)
    assert torch.get_num_threads() == threads
    in_threads = train_all(jobs, {"maps": maps, "random": random}, ["test", "ewt"], epochs=2, workers=2)
    assert spawned == [] and torch.get_num_threads() == threads
    monkeypatch.setattr(run, "SPAWN_FROM", 2 * len(maps["train"]))
    on_disk = {name: spilled_copy(data, tmp_path / "spill") for name, data in maps.items()}
    assert all(len(data.maps) == 0 and data.device.type == "cpu" for data in on_disk.values())
    in_processes = train_all(jobs, {"maps": on_disk, "random": random}, ["test", "ewt"], epochs=2, workers=2)
    assert spawned == [2]
    assert set(one) == {(job[0], job[4]) for job in jobs}
    assert in_threads == one and in_processes == one
    assert len({json.dumps(v, sort_keys=True) for v in one.values()}) > 1  # the trainings differ from each other


def test_probe_result_key_carries_the_code(tiny_lm, fake_data, monkeypatch):
    """The cached Table 3 is keyed by the code that computes it (the import closure of the probe's run), not a
    version to bump."""
    import helpers.probe.run as run
    from helpers.digest import code_digest, import_closure

    keys = []
    monkeypatch.setattr(run, "cached_json", lambda name, key, compute, **kw: keys.append(key) or {})
    corpora = {"train": "gum:train", "dev": "gum:dev", "test": "gum:test"}
    run.run_probes(tiny_lm, RunContext(data_dir=fake_data), corpora=corpora)
    assert keys[-1]["code"] == code_digest(run) and "v" not in keys[-1]
    assert import_closure(run) >= {"helpers.probe.stats", "helpers.pipeline.route", "helpers.probe.run"}
    monkeypatch.setattr(run, "code_digest", lambda target: "changed-code")
    run.run_probes(tiny_lm, RunContext(data_dir=fake_data), corpora=corpora)
    assert keys[-1]["code"] == "changed-code" and keys[0]["code"] != keys[1]["code"]


def test_a_random_init_model_trains_its_control_rows_once(tiny_model_dir, fake_data, toy_conllu, tmp_path, monkeypatch):
    """A random-init model's control is that model (same architecture, seed and weights): its "Random-init
    Attn + words" trainings would repeat its "Attn + words" ones on the same data, so they are not run again,
    and the table is the one that running them gives (the same run with the reuse switched off)."""
    import helpers.probe.run as run
    from helpers import load_model

    (fake_data / "ud-english-ewt").mkdir()
    shutil.copy(toy_conllu, fake_data / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    lm = load_model(str(tiny_model_dir), random_init=True, seed=0)
    trained = []
    real_train_all = run.train_all

    def recording(jobs, *args, **kwargs):
        trained.append([(job[0], job[4]) for job in jobs])
        return real_train_all(jobs, *args, **kwargs)

    monkeypatch.setattr(run, "train_all", recording)
    kw = dict(seeds=(0, 1), epochs=1, max_length=60, workers=1)
    reused = run.run_probes(lm, RunContext(data_dir=fake_data, cache_dir=tmp_path / "a"), **kw)
    assert reused["control_is_model"] and reused["trainings"] == len(trained[0]) == len(run.training_jobs((0, 1))) - 2
    assert not any(label == "Random-init Attn + words" for label, _ in trained[0])
    monkeypatch.setattr(run, "twin_jobs", lambda jobs: {})
    again = run.run_probes(lm, RunContext(data_dir=fake_data, cache_dir=tmp_path / "b"), **kw)
    assert len(trained[1]) == len(run.training_jobs((0, 1))) and again["trainings"] == len(trained[1])
    assert again["rows"] == reused["rows"]
    assert reused["rows"]["Random-init Attn + words"] == reused["rows"]["Attn + words"]


def test_twin_jobs_pair_each_control_job_with_the_models_own():
    """Each control job's twin is the job with the same probe, misalignment and seed on the model's own data;
    no other job has a twin."""
    from helpers.probe.run import twin_jobs, training_jobs

    twins = twin_jobs(training_jobs((0, 1, 2)))
    assert twins == {("Random-init Attn + words", s): ("Attn + words", s) for s in (0, 1, 2)}


def test_spilled_rows_read_back_what_was_written(tmp_path):
    """Rows spilled to disk read back bit for bit, in any order (take), across files (extend), after a trip through
    pickle (to a Dask worker and back), from several threads; their folder goes when the owning rows are let go."""
    import gc
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from helpers.probe.stats import SpilledRows

    folder = tmp_path / "spill"
    folder.mkdir()
    rng = np.random.default_rng(0)
    rows = [(torch.from_numpy(rng.random((n, n, 3)).astype(np.float16)),
             torch.from_numpy(rng.random((n, 6, 2)).astype(np.float16))) for n in (1, 4, 2, 7)]
    first, second = SpilledRows(folder), SpilledRows(folder)
    for row in rows[:2]:
        first.append(row)
    for row in rows[2:]:
        second.append(row)
    spilled = pickle.loads(pickle.dumps(first)).extend(pickle.loads(pickle.dumps(second))).take([3, 0, 2, 1]).owning()
    want = [rows[k] for k in (3, 0, 2, 1)]
    assert len(spilled) == 4 and spilled.nbytes == sum(b.nbytes + r.nbytes for b, r in rows)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(spilled.__getitem__, [0, 1, 2, 3] * 5))
    for (block, root), (b, r) in zip(got, want * 5):
        assert block.dtype == torch.float16 and torch.equal(block, b) and torch.equal(root, r)  # tolerance: exact
    vectors = SpilledRows(folder, single=True)
    vectors.append(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(vectors[0].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert len(list(folder.glob("probe-*.bin"))) == 3  # what `prune` removes after a stopped run
    del spilled, got
    gc.collect()
    assert not folder.exists()
