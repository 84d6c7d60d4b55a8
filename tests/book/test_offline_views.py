"""Views that draw with no network: packed weights, libraries sent once per kernel, no CDN address,
output size, the npm-less fallback, and (in Chromium without network) the drawn opacities equal the
weights."""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from helpers.presentation import views

# BERT-base's shape, the case the size limit is stated for
BERT_BASE_LAYERS, BERT_BASE_HEADS, PAPER_MAX_TOKENS = 12, 12, 128
SIZE_LIMIT = 5_000_000
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(autouse=True)
def fresh_kernel_state():
    """Each test starts as a new kernel: no library sent yet."""
    views._sent.clear()
    yield
    views._sent.clear()


def maps(layers=2, heads=3, n=6, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(n), size=(layers, heads, n)).astype(np.float32)


def test_packed_weights_round_trip_within_half_a_step():
    attn = maps()
    raw = np.frombuffer(base64.b64decode(views.pack_weights(attn)), dtype=np.uint8).reshape(attn.shape)
    # tolerance: one byte per weight: round(255 w) is off by at most half a step
    np.testing.assert_allclose(raw / 255.0, attn, atol=0.5 / 255 + 1e-9)
    assert views.pack_weights(np.array([[[[0.0, 1.0]]]])) == base64.b64encode(bytes([0, 255])).decode()


def test_libraries_go_with_the_first_view_only():
    attn, tokens = maps(), list("abcdef")
    first = views.head_view_html(attn, tokens)
    second = views.head_view_html(attn, tokens)
    assert first.count("data-helpers-lib") == 1 and "data-helpers-lib" not in second
    assert views.head_view(attn, tokens, html_action="return").data.count("data-helpers-lib") == 1  # self-contained
    with views.libraries_mode("never"):
        views._sent.clear()
        assert "data-helpers-lib" not in views.head_view_html(attn, tokens)
    assert views.chart_html({"mark": "point"}).count("data-helpers-lib") == 1  # vega is another library
    assert "data-helpers-lib" not in views.chart_html({"mark": "point"})


def test_no_address_outside_the_page_when_the_libraries_are_local():
    if not views.bertviz_libraries_local():
        pytest.skip("d3/jQuery not installed (scripts/setup.sh needs npm)")
    html = views.head_view(maps(), list("abcdef"), html_action="return").data + views.chart_html(views.heatmap(maps(), list("abcdef")).to_dict())
    assert not re.search(r"<script[^>]+src=", html)
    assert "cdn.jsdelivr" not in html and '<div class="helpers-note"' not in html
    for cdn in ("jsdelivr", "unpkg", "esm.sh"):
        assert cdn not in html
    # bertviz's own script still names cdnjs in require.config, which the stand-in ignores
    without_config = re.sub(r"require\.config\(\{.*?\}\);", "", html, flags=re.S)
    assert "cdnjs" in html and "cdnjs" not in without_config


def test_bert_base_head_view_of_128_tokens_stays_below_5_mb():
    attn = maps(BERT_BASE_LAYERS, BERT_BASE_HEADS, PAPER_MAX_TOKENS)
    html = views.head_view(attn, [f"t{i}" for i in range(PAPER_MAX_TOKENS)], html_action="return").data
    assert len(html.encode()) < SIZE_LIMIT
    assert "data-helpers-lib" in html or not views.bertviz_libraries_local()


def test_without_npm_assets_bertviz_says_it_uses_the_cdn(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_ASSETS_DIR", str(tmp_path))
    assert not views.bertviz_libraries_local()
    html = views.head_view_html(maps(), list("abcdef"))
    assert "not installed locally" in html and "cdnjs.cloudflare.com/ajax/libs/d3" in html


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="tokens: 5 tokens"):
        views.head_view_html(maps(), list("abcde"))
    with pytest.raises(ValueError, match="attn: expected"):
        views.head_view_html(maps()[0], list("abcdef"))
    with pytest.raises(ValueError, match="layer: 1 is not among"):
        views.head_view_html(maps(), list("abcdef"), layer=1, layers=[0])
    with pytest.raises(ValueError, match="html_action="):
        views.model_view(maps(), list("abcdef"), html_action="show")


def test_altair_renderer_is_enabled_and_used():
    import altair as alt

    before = alt.renderers.active
    try:
        alt.renderers.enable("default")
        views.enable_offline_charts()
        assert alt.renderers.active == "offline"
        bundle = views.heatmap(maps(), list("abcdef"))._repr_mimebundle_()
        html = bundle[0]["text/html"] if isinstance(bundle, tuple) else bundle["text/html"]
        assert 'id="altair-viz-' in html and "cdn.jsdelivr" not in html
        alt.renderers.enable("svg")  # a renderer the user chose stays
        views.enable_offline_charts()
        assert alt.renderers.active == "svg"
    finally:
        alt.renderers.enable(before)


@pytest.mark.browser
def test_drawn_line_opacities_are_the_weights(tmp_path):
    """In Chromium with no network, the head view's line for head h from token i to token j has
    opacity attn[layer, h, i, j] (one head selected), decoded from the packed bytes."""
    from bs4 import BeautifulSoup

    if CHROMIUM is None or shutil.which("unshare") is None or not views.bertviz_libraries_local():
        if os.environ.get("CI"):
            pytest.fail("chromium, unshare and the npm libraries are installed by the test set-up")
        pytest.skip("chromium, unshare or the npm libraries missing")
    attn, tokens = maps(3, 4, 7, seed=1), [f"w{i}" for i in range(7)]
    layer, head = 2, 1
    page = tmp_path / "views.html"
    page.write_text("<html><body>" + views.head_view(attn, tokens, layer=layer, heads=[head], html_action="return").data
                    + views.chart_html(views.heatmap(attn, tokens).to_dict()) + "</body></html>")
    done = subprocess.run(["unshare", "-n", CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=180)
    soup = BeautifulSoup(done.stdout, "html.parser")
    assert [o.get_text() for o in soup.select("#layer option")] == ["1", "2", "3"]  # 1-based layers
    lines = soup.select(f'#attention g[head-index="{head}"] line')
    assert len(lines) == len(tokens) ** 2
    for line in lines:
        i, j = int(line["left-token-index"]), int(line["right-token-index"])
        # tolerance: the opacity is round(255 w) / 255: half a step, plus the SVG's decimal printing
        assert float(line["stroke-opacity"]) == pytest.approx(attn[layer, head, i, j], abs=0.5 / 255 + 1e-6)
    others = soup.select(f'#attention g:not([head-index="{head}"]) > g > line')
    assert others and all(float(line["stroke-opacity"]) == 0 for line in others)
    chart = soup.select_one("[id^=altair-viz-]")
    assert chart.find("canvas") or chart.find("svg")


def test_the_vega_bundle_is_kept_in_the_cache_and_a_damaged_copy_made_again(tmp_path, monkeypatch):
    """vl-convert bundles once per cache folder: the next kernel reads the kept file (no bundling), a file whose
    checksum does not match is made again, and a cache that cannot be written still gives the bundle."""
    import vl_convert

    made = []

    def bundle(snippet, vl_version):
        made.append(snippet)
        return f"/* vega {vl_version} */ {snippet}"

    monkeypatch.setattr(vl_convert, "javascript_bundle", bundle)
    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(tmp_path / "cache"))
    first = views.vega_bundle("define(1);")
    assert first.endswith("define(1);") and len(made) == 1
    kept = list((tmp_path / "cache" / "assets").glob("vega-*.json"))
    assert len(kept) == 1
    assert views.vega_bundle("define(1);") == first and len(made) == 1  # read back, not bundled again
    assert views.vega_bundle("define(2);").endswith("define(2);") and len(made) == 2  # another snippet, another file
    text = kept[0].read_text()
    kept[0].write_text(text.replace("define(1);", "define(9);"))  # damaged: the checksum no longer matches
    assert views.vega_bundle("define(1);") == first and len(made) == 3
    kept[0].write_text(text[: len(text) // 2])  # cut short: not JSON
    assert views.vega_bundle("define(1);") == first and len(made) == 4
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(blocked))  # a file where the folder should be: not writable
    assert views.vega_bundle("define(1);") == first and len(made) == 5
