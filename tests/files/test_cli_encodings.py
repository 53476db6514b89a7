"""The ``toolfold`` commands under locales and file encodings other than UTF-8.

A run file written under a UTF-8 locale and resumed under an ASCII one
(``LC_ALL=C``, outside Python's UTF-8 mode), text typed on the command line in
such a locale, run files saved with a byte order mark or as UTF-16, and the
non-ASCII text ``toolfold tools`` prints.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_process import COMMAND, ROOT, environment, toolfold

from toolfold import RunState

EXAMPLE = ROOT / "examples" / "agent_files" / "support.toml"
DEMO = ["--model", "support_tools:demo_model"]
# An ASCII locale, Python's UTF-8 mode off: argv and file names are decoded as ASCII,
# each other byte kept as a lone surrogate (surrogateescape).
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
UTF8_LOCALE = {"LC_ALL": "C.UTF-8", "PYTHONUTF8": "1"}

ECHO = """
from toolfold.testing import FunctionModel

echo = FunctionModel(lambda request: "ECHO " + ascii(request.messages[-1].text), name="echo")
"""


def _example_in(folder: Path) -> Path:
    """The support example copied into ``folder`` (made), its tools module beside it."""
    folder.mkdir()
    for name in ("support.toml", "support_tools.py"):
        shutil.copy(EXAMPLE.parent / name, folder / name)
    return folder / "support.toml"


def _waiting(tmp_path: Path, agent_file: Path, env: dict[str, str]) -> Path:
    """A run file of ``agent_file``'s example run, waiting for call_4_0's approval."""
    proc = toolfold("run", str(agent_file), *DEMO, "refund A17", cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    return tmp_path / "toolfold-run.json"


def test_a_run_file_written_under_utf8_resumes_under_an_ascii_locale(tmp_path: Path) -> None:
    """A run file naming an agent file in a non-ASCII folder, written under a UTF-8 locale,
    resumes under ``LC_ALL=C``: the path's UTF-8 bytes name the file (it was a traceback,
    UnicodeEncodeError from ``Path.resolve``); the run file keeps the path's text."""
    agent_file = _example_in(tmp_path / "dossier été 😀")
    run_file = _waiting(tmp_path, agent_file, UTF8_LOCALE)
    assert json.loads(run_file.read_text())["file"] == str(agent_file)
    proc = toolfold(
        "resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path, env=ASCII_LOCALE
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "order A17 refunded" in proc.stdout
    document = json.loads(run_file.read_text())
    assert document["file"] == str(agent_file)
    assert RunState.from_json(json.dumps(document["state"])).phase == "finished"


def test_a_run_file_naming_a_path_this_locale_cannot_encode_is_refused(tmp_path: Path) -> None:
    """A run file whose agent file cannot be encoded in an ASCII locale and is not found by its
    UTF-8 bytes (moved away), or whose file is not a path at all, is refused with exit 1,
    saying how to resume it: never a traceback."""
    agent_file = _example_in(tmp_path / "dossier été")
    run_file = _waiting(tmp_path, agent_file, UTF8_LOCALE)
    agent_file.parent.rename(tmp_path / "moved")
    proc = toolfold(
        "resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path, env=ASCII_LOCALE
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (
        f"toolfold resume: {run_file} names the agent file "
        f"'{str(agent_file).replace('é', chr(92) + 'xe9')}', which cannot be named in this "
        "locale's encoding (ascii) nor found by its UTF-8 bytes: resume under a UTF-8 locale "
        "(LC_ALL=C.UTF-8) or with PYTHONUTF8=1, or give --file FILE\n"
    )
    document = json.loads(run_file.read_text())
    document["file"] = 5
    run_file.write_text(json.dumps(document))
    proc = toolfold("resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (
        f"toolfold resume: {run_file}: its 'file' is not an agent file's path: an integer 5\n"
    )
    # A lone surrogate (no byte of any file name reads as one) is refused under either
    # locale: it was a traceback, UnicodeEncodeError from the UTF-8 bytes' rebuild.
    document["file"] = "/tmp/x\ud800y.toml"
    run_file.write_text(json.dumps(document))
    for env in (UTF8_LOCALE, ASCII_LOCALE):
        proc = toolfold("resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path, env=env)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == (
            f"toolfold resume: {run_file}: its 'file' names no file in any encoding: "
            "'/tmp/x\\ud800y.toml'; give --file FILE\n"
        )


def test_text_typed_under_an_ascii_locale_reaches_the_model_as_typed(tmp_path: Path) -> None:
    """Under ``LC_ALL=C`` a UTF-8 prompt and a ``--deny`` reason reach the model as typed (they
    reached it as lone surrogates, U+FFFD on the wire); a file path is left as the OS gives it."""
    (tmp_path / "echo_model.py").write_text(ECHO)
    agent_file = _example_in(tmp_path / "dossier é")
    prompt = "Où est Å17 😀?"
    env = {**ASCII_LOCALE, "PYTHONPATH": str(tmp_path)}
    proc = toolfold(
        "run", str(agent_file), "--model", "echo_model:echo", prompt, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ECHO {prompt!a}\n"
    run_file = _waiting(tmp_path, agent_file, ASCII_LOCALE)
    proc = toolfold(
        "resume", str(run_file), "--deny", "call_4_0=trop cher €", cwd=tmp_path, env=ASCII_LOCALE
    )
    assert proc.returncode == 0, proc.stderr
    state = json.loads(run_file.read_text())["state"]
    assert "The user denied this tool call: trop cher €" in json.dumps(state, ensure_ascii=False)


def test_text_that_is_not_utf8_under_an_ascii_locale_is_refused(tmp_path: Path) -> None:
    """A prompt whose bytes are neither ASCII nor UTF-8 (Latin-1 ``été``) is refused with exit 2,
    naming the argument, before anything runs."""
    proc = subprocess.run(
        [*COMMAND, "run", str(EXAMPLE), *DEMO, b"\xe9t\xe9"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment(ASCII_LOCALE),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "toolfold run: PROMPT is not text in this locale's encoding (ascii) nor UTF-8: type it "
        "in UTF-8 under a UTF-8 locale (LC_ALL=C.UTF-8), or set PYTHONUTF8=1\n"
    )
    assert not (tmp_path / "toolfold-run.json").exists()


def test_text_that_is_not_utf8_under_a_utf8_locale_runs_as_before(tmp_path: Path) -> None:
    """Under a UTF-8 locale a prompt holding a byte that is not UTF-8 (Latin-1 ``é``) runs as
    it did (the model gets U+FFFD): it is not re-read, nor refused with advice to use the very
    locale in use (it exited 2)."""
    (tmp_path / "echo_model.py").write_text(ECHO)
    proc = subprocess.run(
        [*COMMAND, "run", str(EXAMPLE), "--model", "echo_model:echo", b"caf\xe9"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment({"LC_ALL": "C.UTF-8", "PYTHONPATH": str(tmp_path)}),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == "ECHO 'caf\\udce9'\n"


def test_view_and_resume_read_a_run_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    """A run file saved with a UTF-8 byte order mark is read by ``view`` and ``resume`` alike
    (``resume`` said "Unexpected UTF-8 BOM"), and one saved as UTF-16 (PowerShell 5's ``>``)
    or UTF-32 too (``view`` read them, ``resume`` said "can't decode byte 0xff"); one in
    cp1252 is refused by both, saying where and to save it as UTF-8."""
    run_file = _waiting(tmp_path, EXAMPLE, {})
    text = run_file.read_text(encoding="utf-8")
    for name, data in (
        ("bom.json", b"\xef\xbb\xbf" + text.encode()),
        ("utf16.json", text.encode("utf-16")),
        ("utf16be.json", text.encode("utf-16-be")),
        ("utf32.json", text.encode("utf-32")),
    ):
        saved = tmp_path / name
        saved.write_bytes(data)
        proc = toolfold("view", name, "-o", "page.html", cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (0, ""), name
        if name in ("bom.json", "utf16.json"):
            proc = toolfold("resume", name, "--approve", "call_4_0", cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            assert "order A17 refunded" in proc.stdout
            assert json.loads(saved.read_text(encoding="utf-8"))["format"] == "toolfold-run/1"
    cp1252 = (
        "line 1: not UTF-8: byte 0xe9 at offset 11 (saved in another encoding, such as "
        "Windows' cp1252?): save it as UTF-8"
    )
    for data, why in ((b'{"state": "\xe9t\xe9"}', cp1252),):
        run_file.write_bytes(data)
        proc = toolfold("view", str(run_file), cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (
            1,
            f"toolfold view: cannot load {run_file}: {why}\n",
        )
        proc = toolfold("resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (
            1,
            f"toolfold resume: cannot read {run_file}: {why}\n",
        )
        assert run_file.read_bytes() == data  # (nothing written back)


TOOLS = '''
from toolfold import tool


@tool
def chercher(查询: str) -> str:
    """查找订单 — بحث 🔍 \u202eeid.

    Args:
        查询: 订单号。
    """
    return 查询
'''


def test_tools_prints_non_ascii_text_as_it_is(tmp_path: Path) -> None:
    """``tools`` prints a payload's non-ASCII text as it is on a UTF-8 stdout (it printed
    ``\\u67e5`` escapes), what a terminal acts on (U+202E) as a JSON escape, a compile
    error's problems on lines of their own (they were joined by a literal ``\\x0a``), and
    ASCII JSON into a cp1252 stdout, with ``--json`` too."""
    (tmp_path / "outils.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "f.toml").write_text(
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["outils:chercher"]\n'
    )
    env = {"PYTHONPATH": str(tmp_path)}
    proc = toolfold(
        "tools", "f.toml", "--dialect", "gemini", "--dialect", "anthropic", cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["agent a", "  tool chercher"]
    assert lines[2].startswith(
        '    gemini (strict): {"description": "查找订单 — بحث 🔍 \\u202eeid.",'
    )
    assert '"查询": {"description": "订单号。"' in lines[2]
    assert lines[3:] == [
        "    anthropic: cannot compile: cannot compile tool 'chercher' for anthropic: 1 problem",
        "        - parameter '查询': a parameter name must be 1-64 characters of a-z A-Z 0-9 _ . - "
        "(rename the parameter)",
    ]
    proc = toolfold("tools", "f.toml", "--dialect", "gemini", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    # (what a terminal acts on is escaped in --json too: it printed U+202E raw)
    assert '"查找订单 — بحث 🔍 \\u202eeid."' in proc.stdout
    payload = json.loads(proc.stdout)["a"]["chercher"]["gemini"]["payload"]
    for args in (["--dialect", "gemini"], ["--dialect", "gemini", "--json"]):
        proc = toolfold(
            "tools", "f.toml", *args, cwd=tmp_path, env={**env, "PYTHONIOENCODING": "cp1252"}
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.isascii()
        shown = proc.stdout if "--json" in args else proc.stdout.split(": ", 1)[1]
        found = json.loads(shown)
        found = found["a"]["chercher"]["gemini"]["payload"] if "--json" in args else found
        assert found == payload


def test_tools_json_escapes_what_a_terminal_acts_on() -> None:
    """``tools --json`` writes a bidirectional override, a C1 control (CSI, U+009B) and a line
    separator as JSON escapes, keeping the indent's newlines: it wrote them raw."""
    from toolfold._commands import _shown_json

    report = {"a": {"description": "Look \u202eevil\u202c csi\x9b31m \u2028 é"}}
    shown = _shown_json(json.dumps(report, indent=2, ensure_ascii=False))
    assert shown == (
        '{\n  "a": {\n    "description": "Look \\u202eevil\\u202c csi\\u009b31m \\u2028 é"\n  }\n}'
    )
    assert json.loads(shown) == report


def test_a_result_typed_at_the_terminal_under_an_ascii_locale_is_read_as_typed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JSON result typed in UTF-8 at the terminal's question, stdin read as ASCII (``LC_ALL=C``),
    is read as typed (it kept lone surrogates, as the command line's text did); a line that is
    not UTF-8 either is asked again."""
    from toolfold._session import _Session

    typed = b"\xe9t\xe9\n" + '{"ville": "Zürich"}\n'.encode()
    stdin = io.TextIOWrapper(io.BytesIO(typed), encoding="ascii", errors="surrogateescape")
    monkeypatch.setattr(sys, "stdin", stdin)
    err = io.StringIO()
    asked = _Session._prompt(typing.cast(Any, SimpleNamespace(err=err)), "result? ", None)
    assert asked == '{"ville": "Zürich"}'
    assert err.getvalue() == "result? not UTF-8 text: type it again in UTF-8\nresult? "
