"""The distributed engine (helpers.pipeline.engine): same JSON as ``--engine local``, also after a worker dies.

Clusters are local (127.0.0.1) Dask clusters of two single-threaded worker processes; the model is
the tiny random BERT of conftest.py; the corpus is a generated CoNLL-U file of a few hundred short
sentences, so it fills two cache shards (256 examples each at most) of different lengths.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager

import numpy as np
import pytest

from helpers.cli import main
from helpers.pipeline.engine import Execution, event_loop

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


@pytest.mark.parametrize("command", ["surface", "cluster", "norms"])
@pytest.mark.parametrize("argv, message", [(["--workers", "0"], "--workers: must be at least 1"),
                                           (["--engine", "spark"], "--engine: invalid choice"),
                                           (["--engine", "local", "--workers", "2"], "--workers needs a distributed engine")])
def test_segment_commands_check_execution_options(command, argv, message, tiny_model_dir, fake_data, capsys):
    """The three segment commands know the execution options (not "unrecognized arguments") and check them."""
    rc = main([command, "--model", str(tiny_model_dir), "--data-dir", str(fake_data), "--segments", "3", *argv])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


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


@pytest.fixture(scope="module", autouse=True)
def patient_connections():
    """A loaded machine (two test workers, other jobs) is never taken for an unreachable scheduler: every connection of
    this module's clusters, clients and commands (Dask's connect timeout, 30 s, and the engine's --address wait, 20 s)
    waits up to 300 s; the tests that expect a refusal set their own wait."""
    import dask

    from helpers.pipeline import engine

    with dask.config.set({"distributed.comm.timeouts.connect": "300s"}), pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "ADDRESS_TIMEOUT", "300s")
        yield


def _existing_cluster(n_workers: int, **kwargs):
    """A cluster as `dask scheduler` and `dask worker` start one, on 127.0.0.1 and free ports only: its scheduler's and
    workers' ports, and the HTTP server Dask opens even without a dashboard (on 8787 unless told, which two test
    workers starting clusters at once contended for), as the engine's own clusters do (engine.HTTP_ADDRESS)."""
    from distributed import LocalCluster

    from helpers.pipeline.engine import HTTP_ADDRESS

    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1", scheduler_port=0,
                        dashboard_address=None, silence_logs=40, scheduler_kwargs={"dashboard_address": HTTP_ADDRESS},
                        loop=event_loop(), **kwargs)


def _kill_once(flag, key_prefix: str):
    """A Dask worker plugin: the worker that starts a task whose key begins with ``key_prefix`` kills its own process
    (SIGKILL) if it is the first to create the file ``flag``; a rerun of that task elsewhere (``flag`` exists) lives.
    Made in a function, as the engine's own plugin is: the class travels to the workers by value."""
    from distributed import WorkerPlugin

    class KillOnce(WorkerPlugin):
        def __init__(self, flag: str, key_prefix: str):
            self.flag, self.key_prefix = flag, key_prefix

        def transition(self, key, start, finish, **kwargs):
            if finish != "executing" or not str(key).startswith(self.key_prefix):
                return
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
            import signal
            os.kill(os.getpid(), signal.SIGKILL)

    return KillOnce(str(flag), key_prefix)


@contextmanager
def _killing_once(cluster, flag, key_prefix: str):
    """The shared ``cluster`` with :func:`_kill_once` on its workers (and on those that replace them) while the block
    runs; unregistered after it."""
    from distributed import Client

    name = f"kill-once-{key_prefix}"
    with Client(cluster, loop=event_loop()) as client:
        client.register_plugin(_kill_once(flag, key_prefix), name=name)
        try:
            yield
        finally:
            client.unregister_worker_plugin(name)


@pytest.fixture(scope="module")
def cluster():
    """A two-worker cluster on 127.0.0.1 shared by the tests that join one with --address: an "existing
    cluster" as `dask scheduler` and `dask worker` start one (plain TCP; the engine's own --workers cluster
    is TLS, see test_local_cluster_admits_only_its_owner)."""
    with _existing_cluster(2) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        yield cluster


def test_local_cluster_admits_only_its_owner(tiny_model_dir, corpus, tmp_path):
    """Issue 27: --workers N starts a cluster that only its owner can use: TLS with a temporary
    certificate (a client without it, or with another one, is refused), and no dashboard pages."""
    import gc
    import urllib.error
    import urllib.request

    from distributed import Client

    from helpers.pipeline.engine import _client, session

    with session(Execution.resolve(engine=None, workers=1, address=None)) as execution:
        assert execution.address.startswith("tls://127.0.0.1:")
        from helpers.pipeline.engine import temporary_security

        for security in (None, temporary_security()):  # no certificate; a certificate of its own
            with pytest.raises(Exception):
                Client(execution.address, timeout="5s", security=security, loop=event_loop())
        # the refused clients are garbage in reference cycles, and their __del__ closes them, taking Dask's loop-runner
        # lock: collected later inside a loop runner that holds that lock (gc runs on any allocation), they deadlocked a
        # run (or, in a loop thread, made the next client's start time out: "assert loop is not None"); collect them now
        gc.collect()
        client, _ = _client(execution)
        try:
            assert client.loop is event_loop()  # the process's one loop: no loop thread of Dask's own to wait 10 s for
            assert client.submit(lambda: 41 + 1).result() == 42  # the owner's client is admitted
            host, http = client.run_on_scheduler(lambda dask_scheduler: (dask_scheduler.http_server.address,
                                                                         dask_scheduler.http_server.port))
        finally:
            client.close()
        assert (host, http != 8787) == ("127.0.0.1", True)  # a free port: never Dask's 8787, which clusters contend for
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=60)
        assert err.value.code == 404


def test_existing_cluster_over_tls_with_dasks_settings(tiny_model_dir, corpus, tmp_path, monkeypatch):
    """The README's recipe for an existing cluster with TLS: certificate and key in files, named to Dask by
    its DASK_DISTRIBUTED__COMM__TLS__* variables; the JSON is the local run's."""
    import dask
    from distributed.security import Security

    from helpers.pipeline.engine import temporary_security

    made = temporary_security()
    (tmp_path / "ca.pem").write_text(made.tls_ca_file)
    (tmp_path / "key.pem").write_text(made.tls_client_key)
    files = dict(ca_file=str(tmp_path / "ca.pem"), cert=str(tmp_path / "ca.pem"), key=str(tmp_path / "key.pem"))
    security = Security(require_encryption=True, tls_ca_file=files["ca_file"], tls_scheduler_cert=files["cert"],
                        tls_scheduler_key=files["key"], tls_worker_cert=files["cert"], tls_worker_key=files["key"],
                        tls_client_cert=files["cert"], tls_client_key=files["key"])
    local = _heads(tiny_model_dir, corpus, tmp_path, "local")
    with _existing_cluster(1, security=security) as tls:
        assert tls.scheduler_address.startswith("tls://")
        assert main(["heads", "--conllu", str(corpus), "--address", tls.scheduler_address, "--quiet"]) == 2  # no settings
        for name, value in files.items():
            monkeypatch.setenv(f"DASK_DISTRIBUTED__COMM__TLS__{'CA_FILE' if name == 'ca_file' else 'CLIENT__' + name.upper()}",
                               value)
        dask.config.refresh()
        try:
            assert _heads(tiny_model_dir, corpus, tmp_path, "tls", "--address", tls.scheduler_address) == local
        finally:
            monkeypatch.undo()
            dask.config.refresh()


def test_extra_installed_under_cache_dir_loads_on_the_workers(tiny_model_dir, corpus, tmp_path):
    """Issue 27 (engine): a model installed under --cache-dir (an install-model extra) is found by the workers."""
    import shutil

    from helpers.core.model_extras import EXTRAS

    cache = tmp_path / "cache-extra"
    shutil.copytree(tiny_model_dir, cache / "models" / "mpnet-base" / EXTRAS["mpnet-base"].folder)
    args = ["heads", "--conllu", str(corpus), "--model", "mpnet-base", "--max-length", "32"]
    local = _run(args, tmp_path / "local.json", cache)
    assert _run([*args, "--workers", "2"], tmp_path / "dask.json", cache) == local


def test_killed_worker_is_recomputed(tiny_model_dir, corpus, tmp_path, cluster):
    """One worker kills itself (SIGKILL) when it starts the second shard; the scheduler reruns that
    shard on a worker that lives, and the JSON and the extract summary equal the local run's."""
    flag = tmp_path / "killed"
    local = _heads(tiny_model_dir, corpus, tmp_path, "local")
    with _killing_once(cluster, flag, "shard-00001-"):
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


def test_shared_data_lost_with_its_only_worker_is_made_again(tiny_model_dir, corpus, tmp_path):
    """What every task of a run reads (``map_tasks``' ``shared``, here the route's shard job) is held by the workers;
    with one worker, killing it at the second shard loses the only copy. The scheduler makes it again on the worker
    that replaces it (it is a task's result; scattered data, which it was, failed the run: "lost scattered data"),
    and the JSON equals the local run's."""
    flag = tmp_path / "killed"
    local = _heads(tiny_model_dir, corpus, tmp_path, "local")
    with _existing_cluster(1) as cluster, _killing_once(cluster, flag, "shard-00001-"):
        dask = _heads(tiny_model_dir, corpus, tmp_path, "dask", "--address", cluster.scheduler_address)
    assert flag.exists(), "no worker was killed: the test did not test recovery"
    assert dask == local


def test_coref_on_a_cluster_same_json_as_local(tiny_model_dir, toy_coref_data, tmp_path, cluster):
    """coref scores two splits on the cluster (predictions per shard on the workers) as locally, and the workers
    write no map (the windows' maps feed one pass: its predictions are what is cached), unless maps are kept."""
    data = toy_coref_data
    args = ["coref", "--model", str(tiny_model_dir), "--data-dir", str(data), "--max-length", "60"]
    local = _run(args, tmp_path / "local.json", tmp_path / "cache-local")
    dask = _run([*args, "--address", cluster.scheduler_address], tmp_path / "dask.json", tmp_path / "cache-dask")
    assert dask == local and json.loads(local)["mentions"]["all"] == 3
    assert not list((tmp_path / "cache-dask").rglob("shard-*.npz")) and list((tmp_path / "cache-dask").rglob("*.npz"))
    kept = _run([*args, "--address", cluster.scheduler_address, "--keep-maps"], tmp_path / "kept.json",
                tmp_path / "cache-kept")
    assert kept == local and list((tmp_path / "cache-kept").rglob("shard-*.npz"))


def test_worker_with_other_weights_refuses(tiny_lm, corpus, tmp_path, cluster, monkeypatch):
    """A worker whose model differs from the driver's (here: the driver's fingerprint is altered) refuses the
    route's shard (here the extract command's, :func:`~helpers.pipeline.extraction.extract` on a cluster) with a
    ValueError naming the worker, instead of writing other maps."""
    from helpers.pipeline.extraction import encode_treebank, extract

    _, batch, digest = encode_treebank(tiny_lm, str(corpus), max_length=32, max_sentences=20)
    monkeypatch.setattr(tiny_lm, "fingerprint", lambda: "0" * 64)
    with pytest.raises(ValueError, match="loaded other weights"):
        extract(tiny_lm, batch, level="token", cache_root=tmp_path, source_digest=digest, progress=False,
                execution=Execution("dask", address=cluster.scheduler_address))
    assert not list(tmp_path.glob("*/shard-*.npz"))


# ------------------------------------------------------------------------------ surface, cluster, norms

SEGMENT_DOCS, SEGMENT_SENTENCES, SEGMENTS = 40, 60, 300  # 300 segments of at most 32 tokens: two shards (256 + 44)


@pytest.fixture(scope="module")
def segment_data(tmp_path_factory):
    """A GUM-shaped data folder whose train split (every document: no dev or test listed) yields
    more than 256 segments of at most 32 tokens, so they fill two shards of different lengths."""
    root = tmp_path_factory.mktemp("segment-data")
    dep = root / "gum" / "dep"
    dep.mkdir(parents=True)
    for d in range(SEGMENT_DOCS):
        _write_corpus(dep / f"GUM_train_{d:02d}.conllu", n=SEGMENT_SENTENCES, seed=100 + d)
    (root / "gum" / "splits.md").write_text("# Splits\n\n## dev\n\n## test\n\n")
    return root


SEGMENT_COMMANDS = {
    "surface": ["surface", "--no-gradients"],
    "cluster": ["cluster", "--no-linguistic", "--permutations", "50"],
    "norms": ["norms"],
}


def _segments_run(command, model, data, tmp_path, name, *extra):
    args = [*SEGMENT_COMMANDS[command], "--model", str(model), "--data-dir", str(data),
            "--segments", str(SEGMENTS), "--max-length", "32", *extra]
    return _run(args, tmp_path / f"{command}-{name}.json", tmp_path / f"cache-{name}")


@pytest.mark.parametrize("command", sorted(SEGMENT_COMMANDS))
def test_segment_statistics_on_a_cluster_same_json_as_local(command, tiny_model_dir, segment_data, tmp_path, cluster):
    """Each shard's token-level maps are made and reduced on a worker (nothing cached), the partials
    merged in shard order: byte-identical JSON to the local run."""
    local = _segments_run(command, tiny_model_dir, segment_data, tmp_path, "local")
    dask = _segments_run(command, tiny_model_dir, segment_data, tmp_path, "dask", "--address", cluster.scheduler_address)
    assert dask == local
    result = json.loads(local)
    assert (result.get("n_segments") or result.get("segments")) == SEGMENTS
    for cache in ("cache-local", "cache-dask"):  # statistics only: no token-level maps were written
        assert not list((tmp_path / cache).glob("*/shard-*.npz"))
    # the cached statistics at full float64 precision (the JSON keeps 6 decimals), under the same keys
    cached = {p.name: p.read_bytes() for p in (tmp_path / "cache-local" / "artifacts").glob("*.json")}
    assert cached and cached == {p.name: p.read_bytes() for p in (tmp_path / "cache-dask" / "artifacts").glob("*.json")}
    # each segment's values kept beside them (the §3 statistics' intervals), the same arrays under the same keys
    arrays = {p.name: dict(np.load(p)) for p in (tmp_path / "cache-local" / "artifacts").glob("*.npz")}
    assert arrays or command != "surface"
    for name, local_arrays in arrays.items():
        dask_arrays = dict(np.load(tmp_path / "cache-dask" / "artifacts" / name))
        assert set(dask_arrays) == set(local_arrays)
        assert all(np.array_equal(dask_arrays[k], v) for k, v in local_arrays.items())


def test_surface_with_workers_and_a_killed_worker(tiny_model_dir, segment_data, tmp_path, cluster):
    """--workers 2 starts its own cluster; on the shared cluster one worker kills itself (SIGKILL) when
    it starts the second shard's task, the scheduler reruns it elsewhere, and the JSON is the local run's."""
    flag = tmp_path / "killed"
    local = _segments_run("surface", tiny_model_dir, segment_data, tmp_path, "local")
    assert _segments_run("surface", tiny_model_dir, segment_data, tmp_path, "workers", "--workers", "2") == local
    with _killing_once(cluster, flag, "shard-00001-"):
        dask = _segments_run("surface", tiny_model_dir, segment_data, tmp_path, "killed",
                             "--address", cluster.scheduler_address)
    assert flag.exists(), "no worker was killed: the test did not test recovery"
    assert dask == local


def test_the_route_gives_partials_in_shard_order(tiny_lm, cluster, tmp_path):
    """Three shards (two partials merge the same in either order; three do not): the cluster's partials come back
    in shard order, each fed its shard's examples with their extras in the local run's forward-pass order, whichever
    worker finished first."""
    from helpers.context import RunContext
    from helpers.core.encoding import encode_ids
    from helpers.pipeline.extraction import plan_extraction
    from helpers.pipeline.route import reduce_maps

    rng = np.random.default_rng(4)
    batch = encode_ids([[2, *rng.integers(5, 23, int(rng.integers(1, 20))), 3] for _ in range(600)], max_length=32)
    shards = plan_extraction(tiny_lm, batch, level="token", cache=False).shards
    assert len(shards) == 3

    class Seen:  # what it was fed: each batch's example indices and extras, merged in order (nested: pickled by value)
        def __init__(self):
            self.batches = []

        def update(self, batch, extras):
            self.batches.append(([ex.index for ex in batch.examples], list(extras)))

        def merge(self, other):
            self.batches += other.batches
            return self

        def result(self):
            return self.batches

    def fed(execution):
        ctx = RunContext(cache_dir=tmp_path, execution=execution)
        return reduce_maps(tiny_lm, batch, Seen, ctx=ctx, extras=lambda ex: (ex.index % 7,)).result()

    local = fed(Execution("local"))
    assert fed(Execution("dask", address=cluster.scheduler_address)) == local
    assert [i for indices, _ in local for i in indices] == [
        ex.index for shard in shards for ex in sorted(shard, key=lambda e: (len(e), e.index))]
    assert all(extras == [(i % 7,) for i in indices] for indices, extras in local)


def test_cluster_with_linguistic_heads_on_a_cluster(tiny_model_dir, toy_data, tmp_path, cluster):
    """cluster's every model step on the cluster: distances and surface statistics (streamed tasks)
    and the heads and coref runs that mark linguistic heads (cached-shard tasks, on GUM dev trees and
    OntoGUM): the same JSON as locally. Those runs use 128-token inputs, so the tiny model is resaved
    with room for 128 positions."""
    import torch
    from distributed import Client, get_task_stream
    from transformers import BertModel, BertTokenizer

    config = BertModel.from_pretrained(tiny_model_dir).config
    config.max_position_embeddings = 128
    torch.manual_seed(1)
    wide = tmp_path / "tiny-128"
    BertModel(config).save_pretrained(wide)
    BertTokenizer.from_pretrained(tiny_model_dir).save_pretrained(wide)
    args = ["cluster", "--model", str(wide), "--data-dir", str(toy_data), "--segments", "3", "--permutations", "20"]
    local = _run(args, tmp_path / "local.json", tmp_path / "cache-local")
    with Client(cluster, loop=event_loop()) as client, get_task_stream(client) as tasks:
        dask = _run([*args, "--address", cluster.scheduler_address], tmp_path / "dask.json", tmp_path / "cache-dask")
    assert dask == local and json.loads(local)["linguistic"]
    ran = {str(task["key"]).split("-")[0] for task in tasks.data}
    assert "shard" in ran, ran  # the route's tasks ran on the cluster


def test_norm_heads_on_a_cluster_same_scores_as_local(tiny_lm, corpus, tmp_path, cluster):
    """Chapter 07's Table 1 on norm maps: each shard's heads scored on a worker, from the norm maps its pass leaves
    on the worker's device (nothing written), merged in shard order: the local scores, which are the streamed store's."""
    from helpers.context import RunContext
    from helpers.norms.run import run_table1_norms

    local = run_table1_norms(tiny_lm, str(corpus), RunContext(cache_dir=tmp_path / "local", progress=False), max_length=60)
    on_dask = run_table1_norms(tiny_lm, str(corpus), RunContext(
        cache_dir=tmp_path / "dask", progress=False,
        execution=Execution.resolve(engine=None, workers=None, address=cluster.scheduler_address)), max_length=60)
    assert on_dask.relations == local.relations and json.dumps(on_dask.table()) == json.dumps(local.table())
    np.testing.assert_array_equal(on_dask.word_correct, local.word_correct)
    assert not list((tmp_path / "dask").rglob("shard-*.npz"))
