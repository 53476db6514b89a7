"""The package keeps its layering: imports point one way, and `import toolfold` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "toolfold"

# layer -> layers it must never import
FORBIDDEN = {
    "toolkit": ("toolfold.runtime", "toolfold.adapters"),
    "runtime": ("toolfold.adapters",),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_one_way(layer: str) -> None:
    """No module of a lower layer imports a higher one."""
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in _imports(path)
        if name.startswith(FORBIDDEN[layer])
    ]
    assert offenders == []


def test_import_toolfold_loads_no_adapter_or_validator() -> None:
    """`import toolfold` defers the adapters, jsonschema and cattrs until they are needed."""
    code = (
        "import sys, toolfold; "
        "heavy = [m for m in ('toolfold.adapters', 'jsonschema', 'cattrs') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
