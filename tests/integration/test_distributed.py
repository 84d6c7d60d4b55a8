"""The distributed engine (helpers.pipeline.engine): same JSON as ``--engine local``, also after a worker dies.

Clusters are local (127.0.0.1) Dask clusters of two single-threaded worker processes; the model is
the tiny random BERT of conftest.py; the corpus is a generated CoNLL-U file of a few hundred short
sentences, so it fills two cache shards (256 examples each at most) of different lengths.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from helpers.cli import main
from helpers.pipeline.engine import Execution

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "unaffable", "is", "big", "biggest", "sit", ".", ","]
N_SENTENCES = 300  # two shards: 256 + 44


def _write_corpus(path, n=N_SENTENCES, seed=0):
    """Random sentences and trees; relation names depend on length, so each length-bucketed shard
    meets relations in its own order (the merge must renumber them as one pass would)."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n):
        m = int(rng.integers(2, 12))
        words = [WORDS[k] for k in rng.integers(0, len(WORDS), m)]
        order = [int(k) + 1 for k in rng.permutation(m)]  # a random tree: each word hangs on an earlier one
        heads = {order[0]: 0, **{w: order[int(rng.integers(0, k))] for k, w in enumerate(order) if k}}
        pool = ["det", "nsubj", "obl", "punct"] + [f"rel{m}", f"x{m % 3}"]
        lines.append(f"# sent_id = s{s}")
        lines.append(f"# text = {' '.join(words)}")
        for i, w in enumerate(words, start=1):
            head = heads[i]
            rel = "root" if head == 0 else str(rng.choice(pool))
            lines.append(f"{i}\t{w}\t{w}\tX\tX\t_\t{head}\t{rel}\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _write_corpus(tmp_path_factory.mktemp("corpus") / "random.conllu")


def _run(args, out, cache):
    rc = main([*args, "--json", str(out), "--quiet", "--cache-dir", str(cache)])
    assert rc == 0
    return out.read_bytes()


def _heads(model, corpus, tmp_path, name, *extra):
    return _run(["heads", "--conllu", str(corpus), "--model", str(model), "--max-length", "32", *extra],
                tmp_path / f"{name}.json", tmp_path / f"cache-{name}")


def _shards(cache):
    """Every cache shard's arrays, by file name (the .npz bytes hold zip timestamps, the arrays must agree)."""
    out = {}
    for path in sorted(cache.glob("*/shard-*.npz")):
        with np.load(path) as npz:
            out[path.name] = {k: npz[k].copy() for k in npz.files}
    return out


# ------------------------------------------------------------------------------ no cluster needed


@pytest.mark.parametrize("engine, workers, address, message", [
    ("local", 2, None, "--workers needs a distributed engine"),
    ("local", None, "tcp://127.0.0.1:1", "--address needs a distributed engine"),
    (None, 2, "tcp://127.0.0.1:1", "exclude each other"),
])
def test_execution_options_checked(engine, workers, address, message):
    with pytest.raises(ValueError, match=message):
        Execution.resolve(engine=engine, workers=workers, address=address)


def test_execution_defaults():
    assert Execution.resolve(engine=None, workers=None, address=None) == Execution("local")
    assert not Execution.resolve(engine=None, workers=None, address=None).distributed


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "x"], ["--engine", "spark"],
                                  ["--engine", "local", "--workers", "2"]])
def test_bad_execution_options_exit_2(argv, toy_conllu, tiny_model_dir, capsys):
    rc = main(["heads", "--conllu", str(toy_conllu), "--model", str(tiny_model_dir), *argv])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("--workers" in err[0] or "--engine" in err[0])


def test_shard_partials_merge_to_the_local_scores(tiny_lm, corpus, tmp_path):
    """run_shards (local loop) + heads_shard + merge_heads == extract + score_heads, relation order included."""
    from helpers.pipeline.extraction import encode_treebank, extract, plan_extraction
    from helpers.pipeline.engine import run_shards
    from helpers.syntax.stats import score_heads
    from helpers.syntax.run import heads_shard, merge_heads

    sentences, batch, digest = encode_treebank(tiny_lm, str(corpus), max_length=32)
    reference = score_heads(extract(tiny_lm, batch, cache_root=tmp_path / "a", source_digest=digest,
                                    progress=False), sentences)
    plan = plan_extraction(tiny_lm, batch, cache_root=tmp_path / "b", source_digest=digest)
    assert len(plan.store.shards) == 2 and len(plan.todo) == 2
    payloads = [([sentences[ex.index] for ex in shard], None) for shard in plan.store.shards]
    store, parts = run_shards(tiny_lm, plan, execution=Execution("local"), task=heads_shard, payloads=payloads)
    merged = merge_heads(parts)
    assert store.stats["shards_computed"] == 2
    assert json.dumps(merged.table()) == json.dumps(reference.table())
    assert merged.relations == reference.relations
    np.testing.assert_array_equal(merged.word_correct, reference.word_correct)
    # merging in another order numbers relations differently: the order is what makes it identical
    assert merge_heads(parts[::-1]).relations != reference.relations


# ------------------------------------------------------------------------------ on a local cluster

distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed "
                                  "(pip install -r requirements-distributed.txt)")


def test_two_workers_same_json_as_local(tiny_model_dir, corpus, tmp_path):
    local = _heads(tiny_model_dir, corpus, tmp_path, "local")
    dask = _heads(tiny_model_dir, corpus, tmp_path, "dask", "--workers", "2")
    assert dask == local
    assert json.loads(local)["sentences_used"] == N_SENTENCES
    a, b = _shards(tmp_path / "cache-local"), _shards(tmp_path / "cache-dask")
    assert len(a) == 2 and a.keys() == b.keys()
    for name in a:
        for k in a[name]:
            np.testing.assert_array_equal(a[name][k], b[name][k])


@pytest.fixture(scope="module")
def cluster():
    """A local two-worker cluster shared by the tests that join one with --address."""
    from helpers.pipeline.engine import local_cluster

    with local_cluster(2) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        yield cluster


def test_killed_worker_is_recomputed(tiny_model_dir, corpus, tmp_path, cluster):
    """One worker kills itself (SIGKILL) when it starts the second shard; the scheduler reruns that
    shard on a worker that lives, and the JSON and the extract summary equal the local run's."""
    from distributed import Client, WorkerPlugin

    flag = tmp_path / "killed"

    class KillOnce(WorkerPlugin):
        def __init__(self, flag):
            self.flag = str(flag)

        def transition(self, key, start, finish, **kwargs):
            if finish == "executing" and str(key).startswith("shard-00001-"):
                try:
                    os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
                import signal
                os.kill(os.getpid(), signal.SIGKILL)

    local = _heads(tiny_model_dir, corpus, tmp_path, "local")
    with Client(cluster) as client:
        client.register_plugin(KillOnce(flag), name="kill-once")
        address = cluster.scheduler_address
        dask = _heads(tiny_model_dir, corpus, tmp_path, "dask", "--address", address)
        assert flag.exists(), "no worker was killed: the test did not test recovery"
        assert dask == local
        # extract: the same summary as a local run, timings aside
        ex_args = ["extract", "--conllu", str(corpus), "--model", str(tiny_model_dir), "--max-length", "32"]
        flag.unlink()
        a = json.loads(_run(ex_args, tmp_path / "xa.json", tmp_path / "cache-xa"))
        b = json.loads(_run([*ex_args, "--address", address], tmp_path / "xb.json", tmp_path / "cache-xb"))
        assert flag.exists()
    for result in (a, b):
        result.pop("seconds")
        result.pop("cache")
    assert a == b and a["shards_computed"] == 2


def test_coref_on_a_cluster_same_json_as_local(tiny_model_dir, tmp_path, cluster):
    """coref scores two splits on the cluster (predictions per shard on the workers) as locally."""
    import shutil
    from pathlib import Path

    fixtures = Path(__file__).parents[1] / "fixtures"
    data = tmp_path / "data"
    (data / "gum" / "dep").mkdir(parents=True)
    (data / "gum" / "ontogum").mkdir(parents=True)
    for name in ("GUM_toy_coref", "GUM_dev_coref"):
        shutil.copy(fixtures / "coref_toy.conllu", data / "gum" / "dep" / f"{name}.conllu")
        shutil.copy(fixtures / "coref_toy.conll", data / "gum" / "ontogum" / f"{name}.conll")
    (data / "gum" / "splits.md").write_text("## dev\n\n  * GUM_dev_coref\n\n## test\n\n  * GUM_toy_coref\n")
    args = ["coref", "--model", str(tiny_model_dir), "--data-dir", str(data), "--max-length", "60"]
    local = _run(args, tmp_path / "local.json", tmp_path / "cache-local")
    dask = _run([*args, "--address", cluster.scheduler_address], tmp_path / "dask.json", tmp_path / "cache-dask")
    assert dask == local and json.loads(local)["mentions"]["all"] == 3


def test_worker_with_other_weights_refuses(tiny_lm, corpus, tmp_path, cluster):
    """A worker whose model differs from the driver's (here: the driver's recorded fingerprint is
    altered) refuses the shard with a ValueError naming the worker, instead of writing other maps."""
    from helpers.pipeline.extraction import encode_treebank, plan_extraction
    from helpers.pipeline.engine import run_shards

    _, batch, digest = encode_treebank(tiny_lm, str(corpus), max_length=32, max_sentences=20)
    plan = plan_extraction(tiny_lm, batch, cache_root=tmp_path, source_digest=digest)
    plan.meta["model_fingerprint"] = "0" * 64
    with pytest.raises(ValueError, match="loaded other weights"):
        run_shards(tiny_lm, plan, execution=Execution("dask", address=cluster.scheduler_address))
    assert not list(tmp_path.glob("*/shard-*.npz"))
