"""A real browser with networking disabled opens a small build of the book: every bertviz view and
Altair chart must draw, with no script error and no script loaded from outside the book."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHAPTER = "notebooks/02_attention_maps.ipynb"  # has bertviz head and model views and Altair heat maps

pytestmark = pytest.mark.browser


def _require(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(why)  # the test set-up installs chromium; in CI its absence is a failure
        pytest.skip(why)


@pytest.fixture(scope="module")
def small_book(tmp_path_factory) -> Path:
    _require((ROOT / ".book_assets" / "node_modules").is_dir(), "book JavaScript not installed (scripts/setup.sh needs npm)")
    src = tmp_path_factory.mktemp("book")
    # this book holds one chapter: its links to the others ({doc}) cannot resolve, and only they are forgiven
    config = (ROOT / "_config.yml").read_text()
    assert 'suppress_warnings: ["mystnb.unknown_mime_type"]' in config
    (src / "_config.yml").write_text(config.replace('suppress_warnings: ["mystnb.unknown_mime_type"]',
                                                    'suppress_warnings: ["mystnb.unknown_mime_type", "ref.doc"]'))
    (src / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: " + CHAPTER[:-6] + "\n")
    shutil.copytree(ROOT / "book", src / "book")
    (src / "notebooks").mkdir()
    shutil.copy(ROOT / CHAPTER, src / CHAPTER)
    env = {**os.environ, "BERT_ATTENTION_SMALL": "1", "BOOK_ASSETS_DIR": str(ROOT / ".book_assets")}
    jb = Path(sys.executable).with_name("jupyter-book")
    done = subprocess.run([str(jb), "build", str(src), "-W", "-n", "--keep-going"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return src / "_build" / "html"


def render(page: Path) -> tuple[str, str]:
    """The page's DOM after its scripts ran, in headless Chromium inside a namespace with no network."""
    _require(CHROMIUM is not None, "chromium not installed")
    _require(shutil.which("unshare") is not None, "unshare not available")
    cmd = ["unshare", "-n", CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
           "--virtual-time-budget=20000", "--dump-dom", page.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def test_views_and_charts_draw_offline(small_book):
    from bs4 import BeautifulSoup

    page = small_book / CHAPTER.replace(".ipynb", ".html")
    html = page.read_text()
    external = re.findall(r'<script[^>]+src="(https?://[^"]+)"', html)
    external += re.findall(r'"(https://(?:cdn|cdnjs|unpkg)[^"]+)"\s*[,}]', html)
    assert external == [], f"scripts still loaded from outside the book: {external}"
    dom, log = render(page)
    soup = BeautifulSoup(dom, "html.parser")
    charts = soup.select("[id^=altair-viz-]")
    views = soup.select("[id^=bertviz-]")
    assert len(charts) >= 2 and len(views) >= 2
    for chart in charts:
        assert chart.find("canvas") or chart.find("svg"), f"Altair chart {chart.get('id')} did not draw"
    for view in views:
        svg = view.find("svg")
        assert svg is not None and svg.find_all(["line", "path", "rect"]), f"bertviz view {view.get('id')} drew nothing"
    assert not soup.select("div.error"), [d.get_text() for d in soup.select("div.error")]
    assert "Uncaught" not in log, [line for line in log.splitlines() if "Uncaught" in line]


def test_equations_render_with_local_mathjax(small_book):
    page = small_book / "book" / "intro.html"
    html = (small_book / CHAPTER.replace(".ipynb", ".html")).read_text()
    assert "_static/offline/mathjax/tex-mml-chtml.js" in html
    dom, _ = render(small_book / CHAPTER.replace(".ipynb", ".html"))
    assert "mjx-container" in dom  # MathJax typeset the attention formula
    assert page.is_file()
