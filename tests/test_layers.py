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
    "toolkit": (
        "toolfold.runtime",
        "toolfold.adapters",
        "toolfold.local",
        "toolfold.mcp",
        "toolfold.otel",
        "toolfold.integrations",
    ),
    "runtime": (
        "toolfold.adapters",
        "toolfold.local",
        "toolfold.mcp",
        "toolfold.otel",
        "toolfold.integrations",
    ),
    "adapters": ("toolfold.local", "toolfold.mcp", "toolfold.otel", "toolfold.integrations"),
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


# The pure core (runtime/core) may import only these, so any driver, a durable engine's
# included, can replay it deterministically.
CORE = PACKAGE / "runtime" / "core"
CORE_MAY_IMPORT = (
    "__future__",
    "attrs",
    "base64",
    "binascii",
    "cattrs",
    "collections",
    "dataclasses",
    "difflib",  # not_a_choice's near-miss search: a pure function of its strings
    "enum",
    "functools",
    "hashlib",
    "hmac",
    "itertools",
    "json",
    "math",
    "numbers",
    "re",
    "typing",
    "unicodedata",  # normalization_variant, for error messages only (its tables follow Python)
    "toolfold._errors",
    "toolfold.runtime.core",
    "toolfold.toolkit",
)

# Calls that read a clock, randomness, the environment or the outside world.
IMPURE_CALLS = {
    "open",
    "input",
    "print",
    "getenv",
    "environ",
    "time",
    "monotonic",
    "perf_counter",
    "now",
    "utcnow",
    "today",
    "uuid1",
    "uuid4",
    "random",
    "randint",
    "choice",
    "shuffle",
    "urandom",
    "token_hex",
    "sleep",
    "Thread",
    "get_event_loop",
}


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_core_imports_only_pure_modules() -> None:
    """runtime/core imports nothing that reads a clock, the environment or the network."""
    offenders = [
        f"{path.name} imports {name}"
        for path in _core_modules()
        for name in _imports(path)
        if not any(name == ok or name.startswith(ok + ".") for ok in CORE_MAY_IMPORT)
    ]
    assert offenders == []


def test_core_calls_nothing_impure() -> None:
    """No function of the core calls a clock, randomness, the environment or I/O by name."""
    offenders = []
    for path in _core_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in IMPURE_CALLS:
                    offenders.append(f"{path.name}:{node.lineno} calls {name}")
            elif isinstance(node, ast.Attribute) and node.attr == "environ":
                offenders.append(f"{path.name}:{node.lineno} reads environ")
    assert offenders == []


def test_the_purity_guard_catches_an_impure_import(tmp_path: Path) -> None:
    """The guard's own check fails on a module that imports time (so it can fail at all)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nfrom os import environ\n", encoding="utf-8")
    names = _imports(bad)
    assert [n for n in names if not any(n.startswith(ok) for ok in CORE_MAY_IMPORT)] == [
        "time",
        "os",
    ]
