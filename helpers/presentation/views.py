"""Views of single examples (bertviz head/model views, Altair heat maps) that draw with no network.

Heads are labelled 1-based ``"layer-head"`` in every view, as in the paper; the bertviz views
number layers and heads from 1 too.

>>> from helpers import views
>>> views.head_view(attn, tokens, layer=5)  # attn: [layer, head, query, key]     # doctest: +SKIP
>>> views.heatmap(attn, tokens)            # Altair chart, layer/head sliders    # doctest: +SKIP

How the JavaScript reaches the page
-----------------------------------
bertviz loads require.js, d3 and jQuery from cdnjs and Altair loads vega, vega-lite and vega-embed
from jsDelivr, so with no network their outputs stay empty. Here every view is a plain ``text/html``
output whose ``<script>`` carries what it needs, which runs unchanged in JupyterLab 4, Notebook 7,
VS Code and the book's static pages (bertviz and Altair already depend on that):

- The first bertviz view and the first chart of a kernel session inline a minified bundle:
  d3 and jQuery from the pinned npm packages the book serves (``book/assets/package.json``,
  installed into ``.book_assets/`` by ``scripts/setup.sh``; ``$BOOK_ASSETS_DIR`` overrides), and
  vega, vega-lite and vega-embed bundled by ``vl-convert-python`` (a pinned Python dependency, so
  charts work without npm; the bundle is kept in the cache folder, :func:`vega_bundle`). Later outputs carry only their data and wait for the bundle in a small
  page-wide registry (``window.__helpersViews``); libraries never become page globals. The book's
  ``offline_assets`` extension moves each inlined bundle into one shared ``_static`` file.
- bertviz's own ``head_view.js``/``model_view.js`` are read from the installed package and run with
  a two-line stand-in for require.js; the weights travel as one base64 string of bytes (a weight
  ``w`` is sent as ``round(255 w)``, the resolution of the line opacity that draws it), 4/3 byte
  per weight instead of about 6 as JSON: a 128-token BERT-base head view is about 3.5 MB.

Why not the alternatives: a widget (ipywidgets, anywidget) needs a live kernel and a widget manager,
so saved notebooks and the book would need widget state and the widget manager's JavaScript from a
CDN; a static asset served by Jupyter's server exists neither in VS Code nor in the book, and only
under the server's root or with a server extension. Sending the bundle once per kernel keeps every
later output small, at one cost: if the output that carried the bundle is cleared, later views say
so and :func:`load_javascript` sends it again. ``html_action="return"`` gives self-contained HTML.

Without ``.book_assets/`` (npm missing) bertviz views load d3 and jQuery from cdnjs instead, with a
one-line note in the output saying so.
"""
from __future__ import annotations

import base64
import contextlib
import json
import sys
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from helpers.config import PROJECT_ROOT  # the repository: .book_assets/ lives there
from helpers.context import assets_folder
from helpers.core.encoding import check_words

Libraries = Literal["once", "always", "never"]

# npm package -> minified file inside it (as in book/_ext/offline_assets.py)
NPM_FILES = {"d3": "d3/dist/d3.min.js", "jquery": "jquery/dist/jquery.min.js"}
CDN_FALLBACK = {"d3": "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min.js",
                "jquery": "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min.js"}

_sent: set[str] = set()          # libraries already sent to this kernel's page
_mode: list[Libraries] = ["once"]  # how outputs made now include libraries (see libraries_mode)

# A page-wide registry: libraries are defined once and awaited by every view (any order).
REGISTRY_JS = """var __hv = window.__helpersViews = window.__helpersViews || {libs: {}, waiting: {},
  define: function (k, v) { if (k in this.libs) return; this.libs[k] = v;
    (this.waiting[k] || []).forEach(function (f) { f(v); }); delete this.waiting[k]; },
  get: function (k) { var r = this; return k in r.libs ? Promise.resolve(r.libs[k])
    : new Promise(function (ok) { (r.waiting[k] = r.waiting[k] || []).push(ok); }); }};"""

# Run inside a view's script: wait for library KEY, then call draw(lib); explain if it never comes.
VIEW_JS = """(function () {
  %(registry)s
  var script = document.currentScript, done = false;  // the element may not be in the document yet
  var el = document.getElementById(%(id)s) || script.parentNode.querySelector("#" + %(id)s);
  var timer = setTimeout(function () { if (!done) { var n = document.createElement("div");
    n.className = "helpers-note"; n.style.color = "#a33"; n.textContent = %(missing)s; el.appendChild(n); } }, 5000);
  __hv.get(%(key)s).then(function (lib) { done = true; clearTimeout(timer);
    var n = el.querySelector(".helpers-note"); if (n) n.remove();
    return (%(draw)s)(lib, el); })
   .catch(function (err) { done = true; el.innerHTML = '<div class="error" style="color:red;"></div>';
     el.firstChild.textContent = "View error: " + err.message; throw err; });
})();"""

MISSING = ("Waiting for this view's JavaScript, which was sent with the first view or chart of this "
           "kernel session. If its output was cleared, run helpers.views.load_javascript() in the notebook.")


def _script_literal(value) -> str:
    """JSON for inside ``<script>``: ``<`` escaped so no string can close the tag."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def _safe_source(src: str) -> str:
    if "</script" in src.lower() or "<!--" in src:
        raise ValueError("library source contains '</script' or '<!--' and cannot be inlined")
    return src


@contextlib.contextmanager
def libraries_mode(mode: Libraries):
    """Within the block, outputs include libraries ``"once"`` per kernel (default), ``"always"``
    (self-contained, nothing marked as sent) or ``"never"`` (the caller sent them)."""
    _mode.append(mode)
    try:
        yield
    finally:
        _mode.pop()


def _needs(key: str, mode: Libraries | None = None) -> bool:
    mode = mode or _mode[-1]
    if mode == "never":
        return False
    if mode == "always":
        return True
    if key in _sent:
        return False
    _sent.add(key)
    return True


# ----------------------------------------------------------------------------------------- d3/jQuery
def npm_dir() -> Path:
    """``$BOOK_ASSETS_DIR/node_modules`` if set, else ``.book_assets/node_modules`` in the repository."""
    return assets_folder() / "node_modules"


def _npm_version(package: str) -> str:
    return json.loads((npm_dir() / package / "package.json").read_text())["version"]


def bertviz_libraries_local() -> bool:
    """Whether d3 and jQuery are installed locally (else bertviz views load them from cdnjs)."""
    return all((npm_dir() / path).is_file() for path in NPM_FILES.values())


def _bertviz_key() -> str:
    if bertviz_libraries_local():
        return "+".join(f"{p}@{_npm_version(p)}" for p in NPM_FILES)
    return "d3+jquery@cdnjs"


@lru_cache(maxsize=4)
def _bertviz_library_js(key: str) -> str:
    """A script defining ``{d3, jquery}`` under ``key`` without touching page globals."""
    if key != "d3+jquery@cdnjs":
        loaders = "".join(
            f"var {name} = (function (run) {{ var module = {{exports: {{}}}}; run(module, module.exports, undefined);"
            f" return module.exports; }})(function (module, exports, define) {{\n"
            f"{_safe_source((npm_dir() / path).read_text())}\n}});\n"
            for name, path in NPM_FILES.items())
        body = f"{loaders}__hv.define({_script_literal(key)}, {{d3: d3, jquery: jquery}});"
    else:  # load from cdnjs as plain scripts (AMD hidden), then restore the page's globals
        body = """var saved = {define: window.define, d3: window.d3, jQuery: window.jQuery, $: window.$};
  function load(url) { return new Promise(function (ok, fail) { var s = document.createElement("script");
    s.src = url; s.onload = ok; s.onerror = function () { fail(new Error("could not load " + url)); };
    document.head.appendChild(s); }); }
  window.define = undefined;
  load(%s).then(function () { return load(%s); }).then(function () {
    var lib = {d3: window.d3, jquery: window.jQuery.noConflict(true)};
    window.define = saved.define; window.d3 = saved.d3; __hv.define(%s, lib); },
    function (err) { window.define = saved.define; console.error(err); });""" % (
            _script_literal(CDN_FALLBACK["d3"]), _script_literal(CDN_FALLBACK["jquery"]), _script_literal(key))
    return f"(function () {{\n{REGISTRY_JS}\nif ({_script_literal(key)} in __hv.libs) return;\n{body}\n}})();"


# --------------------------------------------------------------------------------------------- vega
def _vega_versions() -> tuple[str, str]:
    import importlib.metadata

    import altair as alt

    vl = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return vl, importlib.metadata.version("vl-convert-python")


def _vega_key() -> str:
    vl, vlc = _vega_versions()
    return f"vega-embed+vega-lite@{vl}/vl-convert@{vlc}"


@lru_cache(maxsize=2)
def _vega_library_js(key: str) -> str:
    """vega, vega-lite and vega-embed bundled by vl-convert (no npm needed), defined under ``key``."""
    snippet = f"window.__helpersViews.define({_script_literal(key)}, {{vegaEmbed: vegaEmbed, vega: vega, vegaLite: vegaLite}});"
    bundle = _safe_source(vega_bundle(snippet))
    return f"(function () {{\n{REGISTRY_JS}\nif ({_script_literal(key)} in __hv.libs) return;\n(function () {{\n{bundle}\n}})();\n}})();"


def vega_bundle(snippet: str) -> str:
    """``vl_convert.javascript_bundle(snippet)`` for this Altair's Vega-Lite, kept in the cache folder
    (``assets/vega-DIGEST.json``, named by the versions and ``snippet``; the context's cache, else
    ``$BERT_ATTENTION_CACHE``): bundling takes about 3 s of processor time, once per kernel otherwise, in every
    page and notebook that draws a chart. A kept bundle whose checksum does not match (a damaged file) is made
    again; a cache that cannot be written leaves the bundle made each time."""
    import hashlib

    from helpers.context import cache_folder
    from helpers.data.files import write_text

    vl, _ = _vega_versions()
    name = hashlib.sha256(f"{_vega_key()}\n{snippet}".encode()).hexdigest()[:20]
    path = cache_folder() / "assets" / f"vega-{name}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        kept = json.loads(path.read_text(encoding="utf-8"))
        if hashlib.sha256(kept["bundle"].encode()).hexdigest() == kept["sha256"]:
            return kept["bundle"]
    import vl_convert as vlc

    bundle = vlc.javascript_bundle(snippet, vl_version=vl)
    with contextlib.suppress(OSError):
        write_text(path, json.dumps({"key": _vega_key(), "sha256": hashlib.sha256(bundle.encode()).hexdigest(),
                                     "bundle": bundle}))
    return bundle


def _library_tag(key: str, source: str) -> str:
    # data-helpers-lib lets the book's offline_assets extension move the bundle into one shared file
    return f'<script type="text/javascript" data-helpers-lib="{key}">\n{source}\n</script>\n'


def load_javascript() -> None:
    """Send the views' JavaScript (d3/jQuery for bertviz, the vega bundle for Altair) to the page again.

    Needed only when the output that first carried it was cleared; views waiting for it then draw.
    """
    from IPython.display import HTML, display

    display(HTML(libraries_html(bertviz=True, vega=True, mode="always")))


def libraries_html(*, bertviz: bool = True, vega: bool = True, mode: Libraries | None = None) -> str:
    """``<script>`` tags defining the libraries the views need (subject to ``mode``, see :func:`libraries_mode`)."""
    html = ""
    if bertviz and _needs(key := _bertviz_key(), mode):
        html += _library_tag(key, _bertviz_library_js(key))
    if vega and _needs(key := _vega_key(), mode):
        html += _library_tag(key, _vega_library_js(key))
    return html


# ------------------------------------------------------------------------------------------ bertviz
def pack_weights(attn: np.ndarray) -> str:
    """Base64 of ``round(255 * w)`` as one byte per weight, C order (decoded in the browser as ``b / 255``)."""
    quantised = np.clip(np.rint(np.asarray(attn, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    return base64.b64encode(quantised.tobytes()).decode("ascii")


def _check(attn: np.ndarray, tokens: Sequence[str]) -> np.ndarray:
    attn = np.asarray(attn)
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"attn: expected [layer, head, query, key] with query == key, got shape {attn.shape}")
    if len(tokens) != attn.shape[-1]:
        raise ValueError(f"tokens: {len(tokens)} tokens for maps over {attn.shape[-1]} positions")
    return attn


def _subset(values: Sequence[int] | None, size: int, name: str) -> list[int]:
    chosen = list(range(size)) if values is None else [int(v) for v in values]
    if not chosen or any(not 0 <= v < size for v in chosen):
        raise ValueError(f"{name}: 0-based indices in 0..{size - 1} expected, got {values!r}")
    return chosen


def _filters(n: int, sentence_b_start: int | None) -> list[dict]:
    """bertviz's "Attention:" choices as row/column ranges over the full map."""
    if sentence_b_start is None:
        return [{"name": None, "rows": [0, n], "cols": [0, n]}]
    if not 0 < sentence_b_start < n:
        raise ValueError(f"sentence_b_start: {sentence_b_start} is not inside 1..{n - 1}")
    a, b = [0, sentence_b_start], [sentence_b_start, n]
    return [{"name": "All", "rows": [0, n], "cols": [0, n]},
            {"name": "Sentence A -> Sentence A", "rows": a, "cols": a},
            {"name": "Sentence B -> Sentence B", "rows": b, "cols": b},
            {"name": "Sentence A -> Sentence B", "rows": a, "cols": b},
            {"name": "Sentence B -> Sentence A", "rows": b, "cols": a}]


# Rebuilds bertviz's PYTHON_PARAMS in the browser from the packed bytes, then runs bertviz's script
# with a stand-in for require.js that hands it the registry's jQuery and d3.
BERTVIZ_DRAW = """function (lib, el) {
  var p = %(packed)s, s = atob(p.weights), L = p.shape[0], H = p.shape[1], N = p.shape[2], full = [];
  for (var l = 0; l < L; l++) { var layer = []; for (var h = 0; h < H; h++) { var head = [];
    for (var q = 0; q < N; q++) { var row = new Array(N), at = ((l * H + h) * N + q) * N;
      for (var k = 0; k < N; k++) row[k] = s.charCodeAt(at + k) / 255; head.push(row); }
    layer.push(head); } full.push(layer); }
  p.params.attention = p.filters.map(function (f) { return {name: f.name, left_text: p.tokens.slice(f.rows[0], f.rows[1]),
    right_text: p.tokens.slice(f.cols[0], f.cols[1]),
    attn: full.map(function (layer) { return layer.map(function (head) {
      return head.slice(f.rows[0], f.rows[1]).map(function (row) { return row.slice(f.cols[0], f.cols[1]); }); }); }) }; });
  var require = {config: function () {}}, requirejs = function (deps, run) { run(lib.jquery, lib.d3); };
  var PARAMS = p.params;
  %(script)s
}"""


def _skeleton(vis_id: str, filters: list[dict], *, layer_select: bool) -> str:
    """The elements bertviz's scripts fill (as bertviz's own Python writes them)."""
    select = ""
    if len(filters) > 1:
        options = "".join(f'<option value="{i}">{f["name"]}</option>' for i, f in enumerate(filters))
        select = f'Attention: <select id="filter">{options}</select>'
    layer = "Layer: <select id=\"layer\"></select>" if layer_select else ""
    return (f'<div id="{vis_id}" style="font-family:\'Helvetica Neue\', Helvetica, Arial, sans-serif;">'
            f'<span style="user-select:none">{layer} {select}</span><div id="vis"></div></div>')


def _bertviz_html(script_name: str, attn: np.ndarray, tokens: Sequence[str], params: dict, *,
                  sentence_b_start: int | None, libraries: Libraries | None) -> str:
    import bertviz
    from bertviz.util import format_special_chars

    vis_id = f"bertviz-{uuid.uuid4().hex}"
    filters = _filters(attn.shape[-1], sentence_b_start)
    params = {**params, "default_filter": "0", "root_div_id": vis_id}
    packed = {"weights": pack_weights(attn), "shape": list(attn.shape), "filters": filters,
              "tokens": format_special_chars([str(t) for t in tokens]), "params": params}
    script = (Path(bertviz.__file__).parent / script_name).read_text()
    if "PYTHON_PARAMS" not in script:
        raise RuntimeError(f"bertviz's {script_name} no longer has the PYTHON_PARAMS marker: update helpers/presentation/views.py")
    script = _safe_source(script.replace("PYTHON_PARAMS", "PARAMS"))
    key = _bertviz_key()
    note = ""
    if key == "d3+jquery@cdnjs":
        note = ('<div class="helpers-note" style="font-size:small;color:#777">d3 and jQuery are not installed '
                'locally (scripts/setup.sh installs them with npm): this view loads them from cdnjs.</div>')
    draw = BERTVIZ_DRAW % {"packed": _script_literal(packed), "script": script}
    view = VIEW_JS % {"registry": REGISTRY_JS, "id": _script_literal(vis_id), "key": _script_literal(key),
                      "missing": _script_literal(MISSING), "draw": draw}
    mode = libraries or _mode[-1]
    libs = _library_tag(key, _bertviz_library_js(key)) if _needs(key, mode) else ""
    return f"{note}{_skeleton(vis_id, filters, layer_select=script_name == 'head_view.js')}\n{libs}" \
           f'<script type="text/javascript">\n{view}\n</script>\n'


def _show(html: str, html_action: str):
    from IPython.display import HTML, display

    if html_action == "view":
        display(HTML(html))
        return None
    if html_action == "return":
        return HTML(html)
    raise ValueError(f"html_action={html_action!r}: choose 'view' or 'return'")


def head_view(attn: np.ndarray, tokens: Sequence[str], *, layer: int = 0, heads: Sequence[int] | None = None,
              layers: Sequence[int] | None = None, sentence_b_start: int | None = None, html_action: str = "view"):
    """bertviz head view of one example ``attn: [layer, head, query, key]``; ``layer``, ``heads``, ``layers`` 0-based.

    ``layers`` limits the layers embedded in the page (all by default); ``heads`` preselects heads;
    ``sentence_b_start`` (token index) adds bertviz's sentence A/B filter. ``html_action="view"``
    displays it; ``"return"`` returns a self-contained ``IPython.display.HTML`` (libraries inlined).
    """
    html = head_view_html(attn, tokens, layer=layer, heads=heads, layers=layers, sentence_b_start=sentence_b_start,
                          libraries="always" if html_action == "return" else None)
    return _show(html, html_action)


def head_view_html(attn: np.ndarray, tokens: Sequence[str], *, layer: int = 0, heads: Sequence[int] | None = None,
                   layers: Sequence[int] | None = None, sentence_b_start: int | None = None,
                   libraries: Libraries | None = None) -> str:
    """The HTML of :func:`head_view`; ``libraries`` as in :func:`libraries_mode` (default: the current mode)."""
    attn = _check(attn, tokens)
    chosen = _subset(layers, attn.shape[0], "layers")
    if layer not in chosen:
        raise ValueError(f"layer: {layer} is not among the embedded layers {chosen}")
    params = {"layer": layer + 1, "heads": None if heads is None else _subset(heads, attn.shape[1], "heads"),
              "include_layers": [l + 1 for l in chosen]}  # bertviz shows these numbers: 1-based
    return _bertviz_html("head_view.js", attn[chosen], tokens, params, sentence_b_start=sentence_b_start,
                         libraries=libraries)


def model_view(attn: np.ndarray, tokens: Sequence[str], *, layers: Sequence[int] | None = None,
               heads: Sequence[int] | None = None, sentence_b_start: int | None = None, html_action: str = "view"):
    """bertviz model view (every layer x head thumbnail) of one example; ``layers``/``heads`` 0-based subsets.

    Layers and heads are labelled 1-based. ``html_action`` as in :func:`head_view`.
    """
    attn = _check(attn, tokens)
    chosen_layers = _subset(layers, attn.shape[0], "layers")
    chosen_heads = _subset(heads, attn.shape[1], "heads")
    params = {"display_mode": "light", "include_layers": [l + 1 for l in chosen_layers],
              "include_heads": [h + 1 for h in chosen_heads], "total_heads": attn.shape[1]}
    sub = attn[np.ix_(chosen_layers, chosen_heads)]
    html = _bertviz_html("model_view.js", sub, tokens, params, sentence_b_start=sentence_b_start,
                         libraries="always" if html_action == "return" else None)
    return _show(html, html_action)


# ------------------------------------------------------------------------------------------- Altair
CHART_DRAW = """function (lib, el) {
  return lib.vegaEmbed(el, %(spec)s, %(options)s);
}"""


def chart_html(spec: dict, *, embed_options: dict | None = None, libraries: Libraries | None = None) -> str:
    """HTML drawing a Vega-Lite ``spec`` with the vl-convert bundle (see the module docstring)."""
    div = f"altair-viz-{uuid.uuid4().hex}"
    options = {"mode": "vega-lite", **(embed_options or {})}
    draw = CHART_DRAW % {"spec": _script_literal(spec), "options": _script_literal(options)}
    view = VIEW_JS % {"registry": REGISTRY_JS, "id": _script_literal(div), "key": _script_literal(_vega_key()),
                      "missing": _script_literal(MISSING), "draw": draw}
    libs = libraries_html(bertviz=False, vega=True, mode=libraries)
    return (f"<style>#{div}.vega-embed {{width: 100%; display: flex;}} #{div}.vega-embed details, "
            f"#{div}.vega-embed details summary {{position: relative;}}</style>\n"
            f'<div id="{div}"></div>\n{libs}<script type="text/javascript">\n{view}\n</script>\n')


def offline_renderer(spec: dict, **metadata) -> dict:
    """Altair renderer: ``text/html`` drawn with vega from vl-convert, no CDN (registered as ``"offline"``)."""
    return {"text/html": chart_html(spec, embed_options=metadata.get("embed_options")),
            "text/plain": "<Altair chart (drawn offline by helpers.presentation.views)>"}


def enable_offline_charts() -> None:
    """Register Altair's ``"offline"`` renderer and enable it unless the user chose another than the default.

    Called (in a notebook kernel) when the package makes its first chart (:func:`altair_offline`), so every
    Altair chart of the session draws offline; call it yourself for charts of your own made before one.
    """
    import altair as alt

    if "offline" not in alt.renderers.names():
        alt.renderers.register("offline", offline_renderer)
    if alt.renderers.active in ("default", "html"):
        alt.renderers.enable("offline")


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and hasattr(shell, "kernel")


_renderer_checked = [False]  # whether this session's first chart has set the renderer up


def not_drawn(what: str, why: str):
    """The line a figure the model does not have shows instead (``what``: the figure; ``why``: the reason)."""
    from IPython.display import HTML

    return HTML(f"<p><em>Not drawn for this model ({what}): {why}.</em></p>")


MAX_CHART_ROWS = 100_000  # rows embedded in one chart (altair's default stops at 5,000)


def altair_offline():
    """The ``altair`` module, with the offline renderer enabled when running in a notebook kernel (checked
    once per session, when the first chart is made: nothing is registered at import)."""
    import altair as alt

    if not _renderer_checked[0]:
        _renderer_checked[0] = True
        # a chart of every head of a large model passes altair's default limit of 5,000 rows (relations x heads of a
        # 30 x 9 decoder: 8,640); the data is embedded in the page either way
        alt.data_transformers.enable("default", max_rows=MAX_CHART_ROWS)
        if _in_notebook():
            enable_offline_charts()
    return alt


# ------------------------------------------------------------------------------------- heat maps
def attention_rows(attn: np.ndarray, *, decimals: int = 3) -> list[dict]:
    """One record per ``(layer, head, query)`` with its weights as a list (layer/head 1-based).

    Compact for embedding in pages: the chart flattens ``w`` (weights) and ``k`` (key positions)
    back to one mark per weight in the browser.
    """
    attn = np.round(np.asarray(attn, dtype=np.float64), decimals)
    n_layers, n_heads, n_q, n_k = attn.shape
    keys = list(range(n_k))
    return [
        {"layer": l + 1, "head": h + 1, "query": q, "k": keys, "w": attn[l, h, q].tolist()}
        for l in range(n_layers) for h in range(n_heads) for q in range(n_q)
    ]


def heatmap(attn: np.ndarray, tokens: Sequence[str], *, title: str = "", layer: int = 0, head: int = 0,
            size: int = 320):
    """Interactive heat map (rows: attending token, columns: attended token) with layer/head sliders.

    ``layer`` and ``head`` are the initial selection, 0-based like every index in code (as in
    :func:`head_view`); the sliders show them 1-based, like head labels. Weights are embedded as one short list
    per row and token labels joined in the browser, which keeps pages light.
    """
    alt = altair_offline()

    attn = np.asarray(attn)
    n_layers, n_heads = attn.shape[:2]
    _subset([layer], n_layers, "layer")
    _subset([head], n_heads, "head")
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]  # positions keep repeated tokens apart
    names = alt.Data(values=[{"pos": i, "label": t} for i, t in enumerate(labels)])
    weights = alt.Data(values=attention_rows(attn))
    layer_pick = alt.param(name="layer", value=layer + 1, bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer "))
    head_pick = alt.param(name="head", value=head + 1, bind=alt.binding_range(min=1, max=n_heads, step=1, name="head "))
    return (
        alt.Chart(weights, title=title or "Attention weights (row: attending, column: attended)")
        .mark_rect()
        .transform_filter((alt.datum.layer == layer_pick) & (alt.datum.head == head_pick))
        .transform_flatten(["k", "w"], as_=["key", "weight"])
        .transform_lookup(lookup="query", from_=alt.LookupData(names, "pos", ["label"]), as_=["query_token"])
        .transform_lookup(lookup="key", from_=alt.LookupData(names, "pos", ["label"]), as_=["key_token"])
        .encode(
            x=alt.X("key_token:N", sort=labels, title="attended token (key)"),
            y=alt.Y("query_token:N", sort=labels, title="attending token (query)"),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="weight"),
            tooltip=["layer:O", "head:O", "query_token:N", "key_token:N", "weight:Q"],
        )
        .add_params(layer_pick, head_pick)
        .properties(width=size, height=size)
    )


def head_heatmap(attn: np.ndarray, labels: Sequence[str], *, title: str = "", size: int = 320):
    """Heat map of one head's map ``attn: [query, key]`` (rows attend, columns are attended), no sliders."""
    alt = altair_offline()

    a = np.asarray(attn, dtype=np.float64)
    if a.ndim != 2 or a.shape != (len(labels), len(labels)):
        raise ValueError(f"attn: expected one head's [query, key] map over {len(labels)} labels, got shape {a.shape}")
    names = [f"{i}:{t}" for i, t in enumerate(labels)]
    rows = [{"query": names[i], "key": names[j], "weight": round(float(a[i, j]), 3)}
            for i in range(a.shape[0]) for j in range(a.shape[1])]
    return alt.Chart(alt.Data(values=rows), title=title).mark_rect().encode(
        x=alt.X("key:N", sort=names, title="attended (key)"),
        y=alt.Y("query:N", sort=names, title="attending (query)"),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="weight"),
        tooltip=["query:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
    ).properties(width=size, height=size)


def attention_lines(attn: np.ndarray, words: Sequence[str], *, highlight: Sequence[int] = (), color_from: bool = True,
                    title: str = "", hide_special: bool = False, special: Sequence[int] | None = None,
                    height_per_word: int = 16):
    """Figure-5-style view of one head: a line from each attending word (left) to each attended word
    (right), opacity = weight; lines from (or, with ``color_from=False``, to) ``highlight`` positions are red.

    ``attn`` is one head's word-level map ``[query, key]`` over ``words`` ([CLS] and [SEP] included);
    ``hide_special`` drops attention to the ``special`` positions (by default the first and the last: [CLS] and
    [SEP]; a decoder's map has only BOS, at the first, or none) and renormalises rows.
    """
    check_words(words)
    alt = altair_offline()
    import pandas as pd

    a = np.asarray(attn, dtype=np.float64).copy()
    if hide_special:
        a[:, list((0, a.shape[-1] - 1) if special is None else special)] = 0.0
        a = a / np.maximum(a.sum(-1, keepdims=True), 1e-12)
    marked = set(highlight)
    rows = [{"i": i, "j": j, "weight": round(float(a[i, j]), 3), "from": words[i], "to": words[j],
             "hl": (i if color_from else j) in marked}
            for i in range(a.shape[0]) for j in range(a.shape[1]) if a[i, j] >= 0.01]
    lines = alt.Chart(pd.DataFrame(rows)).mark_rule(strokeWidth=2).encode(
        x=alt.value(60), x2=alt.value(200), y=alt.Y("i:O", axis=None), y2="j:O",
        opacity=alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]), legend=None),
        color=alt.condition(alt.datum.hl, alt.value("#d62728"), alt.value("#1f77b4")),
        tooltip=["from:N", "to:N", alt.Tooltip("weight:Q", format=".3f")],
    )
    labels = pd.DataFrame({"i": range(len(words)), "word": list(words), "hl": [k in marked for k in range(len(words))]})
    left = alt.Chart(labels).mark_text(align="right", dx=-4).encode(
        x=alt.value(56), y=alt.Y("i:O", axis=None), text="word:N",
        color=alt.condition(alt.datum.hl, alt.value("#d62728"), alt.value("black")))
    right = left.encode(x=alt.value(204)).mark_text(align="left", dx=4)
    return alt.layer(lines, left, right).properties(title=title, width=260, height=height_per_word * len(words))
