"""The offline run viewer: every kind of event shows, everything is escaped, nothing loads."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import toolfold
from toolfold import Agent, Denied, RunState, Tool, generate_text, resume, tool
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    if city == "Atlantis":
        raise LookupError("no such city")
    return f"<script>alert('{city}')</script>"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: In cents.
    """
    return f"paid {amount}"


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b0c70000000049454e44ae426082"
)


@tool
def photo() -> list[object]:
    """Take a photo (a result with an image part)."""
    from toolfold import ImagePart

    return ["A photo:", ImagePart(PNG, media_type="image/png")]


ask_human = Tool("ask_human", "Ask a person.", {"type": "object", "properties": {}})


def every_kind_of_event() -> RunState:
    """A run with auto, failing, invalid, unknown, approved, denied and manual calls."""
    model = ScriptedModel(
        [
            [
                call("lookup", {"city": "Paris"}),
                call("lookup", {"city": "Atlantis"}),
                call("lookup", {"town": 3}),
                call("teleport", {}),
            ],
            [call("pay", {"amount": 5}), call("pay", {"amount": 900})],
            [call("ask_human", {})],
            "All <b>done</b>.",
        ]
    )
    tools = [lookup, pay, ask_human]
    first = generate_text(model, "Go", tools=tools)
    assert first.state.phase == "awaiting_approval"
    first_id, second_id = (c.id for c in first.state.pending_approvals)
    second = resume(
        first.state,
        model=model,
        tools=tools,
        approvals={first_id: True, second_id: Denied("too much")},
    )
    (manual,) = second.state.tool_calls
    third = resume(second.state, model=model, tools=tools, tool_results={manual.id: "yes"})
    assert third.state.phase == "finished"
    return RunState.from_json(third.state.to_json())


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[str] = []
        self.badges: list[str] = []
        self.scripts = 0
        self.sources: list[str] = []
        self._badge = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if "data-kind" in found:
            self.kinds.append(str(found["data-kind"]))
        self._badge = "badge" in (found.get("class") or "")
        if tag == "script":
            self.scripts += 1
        for name in ("src", "href"):
            if name in found:
                self.sources.append(str(found[name]))

    def handle_data(self, data: str) -> None:
        if self._badge:
            self.badges.append(data)
            self._badge = False


def test_every_kind_of_event_has_its_row() -> None:
    """Steps, calls, suspensions, approvals, denials, manual results and the end all show."""
    page = _page()
    found = _Collect()
    found.feed(page)
    assert found.kinds.count("step") == 4
    assert found.kinds.count("call") == 7
    assert found.kinds.count("suspend") == 2
    assert found.kinds.count("resume") == 3  # approved, denied, results provided
    assert found.kinds[-1] == "finished"
    assert sorted(found.badges) == sorted(
        ["auto", "auto", "auto", "auto", "approved", "denied", "manual"]
    )
    assert "invalid_arguments" in page
    assert page.count("<pre class='err'>") == 4  # Atlantis, bad arguments, teleport, denied
    assert "too much" in page


def _page() -> str:
    from toolfold.runtime._response import Response

    return Response(every_kind_of_event()).to_html()


def test_everything_from_the_run_is_escaped_and_nothing_loads() -> None:
    """A tool result holding <script> is text; the page has no scripts or external sources."""
    page = _page()
    found = _Collect()
    found.feed(page)
    assert found.scripts == 0
    assert found.sources == []
    assert "&lt;script&gt;alert(&#x27;Paris&#x27;)&lt;/script&gt;" in page
    assert "All &lt;b&gt;done&lt;/b&gt;." in page
    assert "default-src 'none'" in page


def test_the_command_line_writes_the_page(tmp_path: Path) -> None:
    """`toolfold view STATE.json -o run.html` writes the same page; a bad file, or a page that
    cannot be written, exits 1 with a line naming it."""
    state_file = tmp_path / "state.json"
    state_file.write_text(every_kind_of_event().to_json())
    out = tmp_path / "run.html"
    done = subprocess.run(
        [sys.executable, "-m", "toolfold._cli", "view", str(state_file), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text().count("data-kind='step'") == 4
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"not": "a state"}))
    done = subprocess.run(
        [sys.executable, "-m", "toolfold._cli", "view", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "cannot load" in done.stderr
    nowhere = tmp_path / "no such directory" / "run.html"
    done = subprocess.run(
        [sys.executable, "-m", "toolfold._cli", "view", str(state_file), "-o", str(nowhere)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"toolfold view: cannot write {nowhere}: ")
    assert "Traceback" not in done.stderr


# Chromium's own background services, which it contacts whatever page it shows.
_BROWSER_HOSTS = (".google.com", ".googleapis.com", ".gstatic.com")


class _Tripwire:
    """A TCP listener standing in as the browser's proxy: it records every request line."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[str] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(30)
                try:
                    head = conn.recv(512)
                except OSError:
                    self.requests.append("(unreadable)")
                    continue
                # Chromium may preconnect and close again without asking for anything:
                # a connection that carries no request is not a request.
                if head:
                    self.requests.append(head.split(b"\r\n")[0].decode("latin-1"))

    def page_requests(self) -> list[str]:
        """The requests that did not go to the browser's own services."""
        return [r for r in self.requests if not _browser_own(r)]

    def close(self) -> None:
        self.listener.close()
        self._thread.join(timeout=10)


def _browser_own(request: str) -> bool:
    parts = request.split()
    if len(parts) < 2:
        return False
    target = parts[1].removeprefix("http://").removeprefix("https://")
    host = target.split("/")[0].split(":")[0]
    return host.endswith(_BROWSER_HOSTS)


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is installed by scripts/check (apt-get install chromium)"
    return found


def _browse(page: Path, profile: Path, *extra: str) -> tuple[str, list[str]]:
    """Open `page` in headless Chromium behind the tripwire; the DOM and the page's requests."""
    tripwire = _Tripwire()
    try:
        done = subprocess.run(
            [
                _chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-sync",
                "--disable-default-apps",
                "--disable-component-update",
                f"--proxy-server=http://127.0.0.1:{tripwire.port}",
                "--proxy-bypass-list=<-loopback>",
                f"--user-data-dir={profile}",
                *extra,
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        tripwire.close()
    return done.stdout, tripwire.page_requests()


@pytest.mark.once  # Chromium is the subject: first Python only
def test_the_tripwire_sees_a_page_request(tmp_path: Path) -> None:
    """Control: a page that loads an image from the network is caught by the tripwire."""
    page = tmp_path / "leaky.html"
    page.write_text("<img src='http://canary.invalid/x.png'>", encoding="utf-8")
    _, requests = _browse(page, tmp_path / "profile", "--dump-dom")
    assert any("canary.invalid" in r for r in requests)


@pytest.mark.once  # Chromium is the subject: first Python only
def test_the_page_renders_in_chromium_without_network(tmp_path: Path) -> None:
    """Headless Chromium renders the rows, takes a screenshot, and the page requests nothing."""
    page = tmp_path / "run.html"
    page.write_text(_page(), encoding="utf-8")
    dom, requests = _browse(page, tmp_path / "profile", "--dump-dom")
    shot = tmp_path / "run.png"
    _, more = _browse(
        page, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1200,1600"
    )
    assert dom.count('data-kind="step"') == 4
    assert dom.count('data-kind="call"') == 7
    assert "<script>alert" not in dom
    assert shot.stat().st_size > 10_000
    assert requests == []
    assert more == []


@pytest.mark.parametrize("phase_event", ["failed"])
def test_a_failed_run_shows_why(phase_event: Any) -> None:
    """A run that failed shows a failed row with the cause."""
    model = ScriptedModel([call("lookup", {"city": "Atlantis"})] * 5)
    from toolfold import ToolRetriesExceededError

    with pytest.raises(ToolRetriesExceededError) as caught:
        generate_text(model, "Go", tools=[lookup.replace(max_retries=0)])
    from toolfold.runtime._view import to_html

    page = to_html(caught.value.state)
    assert "data-kind='failed'" in page
    assert "no such city" in page


def composed_run() -> RunState:
    """triage hands off to desk, which asks mid (an agent as a tool), which asks bottom; bottom's payment waits for approval."""
    bottom = Agent(
        ScriptedModel([[call("lookup", {"city": "Oslo"}), call("pay", {"amount": 7})], "paid"]),
        name="bottom",
        tools=[lookup, pay],
    )
    mid = Agent(
        ScriptedModel([call("bottom", {"input": "pay Oslo"}), "mid: done"]),
        name="mid",
        tools=[bottom.as_tool()],
    )
    desk = Agent(
        ScriptedModel([[call("mid", {"input": "handle"}), call("photo", {})], "desk: all done"]),
        name="desk",
        tools=[mid.as_tool(), photo],
    )
    triage = Agent(ScriptedModel([call("transfer_to_desk")]), name="triage", handoffs=[desk])
    first = triage.run("Pay Oslo")
    (pending,) = first.state.pending_approvals
    stored = RunState.from_json(first.state.to_json())
    done = triage.resume(stored, approvals={pending.id: True})
    assert done.text == "desk: all done"
    return RunState.from_json(done.state.to_json())


def _tags(page: str, kind: str) -> list[dict[str, str | None]]:
    """The attributes of every tag with data-kind=``kind``."""
    found: list[dict[str, str | None]] = []

    class _Find(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if dict(attrs).get("data-kind") == kind:
                found.append(dict(attrs))

    _Find().feed(page)
    return found


def test_nested_sub_runs_are_collapsible_rows_under_their_call() -> None:
    """Each sub-run shows as a <details> row under the call that ran it, any depth, with its own steps and calls."""
    from toolfold.runtime._view import to_html

    state = composed_run()
    page = to_html(state)
    runs = _tags(page, "sub-run")
    assert [(r["data-agent"], r["data-depth"]) for r in runs] == [("mid", "1"), ("bottom", "2")]
    assert all("open" not in r for r in runs)  # finished sub-runs start collapsed
    # the bottom run's rows sit inside mid's, which sits inside the desk's call row
    mid_at, bottom_at = page.index("data-agent='mid'"), page.index("data-agent='bottom'")
    assert page.index("data-call-id") < mid_at < bottom_at
    assert page.count("data-kind='step'") == 3 + 2 + 2  # triage+desk, mid, bottom
    assert page.count("data-kind='call'") == 3 + 1 + 2
    (image,) = _tags(page, "result-image")
    assert str(image["src"]).startswith("data:image/png;base64,")
    assert "&lt;script&gt;alert(&#x27;Oslo&#x27;)&lt;/script&gt;" in page
    assert "<script>" not in page
    assert len(_tags(page, "handoff")) == 1
    assert "to desk" in page
    assert "<span class='agent'>desk</span>" in page
    assert "<span class='agent'>triage</span>" in page
    # bottom's approval is on bottom's own call row; usage counts the tree
    bottom_rows = page[bottom_at:]
    assert "b-approved" in bottom_rows
    assert "data-fact='with sub-runs'" in page


def test_the_header_counts_a_failed_sub_runs_usage_held_outside_sub_runs() -> None:
    """A sub-agent's failure raised (on_tool_error="raise") leaves its usage in the dropped
    attempt, not in sub_runs: the header still shows the tree's tokens and requests."""
    from toolfold.runtime._view import to_html

    sub = Agent(
        ScriptedModel([call("lookup", {"city": "Paris"})] * 3),
        name="sub",
        tools=[lookup],
        max_steps=1,
    )
    top = Agent(
        ScriptedModel([call("sub", {"input": "x"}), "done"]),
        tools=[sub.as_tool()],
        on_tool_error="raise",
    )
    with pytest.raises(toolfold.ToolExecutionError) as caught:
        top.run("go")
    state = caught.value.state
    assert state is not None
    assert not state.sub_runs
    tree = state.tree_usage
    assert tree != state.usage
    page = to_html(RunState.from_json(state.to_json()))
    shown = f"{tree.input_tokens} in / {tree.output_tokens} out, {tree.requests} requests"
    assert f"data-fact='with sub-runs'>with sub-runs: <b>{shown}</b>" in page


def test_a_suspended_sub_run_shows_open_with_what_it_waits_for() -> None:
    """A tree waiting for an approval two levels down shows the open sub-runs and the pending call."""
    from toolfold.runtime._view import to_html

    bottom = Agent(ScriptedModel([call("pay", {"amount": 7}), "paid"]), name="bottom", tools=[pay])
    mid = Agent(
        ScriptedModel([call("bottom", {"input": "pay"}), "ok"]),
        name="mid",
        tools=[bottom.as_tool()],
    )
    top = Agent(
        ScriptedModel([call("mid", {"input": "go"}), "ok"]), name="top", tools=[mid.as_tool()]
    )
    waiting = RunState.from_json(top.run("go").state.to_json())
    page = to_html(waiting)
    runs = _tags(page, "sub-run")
    assert [(r["data-agent"], "open" in r) for r in runs] == [("mid", True), ("bottom", True)]
    assert "b-pending" in page[page.index("data-agent='bottom'") :]
    assert "waiting for pay" in page


@pytest.mark.once  # Chromium is the subject: first Python only
def test_the_composed_run_renders_in_chromium_without_network(tmp_path: Path) -> None:
    """Chromium renders the nested sub-run rows and the handoff, and the page requests nothing."""
    from toolfold.runtime._view import to_html

    page = tmp_path / "composed.html"
    page.write_text(to_html(composed_run()), encoding="utf-8")
    dom, requests = _browse(page, tmp_path / "profile", "--dump-dom")
    assert dom.count('data-kind="sub-run"') == 2
    assert 'data-depth="2"' in dom
    assert dom.count('data-kind="handoff"') == 1
    assert dom.count('data-kind="step"') == 7
    assert dom.count('data-kind="result-image"') == 1
    assert "<script>alert" not in dom
    assert requests == []


def test_every_event_kind_has_a_handler() -> None:
    """The viewer knows every kind of event the core can log (a new kind fails here)."""
    from toolfold.runtime._view import _Timeline
    from toolfold.runtime.core._events import EVENT_TYPES

    kinds = [attrs_kind(cls) for cls in EVENT_TYPES]
    assert [k for k in kinds if not callable(getattr(_Timeline, k, None))] == []


def attrs_kind(cls: type) -> str:
    """The `kind` default of an event class."""
    import attrs

    return str(attrs.fields_dict(cls)["kind"].default)


def test_workflow_steps_are_collapsible_rows() -> None:
    """A Sequence holding a Parallel: each step's run is a row under its step call, the nested workflow marked as one."""
    from toolfold import Parallel, Sequence
    from toolfold.runtime._view import to_html

    writer = Agent(ScriptedModel(["draft"]), name="writer")
    editor = Agent(ScriptedModel(["edited"]), name="editor")
    checker = Agent(ScriptedModel(["checked"]), name="checker")
    pipeline = Sequence(writer, Parallel(editor, checker, name="review"), name="pipeline")
    state = RunState.from_json(pipeline.run("topic").state.to_json())
    runs = _tags(to_html(state), "sub-run")
    assert [(r["data-agent"], r["data-depth"], r["data-workflow"]) for r in runs] == [
        ("writer", "1", "no"),
        ("review", "1", "yes"),
        ("editor", "2", "no"),
        ("checker", "2", "no"),
    ]


def test_a_dropped_attempt_shows_the_usage_it_keeps() -> None:
    """The viewer shows an AttemptDropped as a row with the requests and tokens it keeps."""
    from toolfold.runtime import AttemptDropped, Usage, initial_state, reduce
    from toolfold.runtime._view import to_html

    state = reduce(initial_state("hi", run_id="r"), AttemptDropped(Usage(30, 4, requests=1)))
    dom = to_html(state)
    assert dom.count("Answer dropped, still counted") == 1
    assert "a dropped answer (rejected, or its stream cut): 1 request, 30 in / 4 out" in dom
    assert "Resumed after" not in dom  # a cut stream's answer is dropped before any resume


def test_a_call_id_reused_in_a_later_step_shows_each_call_with_its_own_result() -> None:
    """A model saying ``call_0`` at two steps: each step's row shows its own arguments and result."""
    model = ScriptedModel(
        [
            call("lookup", {"city": "Paris"}, id="call_0"),
            call("lookup", {"city": "Tokyo"}, id="call_0"),
            "done",
        ]
    )
    page = generate_text(model, "go", tools=[lookup]).to_html()
    for city in ("Paris", "Tokyo"):
        assert page.count(f"alert(&#x27;{city}&#x27;)") == 1, city
        assert page.count(f"&quot;city&quot;: &quot;{city}&quot;\n}}") == 1, city


def test_a_marker_part_draws_no_empty_reasoning_and_an_answer_image_shows() -> None:
    """An answer's marker part (no text, no signature) draws nothing; its image shows inline."""
    from toolfold.runtime import ImagePart, ReasoningPart, TextPart

    marker = ReasoningPart("", None, "openai", {"output_item": ["image_generation_call", "ig"]})
    answer = [ImagePart(PNG, media_type="image/png"), marker, TextPart("Here")]
    page = generate_text(ScriptedModel([answer]), "draw").to_html()
    assert "<summary>reasoning</summary><pre></pre>" not in page
    assert _tags(page, "answer-image")[0]["src"] == (
        "data:image/png;base64," + base64.b64encode(PNG).decode()
    )


@tool
def listing(folder: str) -> list[str]:
    """List a folder.

    Args:
        folder: The folder.
    """
    return ["caf\udce9.txt"]  # os.listdir() of a file name that is not UTF-8


def _hidden_text_run() -> RunState:
    """A run whose tool result holds a lone surrogate and whose call a bidi override."""
    script = [ScriptedModel.call("listing", {"folder": "invoice_\u202efdp.exe"}), "Listed."]
    return Agent(ScriptedModel(script), tools=[listing]).run("go").state


def test_bidi_overrides_and_lone_surrogates_show_as_visible_escapes() -> None:
    """U+202E cannot reorder what the page shows, and a lone surrogate is shown, not a crash."""
    from toolfold.runtime._view import to_html

    page = to_html(_hidden_text_run())
    page.encode("utf-8")  # a lone surrogate would fail here
    assert "\u202e" not in page
    assert "invoice_\\u202efdp.exe" in page
    assert "caf\\udce9.txt" in page


def test_the_command_line_shows_a_state_holding_a_lone_surrogate(tmp_path: Path) -> None:
    """`toolfold view` on a state holding a lone surrogate writes the page (no traceback, no empty file)."""
    state_file = tmp_path / "state.json"
    state_file.write_text(_hidden_text_run().to_json())
    out = tmp_path / "run.html"
    out.write_text("an earlier page")
    done = subprocess.run(
        [sys.executable, "-m", "toolfold._cli", "view", str(state_file), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "caf\\udce9.txt" in out.read_text(encoding="utf-8")


def test_a_page_that_cannot_be_made_leaves_the_earlier_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolfold view` opens the output file only once the page is made: a failure truncates nothing."""
    import toolfold.runtime._view
    from toolfold._cli import main

    def broken(state: RunState, *, title: str | None = None) -> str:
        return "<p>\udce9</p>"  # text the page's UTF-8 cannot carry

    state_file = tmp_path / "state.json"
    state_file.write_text(every_kind_of_event().to_json())
    out = tmp_path / "run.html"
    out.write_text("an earlier page")
    monkeypatch.setattr(toolfold.runtime._view, "to_html", broken)
    with pytest.raises(UnicodeEncodeError):
        main(["view", str(state_file), "-o", str(out)])
    assert out.read_text() == "an earlier page"
