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
