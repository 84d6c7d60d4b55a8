"""What the distributed engine sends its workers and what the probes load besides the model (no Dask
needed): the model spec and the random-init control keep the driver's cache."""
from __future__ import annotations


def test_model_spec_carries_the_cache_to_the_workers(tiny_model_dir, tmp_path, monkeypatch):
    """A worker loads the driver's model from the driver's cache: an extra installed under --cache-dir is found
    there even where the worker's own default cache ($BERT_ATTENTION_CACHE) is another folder."""
    import shutil

    from helpers.core.model_extras import EXTRAS
    from helpers.core.models import load_model
    from helpers.pipeline.engine import ModelSpec

    cache = tmp_path / "cache"
    shutil.copytree(tiny_model_dir, cache / "models" / "mpnet-base" / EXTRAS["mpnet-base"].folder)
    lm = load_model("mpnet-base", cache_root=cache)
    spec = ModelSpec.of(lm)
    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(tmp_path / "a-worker's-own-cache"))
    assert spec.load().fingerprint() == lm.fingerprint()


def test_probe_control_is_loaded_from_the_models_cache(tiny_model_dir, tmp_path, monkeypatch):
    """§5's random-init control of an extra installed under --cache-dir loads from that cache, not from the
    default one (it dropped cache_root and failed with 'not installed')."""
    import shutil

    from helpers.core.model_extras import EXTRAS
    from helpers.core.models import load_model
    from helpers.probe.run import control_model

    cache = tmp_path / "cache"
    shutil.copytree(tiny_model_dir, cache / "models" / "mpnet-base" / EXTRAS["mpnet-base"].folder)
    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(tmp_path / "the-default-cache"))
    lm = load_model("mpnet-base", cache_root=cache)
    control = control_model(lm)
    # (the tiny model was itself made with seed 0, so its control has the same weights: only where it loads from is checked)
    assert control.random_init and control.n_layers == lm.n_layers and control.cache_root == str(cache)


def test_clients_and_clusters_share_one_event_loop_started_without_dasks_fixed_wait(monkeypatch):
    """Dask's loop runner waits a fixed 10 s for a loop thread of its own and fails with a bare AssertionError under
    load (issue 53): the engine starts one loop for the process (waiting up to LOOP_START_TIMEOUT) and hands it to
    every client and cluster, whose loop runners then start nothing and wait for nothing."""
    import threading

    import pytest

    pytest.importorskip("distributed")
    from distributed.utils import LoopRunner

    from helpers.pipeline.engine import event_loop

    loop = event_loop()
    assert loop.asyncio_loop.is_running() and event_loop() is loop

    def no_waiting(self, timeout=None):
        raise AssertionError(f"waited on a thread (timeout {timeout})")

    # a loop runner given the engine's loop starts at once (no thread of its own to wait for) and leaves the loop running
    monkeypatch.setattr(threading.Event, "wait", no_waiting)
    runner = LoopRunner(loop=loop)
    runner.start()
    assert runner.is_started() and runner._loop_thread is None
    runner.stop()
    assert loop.asyncio_loop.is_running() and event_loop() is loop
