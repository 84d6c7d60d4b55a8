"""A real browser with networking disabled opens a small build of the book (the shared ``small_book`` of
``tests/book/conftest.py``): every bertviz view and Altair chart must draw, with no script error and no
script loaded from outside the book."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
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


def render(page: Path) -> tuple[str, str]:
    """The page's DOM after its scripts ran, in headless Chromium inside a namespace with no network."""
    _require(CHROMIUM is not None, "chromium not installed")
    _require(shutil.which("unshare") is not None, "unshare not available")
    cmd = ["unshare", "-n", CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
           "--virtual-time-budget=20000", "--dump-dom", page.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def _assets() -> None:
    _require((ROOT / ".book_assets" / "node_modules").is_dir(), "book JavaScript not installed (scripts/setup.sh needs npm)")


def test_views_and_charts_draw_offline(small_book):
    from bs4 import BeautifulSoup

    _assets()
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
    _assets()
    page = small_book / "book" / "intro.html"
    html = (small_book / CHAPTER.replace(".ipynb", ".html")).read_text()
    assert "_static/offline/mathjax/tex-mml-chtml.js" in html
    dom, _ = render(small_book / CHAPTER.replace(".ipynb", ".html"))
    assert "mjx-container" in dom  # MathJax typeset the attention formula
    assert page.is_file()
