"""The disk cache: reuse, float16 fidelity, corruption, staleness and resuming an interrupted run."""
import numpy as np
import pytest

import helpers.data.cache as cache_mod
import helpers.pipeline.shards as shards
from helpers.pipeline.extraction import extract
from helpers.core.encoding import encode_words
from helpers.core.extract import iter_attention
from tolerances import default_float64, in_float64, round_off

SENTS = [["the", "cat", "sat"] * k for k in range(1, 9)]


@pytest.fixture
def batch(tiny_lm):
    return encode_words(tiny_lm.tokenizer, SENTS)


def test_cached_maps_equal_live_maps(tiny_lm, batch, tmp_path):
    # Shards batch other neighbours than the live pass: two float32 passes would differ by what the layers make
    # of their round-off, which no test bounds; in float64 (the word conversion too) they differ by float64
    # round-off, and each side is rounded once to the float32 of the maps (stored as float32: no more rounding).
    lm = in_float64(tiny_lm)
    with default_float64():
        store = extract(lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
        assert store.stats["shards_computed"] == 3
        live = {ex.index: a for ex, a in iter_attention(lm, batch, level="word")}
    got = {ex.index: a for ex, a in store}
    assert sorted(got) == sorted(live)
    for i in live:
        # tolerance: one float32 rounding of each side
        np.testing.assert_allclose(got[i], live[i], rtol=0, atol=round_off(live[i]))
    np.testing.assert_allclose(store[4], live[4], rtol=0, atol=round_off(live[4]))  # as above
    with default_float64():
        again = extract(lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    assert again.stats["shards_reused"] == 3 and again.stats["shards_computed"] == 0


def _buffer(a: np.ndarray) -> np.ndarray:
    while a.base is not None:
        a = a.base
    return a


def test_reading_holds_one_shard_at_a_time(tiny_lm, batch, tmp_path, monkeypatch):
    """Streaming a cached store keeps one shard's buffer alive at a time, even while the caller still
    holds the last map it was given (a loop variable), and none once the loop ends."""
    import gc
    import weakref

    store = extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    store = extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)  # read back
    stream = store.items()
    first_shard = len(store.shards[0])
    held = [next(stream) for _ in range(first_shard)]  # the whole first shard
    buffer = weakref.ref(_buffer(next(iter(store._loaded[1].values()))))  # the shard's one buffer
    last = held[-1][1]
    assert np.shares_memory(held[0][1], buffer()) and not np.shares_memory(last, buffer())  # the last map is a copy
    del held
    gc.collect()
    assert buffer() is not None  # still in use by the stream
    alive_during_read = []
    read = cache_mod._read_shard

    def checking_read(*args, **kwargs):
        gc.collect()
        alive_during_read.append(buffer() is not None)
        return read(*args, **kwargs)

    monkeypatch.setattr(cache_mod, "_read_shard", checking_read)
    _, attn = next(stream)  # the second shard is read while `last` is still held
    assert alive_during_read == [False], "the first shard was still in memory while the second was read"
    second = weakref.ref(_buffer(next(iter(store._loaded[1].values()))))
    del attn
    for _ in stream:
        pass
    gc.collect()
    assert second() is None and store._loaded is None  # nothing kept after the loop
    np.testing.assert_array_equal(last, store[store.shards[0][-1].index])  # the copy holds the same numbers


def test_making_holds_one_shard_at_a_time(tiny_lm, batch, tmp_path, monkeypatch):
    """Extracting cold keeps one shard's maps at a time: the maps of a shard just written are freed before
    the next shard is made (holding them took the coreference chapter's whole-document windows over 3 GB)."""
    import gc
    import weakref

    made, alive_when_making = [], []
    make, write = shards.iter_map_batches, shards._write_shard

    def tracked_make(*args, **kwargs):  # a shard's passes start
        gc.collect()
        alive_when_making.append(sum(ref() is not None for ref in made))
        return make(*args, **kwargs)

    def tracked_write(path, key, pairs, *args, **kwargs):  # a shard's maps, as written
        made.extend(weakref.ref(attn) for _, attn in pairs)
        return write(path, key, pairs, *args, **kwargs)

    monkeypatch.setattr(shards, "iter_map_batches", tracked_make)
    monkeypatch.setattr(shards, "_write_shard", tracked_write)
    extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    assert len(alive_when_making) == 3 and len(made) == len(batch.examples)
    assert alive_when_making == [0, 0, 0], "a written shard's maps were still in memory while the next was made"


def test_settings_change_the_key(tiny_lm, batch, tmp_path):
    a = extract(tiny_lm, batch, level="word", cache_root=tmp_path, progress=False)
    b = extract(tiny_lm, batch, level="word", word_mode="first", cache_root=tmp_path, progress=False)
    c = extract(tiny_lm, encode_words(tiny_lm.tokenizer, SENTS[:-1]), level="word", cache_root=tmp_path, progress=False)
    assert len({a.directory, b.directory, c.directory}) == 3


@pytest.mark.parametrize("damage", ["truncate", "garbage", "stale"])
def test_damaged_shard_is_recomputed(tiny_lm, batch, tmp_path, damage):
    store = extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    before = {ex.index: a for ex, a in store}
    shard = store.directory / "shard-00001.npz"
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    elif damage == "garbage":
        shard.write_bytes(b"not a zip file")
    else:  # a shard from another extraction copied over this one
        other = extract(tiny_lm, batch, level="word", word_mode="first", cache_root=tmp_path, shard_size=3,
                        progress=False)
        shard.write_bytes((other.directory / "shard-00001.npz").read_bytes())
    again = extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    assert again.stats["shards_recomputed"] == 1 and again.stats["shards_computed"] == 1
    after = {ex.index: a for ex, a in again}
    for i in before:
        np.testing.assert_array_equal(after[i], before[i])


def test_interrupted_run_resumes(tiny_lm, batch, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = shards.iter_map_batches  # a shard's passes (the shard task, extract's and the route's)

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(shards, "iter_map_batches", failing)
    with pytest.raises(KeyboardInterrupt):
        extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    monkeypatch.setattr(shards, "iter_map_batches", real)
    resumed = extract(tiny_lm, batch, level="word", cache_root=tmp_path, shard_size=3, progress=False)
    assert resumed.stats["shards_reused"] == 1 and resumed.stats["shards_computed"] == 2
    assert not list(resumed.directory.glob("*.tmp"))


def test_uncached_store_streams_without_writing(tiny_lm, batch, tmp_path):
    store = extract(tiny_lm, batch, level="token", cache=False, cache_root=tmp_path, progress=False)
    assert store.directory is None and sum(1 for _ in store) == len(SENTS)
    assert not any(tmp_path.iterdir())


def test_everything_too_long_is_a_clear_error(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, [["the"] * 40], max_length=10)
    with pytest.raises(ValueError, match="all 1 inputs exceed --max-length 10"):
        extract(tiny_lm, batch, progress=False)


def test_shard_file_is_what_numpy_savez_writes(tmp_path):
    """The streamed shard writer gives the arrays ``np.savez`` of the concatenation would (read back with
    ``np.load``), for several maps, float16 too, and for an empty shard."""
    from types import SimpleNamespace

    rng = np.random.default_rng(0)
    for dtype, sizes in ((np.float32, (3, 5, 2)), (np.float16, (4,)), (np.float32, ())):
        padded = rng.random((len(sizes), 2, 3, 6, 6)).astype(np.float32)  # a padded batch, as extraction yields
        maps = [padded[b, :, :, :n, :n] for b, n in enumerate(sizes)]  # views, not contiguous
        pairs = [(SimpleNamespace(index=10 + i), m) for i, m in enumerate(maps)]  # the writer reads .index only
        path = tmp_path / f"shard-{np.dtype(dtype).name}-{len(sizes)}.npz"
        cache_mod._write_shard(path, "the-key", pairs, dtype=dtype)
        with np.load(path, allow_pickle=False) as npz:
            assert sorted(npz.files) == ["data", "indices", "key", "offsets", "sizes"]
            assert str(npz["key"]) == "the-key"
            assert npz["indices"].tolist() == [10 + i for i in range(len(sizes))]
            assert npz["sizes"].tolist() == list(sizes)
            want = np.concatenate([m.astype(dtype).ravel() for m in maps]) if maps else np.zeros(0, dtype)
            assert npz["data"].dtype == np.dtype(dtype)
            np.testing.assert_array_equal(npz["data"], want)
            assert npz["offsets"].tolist() == [0, *np.cumsum([m.size for m in maps]).tolist()]
        if maps:
            back = cache_mod._read_shard(path, 2, 3)
            for i, m in enumerate(maps):
                np.testing.assert_array_equal(back[10 + i], m.astype(dtype).astype(back[10 + i].dtype))
