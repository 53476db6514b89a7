"""MkDocs hooks: publish examples/ with the site, so the docs' links to them resolve.

The pages link to ``../examples/NAME.py`` (right on GitHub and in an editor,
where docs/ and examples/ are siblings). On the site each example is copied to
``examples/NAME.py`` and those links are pointed there, so ``mkdocs build
--strict`` still checks every other link.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def on_files(files: Files, config: Any) -> Files:
    """Add every example as a static file of the site."""
    for path in sorted((ROOT / "examples").glob("*.py")):
        files.append(File.generated(config, f"examples/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point links to ``../examples/`` at the copies, relative to the page."""
    depth = page.file.src_uri.count("/")
    return markdown.replace("](../examples/", "](" + "../" * depth + "examples/")
