"""Sphinx extension: serve bertviz's, Altair's and MathJax's JavaScript from the book itself.

bertviz output loads require.js, d3 and jQuery from cdnjs, Altair output loads vega, vega-lite and
vega-embed from jsDelivr, and Sphinx loads MathJax from jsDelivr. With no network a page then shows
an empty dropdown and a red "Error loading script". `scripts/setup.sh` installs pinned copies from the
npm registry into `.book_assets/` (see `book/assets/package.json`; never committed). This extension
copies the files the pages need into `_static/offline/` and, on each page that holds bertviz or
Altair output, rewrites those CDN addresses to the local copies; MathJax is pointed at its local copy.
Without `.book_assets/` (npm missing) the build still succeeds and says it fell back to CDNs.

Views drawn by `helpers.presentation.views` need no rewriting: the first view or chart of each chapter inlines its
JavaScript (see that module). This extension moves each such inlined bundle (a `<script
data-helpers-lib=...>`) into one shared file `_static/offline/helpers-lib-<hash>.js`, so pages stay
small and the browser loads each bundle once for the whole book.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = Path(os.environ.get("BOOK_ASSETS_DIR", ROOT / ".book_assets")) / "node_modules"

# local file under _static/offline -> file in node_modules
FILES = {
    "require.min.js": "requirejs/require.js",
    "d3.min.js": "d3/dist/d3.min.js",
    "jquery.min.js": "jquery/dist/jquery.min.js",
    "vega.min.js": "vega/build/vega.min.js",
    "vega-lite.min.js": "vega-lite/build/vega-lite.min.js",
    "vega-embed.min.js": "vega-embed/build/vega-embed.min.js",
    "mathjax/tex-mml-chtml.js": "mathjax/es5/tex-mml-chtml.js",
}
DIRECTORIES = {"mathjax/output/chtml/fonts": "mathjax/es5/output/chtml/fonts"}

# CDN address as written by bertviz / Altair -> local file; requirejs "paths" entries have no ".js"
REWRITES = [
    (re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/[\d.]+/require\.min\.js"), "require.min.js"),
    (re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/d3/[\d.]+/d3\.min(?!\.js)"), "d3.min"),
    (re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/jquery/[\d.]+/jquery\.min(?!\.js)"), "jquery.min"),
    (re.compile(r"https://cdn\.jsdelivr\.net/npm/vega@[\d.]+\?noext"), "vega.min.js?noext"),
    (re.compile(r"https://cdn\.jsdelivr\.net/npm/vega-lite@[\d.]+\?noext"), "vega-lite.min.js?noext"),
    (re.compile(r"https://cdn\.jsdelivr\.net/npm/vega-embed@[\d.]+\?noext"), "vega-embed.min.js?noext"),
    (re.compile(r"https://cdn\.jsdelivr\.net/npm/vega-lib\?noext"), "vega.min.js?noext"),  # listed, never loaded
]


# an inlined library as helpers.presentation.views writes it
INLINE_LIBRARY = re.compile(r'<script type="text/javascript" data-helpers-lib="([^"]+)">\n(.*?)\n</script>', re.S)


def _available() -> bool:
    return all((NODE_MODULES / src).is_file() for src in FILES.values())


def _copy_assets(app) -> None:
    if not _available():
        logger.info("[offline_assets] .book_assets/ not installed (npm missing?): bertviz views, Altair charts "
                    "and equations fall back to CDNs and need a network to render. Run scripts/setup.sh with npm.")
        app.config.offline_assets_enabled = False
        return
    target = Path(app.outdir) / "_static" / "offline"
    for local, src in FILES.items():
        dest = target / local
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(NODE_MODULES / src, dest)
    for local, src in DIRECTORIES.items():
        shutil.copytree(NODE_MODULES / src, target / local, dirs_exist_ok=True)
    app.config.offline_assets_enabled = True
    logger.info("[offline_assets] serving require.js, d3, jQuery, vega, vega-lite, vega-embed and MathJax locally")


def _config_inited(app, config) -> None:
    if _available():
        config.mathjax_path = "offline/mathjax/tex-mml-chtml.js"


def _drop_duplicate_scripts(context) -> None:
    """Remove repeated script entries: sphinx-thebe's inline ``const THEBE_JS_URL = ...`` is added twice by
    the jupyter-book 1.x stack, which raises "Identifier 'THEBE_JS_URL' has already been declared"."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = (getattr(script, "filename", script) or "", repr(sorted(getattr(script, "attributes", {}).items())))  # None and "" both mean inline
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def _hoist_libraries(app, body: str, prefix: str) -> str:
    """Replace each inlined helpers.presentation.views library by a script loading the same code from ``_static/offline``."""

    def hoist(match: re.Match) -> str:
        key, source = match.group(1), match.group(2)
        name = f"helpers-lib-{hashlib.sha256(source.encode()).hexdigest()[:16]}.js"
        dest = Path(app.outdir) / "_static" / "offline" / name
        if not dest.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f"{name}.{os.getpid()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, dest)  # pages are written in parallel: never expose a half-written file
        return f'<script type="text/javascript" data-helpers-lib="{key}" src="{prefix}{name}"></script>'

    return INLINE_LIBRARY.sub(hoist, body)


def _rewrite(app, pagename, templatename, context, doctree) -> None:
    _drop_duplicate_scripts(context)
    if "body" not in context:
        return
    body = context["body"]
    if "data-helpers-lib" in body:
        body = context["body"] = _hoist_libraries(app, body, context["pathto"]("_static/offline/", 1))
    if not getattr(app.config, "offline_assets_enabled", False):
        return
    if "bertviz" not in body and "vega-embed" not in body:
        return
    prefix = context["pathto"]("_static/offline/", 1)
    for pattern, local in REWRITES:
        body = pattern.sub(prefix + local, body)
    context["body"] = body


def setup(app):
    app.add_config_value("offline_assets_enabled", False, "html")
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _copy_assets)
    app.connect("html-page-context", _rewrite, priority=900)  # after extensions that add page scripts
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
