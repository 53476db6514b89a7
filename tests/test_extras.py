"""A package of an optional extra imported without it says which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("package", "blocked", "message"),
    [
        ("toolfold.otel", "opentelemetry", "toolfold.otel needs 'opentelemetry'"),
        ("toolfold.integrations.ray", "ray", "toolfold.integrations.ray needs 'ray'"),
        ("toolfold.integrations.ray", "tqdm", "toolfold.integrations.ray needs 'tqdm'"),
        (
            "toolfold.integrations.temporal",
            "temporalio",
            "toolfold.integrations.temporal needs 'temporalio'",
        ),
    ],
)
def test_a_package_without_its_extra_names_the_extra(
    package: str, blocked: str, message: str
) -> None:
    """Importing it with a module of its extra missing raises a ModuleNotFoundError (still
    an ImportError) naming that module and ``pip install 'toolfold[extra]'`` (Ray's extra
    is ray and tqdm: a user told ``pip install ray`` then missed tqdm)."""
    extra = package.rpartition(".")[2]
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"  # what Python does for a missing module
        f"try:\n    import {package}\n"
        "except ModuleNotFoundError as exc:\n    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{message}: pip install 'toolfold[{extra}]'\n"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "raise ImportError('opentelemetry needs protobuf>=5')",
            "ImportError: opentelemetry needs protobuf>=5",
        ),
        ("import toolfold_no_such_module", "No module named 'toolfold_no_such_module'"),
    ],
)
def test_an_installed_extra_failing_in_its_own_import_keeps_its_error(
    tmp_path: Path, body: str, error: str
) -> None:
    """An installed opentelemetry whose import fails (a version conflict, a missing module of
    its own) gives that ImportError, not "needs 'otel': pip install" hiding the cause."""
    (tmp_path / "opentelemetry").mkdir()
    (tmp_path / "opentelemetry" / "__init__.py").write_text(body + "\n")
    proc = subprocess.run(
        [sys.executable, "-c", "import toolfold.otel"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])},
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.rstrip().endswith(error), proc.stderr
    assert "pip install" not in proc.stderr
    assert f"{tmp_path / 'opentelemetry' / '__init__.py'}" in proc.stderr  # its traceback


def test_optional_names_the_import_error_of_an_installed_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`optional` of an installed module whose own import fails says so with that error
    (also its cause), not "needs it: pip install" as if it were missing."""
    from toolfold import ModelConfigError
    from toolfold._extras import optional

    (tmp_path / "toolfold_broken_extra.py").write_text("raise ImportError('needs pydantic>=3')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelConfigError) as info:
        optional("toolfold_broken_extra", "mcp", "an MCP server")
    assert str(info.value) == (
        "an MCP server needs 'toolfold_broken_extra' (toolfold[mcp]), installed but failing"
        " to import: ImportError: needs pydantic>=3"
    )
    assert isinstance(info.value.__cause__, ImportError)
    monkeypatch.setitem(sys.modules, "toolfold_broken_extra", None)  # now: not installed
    with pytest.raises(ModelConfigError) as info:
        optional("toolfold_broken_extra", "mcp", "an MCP server")
    assert str(info.value) == (
        "an MCP server needs 'toolfold_broken_extra': pip install 'toolfold[mcp]'"
    )


def test_a_broken_pyyaml_keeps_its_error_for_a_yaml_agent_file(tmp_path: Path) -> None:
    """An installed PyYAML whose import fails makes a YAML agent file one problem giving that
    ImportError, as `optional` says it for every extra (it said "need PyYAML: pip install",
    hiding the cause, as if it were missing)."""
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml" / "__init__.py").write_text("raise ImportError('needs libyaml 0.3')\n")
    code = (
        "from toolfold import AgentFileError\n"
        "from toolfold.files import loads\n"
        "try:\n    loads('agents: {}', format='yaml', name='f.yaml')\n"
        "except AgentFileError as exc:\n    print(exc.problems)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        "(\"f.yaml: a YAML agent file needs 'yaml' (toolfold[yaml]), installed but failing to "
        'import: ImportError: needs libyaml 0.3",)\n'
    )


def test_a_missing_aiohttp_names_its_extra_behind_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``http="aiohttp"`` without aiohttp (nor yarl, which comes with it) is the ModelConfigError
    every missing extra gives, also with a proxy set: reading the proxy imported yarl first
    (a bare ModuleNotFoundError about yarl)."""
    import asyncio

    from toolfold import ModelConfigError
    from toolfold.adapters._http._backends import make_async
    from toolfold.adapters._http._retry import HttpLimits, Timeouts

    for module in ("aiohttp", "yarl"):
        monkeypatch.setitem(sys.modules, module, None)  # what Python does for a missing module
    for variable in ("NO_PROXY", "no_proxy", "https_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    with pytest.raises(ModelConfigError) as info:
        asyncio.run(make_async("aiohttp", Timeouts(), HttpLimits(), "https://api.example.invalid"))
    assert str(info.value) == "http='aiohttp' needs 'aiohttp': pip install 'toolfold[aiohttp]'"


def test_optional_names_any_error_an_installed_module_raises_importing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`optional` of an installed module whose import raises something other than an
    ImportError gives the toolfold error with it (it went through raw, a RuntimeError from
    an MCP server's start)."""
    from toolfold import ModelConfigError
    from toolfold._extras import optional

    (tmp_path / "toolfold_raising_extra.py").write_text("raise RuntimeError('half-installed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelConfigError) as info:
        optional("toolfold_raising_extra", "mcp", "an MCP server")
    assert str(info.value) == (
        "an MCP server needs 'toolfold_raising_extra' (toolfold[mcp]), installed but failing"
        " to import: RuntimeError: half-installed"
    )
    assert isinstance(info.value.__cause__, RuntimeError)
