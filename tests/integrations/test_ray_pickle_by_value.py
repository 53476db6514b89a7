"""A module-level tool of a module cloudpickle pickles by value ships to a process without the module."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from ray import cloudpickle

MODULE = '''
from toolfold import tool


@tool
def shipped(n: int) -> str:
    """Shipped.

    Args:
        n: A number.
    """
    return f"shipped {n}"
'''

LOAD = """
import pickle, sys
loaded = pickle.loads(sys.stdin.buffer.read())
print(loaded.name, loaded(2), loaded.validate_arguments({"n": 3}))
"""


def test_a_tool_of_a_module_registered_by_value_loads_where_the_module_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``cloudpickle.register_pickle_by_value(module)`` a module-level tool of it
    pickles by value (as Ray ships it), and loads in a process that cannot import the module."""
    (tmp_path / "toolfold_shipped_tools.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toolfold_shipped_tools")
    cloudpickle.register_pickle_by_value(module)
    try:
        data = cloudpickle.dumps(module.shipped)
        copied = cloudpickle.dumps(module.shipped.replace(timeout=5))
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        del sys.modules["toolfold_shipped_tools"]
    root = Path(__file__).resolve().parents[2]
    for shipped in (data, copied):  # (a `replace` copy's function by value too)
        loaded = subprocess.run(
            [sys.executable, "-c", LOAD],
            input=shipped,
            capture_output=True,
            cwd=root,
            env={"PYTHONPATH": str(root)},
            check=False,
        )
        assert loaded.stderr.decode() == ""
        assert loaded.stdout.decode().split() == ["shipped", "shipped", "2", "{'n':", "3}"]


def test_a_tool_of_a_module_not_registered_pickles_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the registration cloudpickle pickles a module-level tool as its module's
    attribute, and a `replace` copy as its original (ray.md): the copy's function as that
    tool's, so a process without the module cannot load it."""
    (tmp_path / "toolfold_named_tools.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toolfold_named_tools")
    try:
        assert cloudpickle.loads(cloudpickle.dumps(module.shipped)) is module.shipped
        copied = cloudpickle.dumps(module.shipped.replace(timeout=5))
        back = cloudpickle.loads(copied)
        assert (back.function, back.timeout) == (module.shipped.function, 5)
    finally:
        del sys.modules["toolfold_named_tools"]
    root = Path(__file__).resolve().parents[2]
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD],
        input=copied,
        capture_output=True,
        cwd=root,
        env={"PYTHONPATH": str(root)},
        check=False,
    )
    assert "No module named 'toolfold_named_tools'" in loaded.stderr.decode()
