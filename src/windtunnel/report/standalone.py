"""A report page's markdown as one self-contained HTML page: rendered with Python-Markdown, every image
inlined as a base64 data URI, so the single file opens in a browser from disk."""

from __future__ import annotations

import base64
import datetime
import html
import re
from pathlib import Path

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; max-width: 1150px; margin: 2em auto;
       padding: 0 1em; color: #1d1d1f; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #bbb; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; }
th { background: #f0f0f3; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
pre { background: #f6f6f8; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
code { font-size: 0.92em; }
footer { margin-top: 3em; color: #777; font-size: 0.85em; }
"""


def to_html(markdown_text: str, base: Path, title: str) -> str:
    """The markdown rendered as one HTML page, every relative image inlined as a data URI."""
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables", "fenced_code"], output_format="html")

    def inline(m: re.Match) -> str:
        src = html.unescape(m.group(2))
        if src.startswith(("data:", "http:", "https:")):
            return m.group(0)
        path = (base / src).resolve()
        if not path.is_file():
            return f'<p class="missing">(missing image: {html.escape(src)})</p>'
        mime = "image/png" if path.suffix == ".png" else "image/svg+xml" if path.suffix == ".svg" else "image/jpeg"
        data = base64.b64encode(path.read_bytes()).decode()
        return f'{m.group(1)}"data:{mime};base64,{data}"'

    body = re.sub(r'(<img\b[^>]*?\bsrc=)"([^"]*)"', inline, body)
    from windtunnel import __version__

    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n"
            f"<footer>windtunnel {__version__}, written {stamp}. Self-contained: the plots are inlined.</footer>\n"
            f"</body>\n</html>\n")
