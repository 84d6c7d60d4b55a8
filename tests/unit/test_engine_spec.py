"""What the distributed engine sends its workers (no Dask needed): the model spec, with the driver's cache."""
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
