"""Fail when a built page is too heavy or shows an error: run after `jupyter-book build`.

    python scripts/check_pages.py [_build/html] [--max-mb 5]
"""
import argparse
import re
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("html", nargs="?", default="_build/html")
parser.add_argument("--max-mb", type=float, default=5.0)
args = parser.parse_args()
problems = []
pages = sorted(Path(args.html).rglob("*.html"))
for page in pages:
    text = page.read_text(encoding="utf-8", errors="replace")
    size = page.stat().st_size / 2**20
    if size > args.max_mb:
        problems.append(f"{page}: {size:.1f} MB (limit {args.max_mb} MB)")
    if re.search(r'class="output (traceback|error|stderr)', text):
        problems.append(f"{page}: has error output")
print(f"checked {len(pages)} pages: largest {max((p.stat().st_size for p in pages), default=0) / 2**20:.1f} MB")
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
