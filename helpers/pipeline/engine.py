"""Where extraction and statistics run: in this process (``local``) or on a Dask distributed cluster.

Every analysis over maps is one forward pass per batch followed by a sum over sentences, so the work
splits along the cache's own shards (:func:`helpers.pipeline.extraction.plan_extraction`): one task per shard
reads or makes that shard's maps (writing a missing shard to the shared cache, atomically, under the same key as a
local run, when the maps are kept) and returns the shard's *partial statistics*; the driver merges the partials in
shard order, so the result does not depend on which worker ran what or when, and is identical to a local run's.
That task is the one route's (:func:`helpers.pipeline.route.reduce_maps`); it runs, as does work that is not a
reduction over maps (the ablation chapter's heads of one layer), through the one task runner here,
:func:`map_tasks`: in this process, or as Dask tasks on workers that hold the model.

>>> from helpers.pipeline.engine import Execution
>>> Execution.resolve(engine=None, workers=2, address=None)
Execution(engine='dask', workers=2, address=None)

Why Dask distributed, not Ray:

- the workload is a flat bag of independent, retryable tasks (one per shard) with small results;
  Dask's scheduler already re-runs the tasks of a worker that dies (``allowed-failures``), which is
  exactly the recovery we need, and nothing needs Ray's stateful actors: a :class:`ModelPlugin`
  (a Dask ``WorkerPlugin``) holds the model, loaded once per worker process;
- it is pure Python and light (``dask`` + ``distributed``, a few MB, wheels for every platform),
  against Ray's several hundred MB of binaries and its own object store and dashboard processes;
- the same code runs on a local cluster (``--workers N``: ``LocalCluster`` of N single-threaded
  worker processes on 127.0.0.1, over TLS with a certificate made for the run, so no other user of
  the machine can join it or submit work; see :func:`local_cluster`) and on an existing one
  (``--address tcp://host:8786`` or ``tls://host:8786`` with Dask's TLS settings, started with
  ``dask scheduler`` / ``dask worker``, or by dask-jobqueue / dask-kubernetes / dask-cuda).

The engine is an optional extra: ``pip install -r requirements-distributed.txt`` (or
``pip install -e .[distributed]``); nothing imports Dask unless a distributed engine is chosen.
Workers must see the same cache folder as the driver (a shared file system on a real cluster) and
the same model (its weights are checked: a worker with other weights refuses the task).
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import re
import shutil
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

ENGINES: tuple[str, ...] = ("local", "dask")
ADDRESS_SCHEMES: tuple[str, ...] = ("tcp", "tls", "ws", "wss", "ucx")  # what Dask's comm layer speaks
TLS_SETTINGS = ("DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY")  # Dask's own configuration, read by every Client
EXTRA_HINT = "install the optional extra: pip install -r requirements-distributed.txt (or pip install -e .[distributed])"


@dataclass(frozen=True)
class Execution:
    """How to run: ``engine`` ``local`` (this process) or ``dask``; ``workers`` starts a local cluster
    of that many worker processes; ``address`` joins an existing scheduler."""

    engine: str = "local"
    workers: int | None = None
    address: str | None = None
    security: Any = field(default=None, repr=False, compare=False)  # a local cluster's Dask Security (see session)

    @property
    def distributed(self) -> bool:
        return self.engine != "local"

    @classmethod
    def resolve(cls, *, engine: str | None, workers: int | None, address: str | None) -> "Execution":
        """Check the three options together; ``--workers`` or ``--address`` alone select ``dask``."""
        if workers is not None and address is not None:
            raise ValueError("--workers and --address exclude each other: start a local cluster of N workers, "
                             "or join the cluster at ADDR")
        if engine is None:
            engine = "dask" if (workers is not None or address is not None) else "local"
        if engine not in ENGINES:
            raise ValueError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
        if engine == "local" and (workers is not None or address is not None):
            option = "--workers" if workers is not None else "--address"
            raise ValueError(f"{option} needs a distributed engine: drop --engine local (or use --engine dask)")
        if address is not None:
            check_address(address)
        if engine == "dask":
            try:
                import distributed  # noqa: F401
            except ImportError:
                raise ValueError(f"--engine dask: Dask distributed is not installed; {EXTRA_HINT}") from None
        return cls(engine, workers, address)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Execution":
        return cls.resolve(engine=getattr(args, "engine", None), workers=getattr(args, "workers", None),
                           address=getattr(args, "address", None))


def check_address(address: str) -> None:
    """Raise ``ValueError`` unless ``address`` reads as a Dask scheduler address, ``SCHEME://HOST:PORT``
    (``tcp``, ``tls`` ...; ``HOST:PORT`` means ``tcp``)."""
    from helpers.core.encoding import printable

    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, _, port = rest.rpartition(":")
    if scheme not in ADDRESS_SCHEMES or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--address {printable(address, limit=120)}: not a Dask scheduler address; expected "
                         "tcp://HOST:PORT or, encrypted and authenticated, tls://HOST:PORT")


def add_execution_args(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--workers`` and ``--address`` (checked together by :meth:`Execution.resolve`)."""
    from helpers.pipeline.argtypes import positive_int

    group = parser.add_argument_group("execution")
    group.add_argument("--engine", choices=ENGINES, default=None,
                       help="local: this process (default); dask: a Dask distributed cluster, one task per cache shard")
    group.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="start a local cluster of N worker processes (selects --engine dask)")
    group.add_argument("--address", default=None, metavar="ADDR",
                       help="join an existing Dask scheduler, e.g. tcp://10.0.0.1:8786 (selects --engine dask); "
                            "workers must share --cache-dir")


# ------------------------------------------------------------------------------ the model on workers


@dataclass(frozen=True)
class ModelSpec:
    """What a worker needs to load the driver's model itself: the name or folder, random init, seed, device,
    the cache folder (``cache_root``, absolute) where an optional extra such as ``mpnet-base`` is installed, and
    the weights' dtype."""

    model: str | None
    random_init: bool = False
    seed: int = 0
    device: str | None = None
    cache_root: str | None = None
    dtype: str = "float32"

    @classmethod
    def of(cls, lm) -> "ModelSpec":
        from helpers.context import cache_folder

        # the driver's cache as an absolute path: a worker's own $BERT_ATTENTION_CACHE or home may differ
        return cls(lm.spec, lm.random_init, lm.seed if lm.seed is not None else 0, str(lm.device),
                   str(cache_folder(getattr(lm, "cache_root", None))), getattr(lm, "dtype", "float32"))

    @property
    def name(self) -> str:
        """The plugin name of this model on a cluster (one plugin, so one loaded model, per spec)."""
        text = json.dumps([self.model, self.random_init, self.seed, self.device, self.cache_root]
                          + ([] if self.dtype == "float32" else [self.dtype]))
        return "bert-attention-model-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def load(self):
        from helpers.core.models import load_model

        return load_model(self.model, random_init=self.random_init, seed=self.seed, device=self.device,
                          cache_root=self.cache_root, dtype=self.dtype)


def _worker_plugin_class():
    from distributed import WorkerPlugin

    class ModelPlugin(WorkerPlugin):
        """Holds one model per worker process, loaded at the first task (not in the event loop) and kept."""

        def __init__(self, spec: ModelSpec):
            self.spec = spec
            self._lm = None
            self._lock = threading.Lock()

        def __getstate__(self):
            return {"spec": self.spec}

        def __setstate__(self, state):
            self.spec, self._lm, self._lock = state["spec"], None, threading.Lock()

        def setup(self, worker):
            self._lm = None

        def model(self):
            with self._lock:
                if self._lm is None:
                    self._lm = self.spec.load()
                    self._fingerprint = self._lm.fingerprint()
                return self._lm, self._fingerprint

    return ModelPlugin


def _worker_model(spec: ModelSpec, fingerprint: str):
    """The model of ``spec`` held by this worker's plugin; refuses one whose weights differ from the driver's."""
    from distributed import get_worker

    plugin = get_worker().plugins.get(spec.name)
    if plugin is None:
        raise RuntimeError(f"worker {get_worker().address} has no model plugin {spec.name}")
    lm, worker_fingerprint = plugin.model()
    if worker_fingerprint != fingerprint:
        raise ValueError(f"worker {get_worker().address} loaded other weights for {spec.model or 'the default model'} "
                         "than the driver: install the same model on every worker")
    return lm


# ------------------------------------------------------------------------------------ running

UNAUTHENTICATED = ("note: --workers: neither the cryptography package nor the openssl command is available, so the "
                   "local cluster runs without TLS: another user of this machine could submit work to it while it runs; "
                   "pip install cryptography to close it")


def temporary_security():
    """A Dask ``Security`` for a local cluster: a fresh self-signed certificate and key, held in memory only,
    that every connection (scheduler, workers, this client) must present over TLS, so nobody without it (another
    user of this machine) can join the cluster or submit work. Made by ``Security.temporary()`` (needs the
    ``cryptography`` package), else by the ``openssl`` command; ``None`` when neither is available."""
    from distributed.security import Security

    try:
        return Security.temporary()
    except ImportError:
        pass
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    try:
        done = subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "-", "-out", "-",
                               "-subj", "/CN=dask-internal", "-days", "7", "-addext", "subjectAltName=DNS:dask-internal"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    key = re.search(r"-----BEGIN PRIVATE KEY-----.+?-----END PRIVATE KEY-----\n?", done.stdout, re.S)
    cert = re.search(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?", done.stdout, re.S)
    if done.returncode != 0 or key is None or cert is None:
        return None
    key_pem, cert_pem = key.group(0), cert.group(0)
    return Security(require_encryption=True, tls_ca_file=cert_pem, tls_client_key=key_pem, tls_client_cert=cert_pem,
                    tls_scheduler_key=key_pem, tls_scheduler_cert=cert_pem, tls_worker_key=key_pem,
                    tls_worker_cert=cert_pem)


# Where a local cluster's scheduler serves HTTP (no pages: its routes are emptied): a free port on 127.0.0.1. Without a
# dashboard Dask still opens that server, on port 8787 unless told otherwise, so two clusters at once (two commands,
# two test workers) contended for it ("Port 8787 is already in use").
HTTP_ADDRESS = "127.0.0.1:0"
# How long this process waits to connect to a cluster it started itself (its address and certificate are its own, so
# only load can slow the connection): generous, so that a busy machine is never mistaken for an unreachable cluster.
# An --address given by the user keeps a short wait, after which the error says the scheduler is not reachable.
OWN_CLUSTER_TIMEOUT, ADDRESS_TIMEOUT = "300s", "20s"


def local_cluster(n_workers: int):
    """A ``LocalCluster`` of ``n_workers`` single-threaded processes on 127.0.0.1 that only this process can use:
    every connection is TLS with a temporary certificate only this process and its workers hold
    (:func:`temporary_security`), and no dashboard (the scheduler's and the workers' HTTP servers serve no pages, on
    free ports: :data:`HTTP_ADDRESS`)."""
    import dask
    from distributed import LocalCluster

    security = temporary_security()
    if security is None:
        print(UNAUTHENTICATED, file=sys.stderr)
    with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                            dashboard_address=None, worker_dashboard_address=None, silence_logs=40, security=security,
                            scheduler_kwargs={"dashboard_address": HTTP_ADDRESS}, loop=event_loop())


@contextmanager
def session(execution: Execution):
    """An :class:`Execution` for several runs in a row: with ``workers``, one local cluster started here
    and joined by its address and credentials (so a command scoring two splits starts it once); otherwise unchanged."""
    if not execution.distributed or execution.address is not None:
        yield execution
        return
    with local_cluster(execution.workers or 2) as cluster:
        yield Execution(execution.engine, None, cluster.scheduler_address, getattr(cluster, "security", None))


def _is_loopback(address: str) -> bool:
    host = address.partition("://")[2].rpartition(":")[0] or address.rpartition(":")[0]
    return host.strip("[]") in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def _client(execution: Execution):
    """``(client, cluster or None)`` for ``execution``: a new local cluster, or the one at ``--address``
    (with the local cluster's credentials, else Dask's configured TLS settings, if any)."""
    from distributed import Client

    if execution.address is not None:
        scheme = execution.address.partition("://")[0] if "://" in execution.address else "tcp"
        security = execution.security
        if scheme in ("tls", "wss") and security is None:
            from distributed.security import Security

            security = Security()  # Dask's configuration: files named by the DASK_DISTRIBUTED__COMM__TLS__* variables
            if not (security.tls_ca_file and security.tls_client_cert):
                raise ValueError(f"--address {execution.address}: a TLS scheduler needs Dask's TLS settings: set "
                                 f"{TLS_SETTINGS} (see the README, 'Beyond one machine')")
        elif scheme in ("tcp", "ws") and not _is_loopback(execution.address):
            print(f"note: --address {execution.address}: the connection is neither encrypted nor authenticated; whoever "
                  "can reach that scheduler can run code on its workers and send this process results it unpickles "
                  "(use tls://, see the README)", file=sys.stderr)
        own = execution.security is not None  # the credentials of a cluster this process started (session)
        try:
            return Client(execution.address, timeout=OWN_CLUSTER_TIMEOUT if own else ADDRESS_TIMEOUT,
                          security=security, loop=event_loop()), None
        except (OSError, TimeoutError, ValueError, TypeError) as err:
            gc.collect()  # the failed client, whose __del__ takes Dask's loop-runner lock, goes now, not in a later lock
            raise OSError(f"--address {execution.address}: cannot reach a Dask scheduler there ({err})") from None
    cluster = local_cluster(execution.workers or 2)
    return Client(cluster, timeout=OWN_CLUSTER_TIMEOUT, loop=event_loop()), cluster


# How long this process waits for the thread of its Dask event loop (:func:`event_loop`) to start.
LOOP_START_TIMEOUT = 300.0
_LOOP = None
_LOOP_LOCK = threading.Lock()


def event_loop():
    """The Tornado ``IOLoop`` every Dask client and local cluster of this process runs on: started once, in a daemon
    thread of its own, and waited for up to :data:`LOOP_START_TIMEOUT` seconds.

    Left to itself, each ``Client`` and ``LocalCluster`` starts a loop thread of its own through
    ``distributed.utils.LoopRunner``, holding that class's lock and waiting a fixed 10 s for the thread. A client
    collected meanwhile (a failed one, garbage in a cycle: its ``__del__`` closes it, which takes the same lock) blocks
    whichever thread the collection ran in: the new loop thread, and the start fails after 10 s with ``assert loop is
    not None`` (issue 53, once in CI), or the waiting thread itself, which then waits forever (a hung test run).
    Given a running loop, the loop runner starts no thread, waits for nothing and never stops the loop, so it lives as
    long as the process."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is not None and _LOOP.asyncio_loop.is_running():
            return _LOOP
        import asyncio

        from tornado.ioloop import IOLoop

        ready, made = threading.Event(), {}

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            made["loop"] = IOLoop.current()
            loop.call_soon(ready.set)  # set once the loop runs: the loop runner refuses a loop that is not running
            loop.run_forever()

        threading.Thread(target=run, daemon=True, name="dask event loop").start()
        if not ready.wait(LOOP_START_TIMEOUT):
            raise RuntimeError(f"the Dask event loop's thread did not start in {LOOP_START_TIMEOUT:.0f} s")
        _LOOP = made["loop"]
        return _LOOP


@contextmanager
def _model_client(execution: Execution, spec: ModelSpec):
    """A Dask client for ``execution`` (:func:`_client`) whose workers hold ``spec``'s model (its plugin registered),
    closed on exit with the local cluster it started, if any."""
    client, cluster = _client(execution)
    try:
        client.register_plugin(_worker_plugin_class()(spec), name=spec.name)
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _gather_in_order(futures: list, *, desc: str, what: str, progress: bool) -> list:
    """The futures' results in submission order, gathered as they complete; a task that failed for good
    (e.g. ``KilledWorker``: its workers died more than ``allowed-failures`` times) becomes an OSError."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    number_of = {f.key: k for k, f in enumerate(futures)}
    results: dict[int, Any] = {}
    with tqdm(total=len(futures), desc=desc, unit=what, disable=not progress) as bar:
        for future in as_completed(futures):
            number = number_of[future.key]
            try:
                results[number] = future.result()
            except (OSError, ValueError):
                raise  # a bad input or an unwritable cache, said on the worker: the usual one-line error
            except Exception as err:
                raise OSError(f"--engine dask: {what} {number} failed on the cluster "
                              f"({type(err).__name__}: {err})") from err
            bar.update(1)
    return [results[k] for k in range(len(futures))]


# ------------------------------------------------------------------------------ independent model tasks

# task(lm, shared, payload) -> result: one independent piece of a run (the ablation chapter's heads of one layer);
# ``shared`` is what every task reads (sent once to each worker), ``payload`` the task's own part.
ModelTask = Callable[[Any, Any, Any], Any]


def _dask_task(spec: ModelSpec, fingerprint: str, task: ModelTask, shared: Any, payload: Any) -> Any:
    return task(_worker_model(spec, fingerprint), shared, payload)


def _held(shared: Any) -> Any:
    """``shared`` itself: the task whose result every task of :func:`map_tasks` reads."""
    return shared


def map_tasks(lm, *, execution: Execution | None, task: ModelTask, shared: Any, payloads: Sequence[Any],
              desc: str = "tasks", progress: bool = False, sizes: Sequence[int] | None = None,
              name: str = "task") -> list:
    """``[task(lm, shared, payload) for payload in payloads]``, in order: in this process (``execution`` local or
    ``None``), or one Dask task each (keyed ``{name}-00000-...``) on a cluster whose workers load the driver's model
    once (a worker with other weights refuses) and receive ``shared`` once (remade when the workers holding it die).
    The same tasks run either way, so results are identical. ``sizes``: each payload's examples, which the local progress bar counts (default 1)."""
    if execution is None or not execution.distributed:
        from tqdm.auto import tqdm

        unit = "it" if sizes is None else "ex"
        sizes = [1] * len(payloads) if sizes is None else list(sizes)
        results = []
        with tqdm(total=sum(sizes), desc=desc, unit=unit, disable=not progress) as bar:
            for payload, size in zip(payloads, sizes):
                results.append(task(lm, shared, payload))
                bar.update(size)
        return results
    spec = ModelSpec.of(lm)
    fingerprint = lm.fingerprint()
    with _model_client(execution, spec) as client:
        run = uuid.uuid4().hex[:8]  # tasks of two calls on one cluster never share a key
        # ``shared`` as a task's result, not scattered data: the scheduler keeps the task, so when the workers that
        # hold it die it is made again (scattered data has no task: its loss failed every task that read it). It
        # reaches each worker once, copied from worker to worker.
        held = client.submit(_held, shared, key=f"{name}-shared-{run}", pure=False)
        futures = [client.submit(_dask_task, spec, fingerprint, task, held, p, key=f"{name}-{k:05d}-{run}", pure=False)
                   for k, p in enumerate(payloads)]
        return _gather_in_order(futures, desc=f"{desc} on Dask", what=name, progress=progress)
