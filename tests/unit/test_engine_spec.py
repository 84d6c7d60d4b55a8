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


def test_a_client_whose_event_loop_did_not_start_is_made_again():
    """Dask's loop runner waits a fixed 10 s for its thread and fails with a bare AssertionError under load: the
    engine makes the client again (up to LOOP_START_TRIES times); any other error is raised at once."""
    import pytest

    from helpers.pipeline.engine import LOOP_START_TRIES, _started_client

    calls = []

    def flaky(fails: int, error=AssertionError):
        def make(*args, **kwargs):
            calls.append((args, kwargs))
            if len(calls) <= fails:
                raise error()
            return "client"
        return make

    assert _started_client(flaky(LOOP_START_TRIES - 1), "tls://x", timeout="300s") == "client"
    assert len(calls) == LOOP_START_TRIES and calls[-1] == (("tls://x",), {"timeout": "300s"})
    calls.clear()
    with pytest.raises(AssertionError):
        _started_client(flaky(LOOP_START_TRIES), "tls://x")
    assert len(calls) == LOOP_START_TRIES
    calls.clear()
    with pytest.raises(OSError):
        _started_client(flaky(1, OSError), "tls://x")
    assert len(calls) == 1
