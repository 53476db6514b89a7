"""Every example in examples/ runs to completion on a fresh machine, with no API key:
all of them on the test models, and those a 135M model can do on the real local one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "OLLAMA_HOST",  # examples/ollama.py talks to a real server only when it is set
)


def test_there_are_examples() -> None:
    """The examples folder is not empty (the README's main job lives there)."""
    assert any(p.name == "quickstart.py" for p in EXAMPLES)


def _run(path: Path, model: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env["MODEL"] = model
    return subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    """The example exits 0 and prints something on the test models, without network or keys."""
    proc = _run(path, "test")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def _shape(text: str) -> list[str]:
    """Each line's label (``user:``, ``->``, ``usage:``...), blank lines as ``""``."""
    return [
        m.group(1) if (m := re.match(r"\s*(->|[a-z ]+:)", line)) else ""
        for line in text.splitlines()
    ]


def test_the_quickstart_docs_show_every_line_the_script_prints() -> None:
    """docs/quickstart.md's sample output has the lines quickstart.py prints, in its order."""
    docs = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    sample = re.search(r"the answer:\n\n```\n(.*?)```", docs, re.DOTALL)
    assert sample, "docs/quickstart.md has no sample output after 'the answer:'"
    proc = _run(next(p for p in EXAMPLES if p.name == "quickstart.py"), "test")
    assert proc.returncode == 0, proc.stderr
    assert _shape(sample.group(1)) == _shape(proc.stdout)


# What SmolLM2-135M manages: one tool call, then an answer from its result.
ON_LOCAL = (
    "approvals.py",
    "confirm_each_call.py",
    "json_schema_tool.py",
    "manual_tools.py",
    "quickstart.py",
    "streaming.py",
    "structured_output.py",
)


@pytest.mark.parametrize("name", ON_LOCAL)
def test_example_without_the_providers_key_says_so_without_a_traceback(name: str) -> None:
    """With a provider MODEL and no key the example prints the missing-key message alone, exit 1."""
    path = next(p for p in EXAMPLES if p.name == name)
    proc = _run(path, "openai:gpt-4o-mini")  # the model refuses to be made: no request is sent
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "no API key for provider 'openai': pass api_key=... to the model "
        "(toolfold.model('openai:...', api_key=...)) or set OPENAI_API_KEY"
    ]


@pytest.mark.local
@pytest.mark.parametrize("name", ON_LOCAL)
def test_example_runs_on_the_local_model(name: str) -> None:
    """With MODEL=local:smollm2 the example runs on the real model and prints its answer."""
    path = next(p for p in EXAMPLES if p.name == name)
    proc = _run(path, "local:smollm2")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^(answer|output): .+", proc.stdout, re.MULTILINE) or "[done]" in proc.stdout


@pytest.mark.local
def test_the_quickstart_shows_the_real_tool_call() -> None:
    """The README's main job: the real model's tool call, the tool's result and the answer."""
    path = next(p for p in EXAMPLES if p.name == "quickstart.py")
    proc = _run(path, "local:smollm2")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"-> (get_weather|calculate)\(\{.+\}\)", proc.stdout)
    assert re.search(r"^answer: +\S", proc.stdout, re.MULTILINE)
    assert "steps: 2" in proc.stdout
