"""MkDocs hooks: publish the repository files the docs link to, so those links resolve.

The pages link to files beside docs/ (``../examples/quickstart.py``,
``../bench/README.md``): right on a code host and in an editor. On the site
each such file is copied under ``repo/`` (Markdown as ``.txt``, so it is shown
as written rather than built as a page) and the links are pointed there, so
``mkdocs build --strict`` still checks every other link.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\(\.\./([^)#\s]+)\)")


def _published(target: str) -> str:
    return f"repo/{target}.txt" if target.endswith(".md") else f"repo/{target}"


def _targets(docs: Path) -> set[str]:
    found = set()
    for page in docs.rglob("*.md"):
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if (ROOT / target).is_file() and not (ROOT / target).resolve().is_relative_to(docs):
                found.add(target)
    return found


def on_files(files: Files, config: Any) -> Files:
    """Add every repository file a page links to as a static file of the site."""
    for target in sorted(_targets(Path(config["docs_dir"]).resolve())):
        files.append(File.generated(config, _published(target), abs_src_path=str(ROOT / target)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point the page's links to repository files at their copies."""
    up = "../" * page.file.src_uri.count("/")

    def relink(match: re.Match[str]) -> str:
        target = match.group(1)
        if not (ROOT / target).is_file():
            return match.group(0)
        return f"]({up}{_published(target)})"

    return _LINK.sub(relink, markdown)
