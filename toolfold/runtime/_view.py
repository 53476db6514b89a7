"""A run as one self-contained HTML page: a timeline read from the state's event log.

Everything is inline (styles, no scripts, no fonts, no images), and a
Content-Security-Policy forbids the page from loading anything, so the file
opens offline and never calls home. Every value from the run is escaped: a
tool result holding ``<script>`` shows as text, a bidirectional override
(U+202E) and a lone surrogate as a visible ``\\u202e`` or ``\\udce9``.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from toolfold.runtime._planner import PLANNER_MODEL
from toolfold.runtime.core._events import (
    ApprovalDenied,
    ApprovalGranted,
    AttemptDropped,
    CallResumed,
    Event,
    HandedOff,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    RunFailed,
    RunStarted,
    StepLimitChanged,
    StopRequested,
    ToolResultsProvided,
    ToolReturned,
    ToolSuspended,
    UserMessageAdded,
)
from toolfold.runtime.core._messages import (
    ImagePart,
    Message,
    ReasoningPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolfold.runtime.core._replay import replay
from toolfold.runtime.core._state import WAITING_PHASES, RunState
from toolfold.runtime.core._stop import describe_condition
from toolfold.toolkit._results import BIDI, escaped_control

__all__ = ["to_html"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:14px 22px}
header h1{font-size:17px;margin:0 0 4px}
header .facts span{margin-right:18px;opacity:.9}
main{padding:14px 22px;max-width:1100px}
.row{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:8px 0;padding:8px 12px}
.row>summary{cursor:pointer;font-weight:600}
.row .meta{color:#5b6475;font-weight:400;margin-left:8px}
.kind-suspend{border-left:4px solid #e0a100}.kind-resume{border-left:4px solid #2f7de1}
.kind-failed{border-left:4px solid #d33}.kind-finished{border-left:4px solid #2a9d55}
.kind-user{border-left:4px solid #7a5cc7}.kind-handoff{border-left:4px solid #7a5cc7}
pre{background:#f1f3f6;padding:6px 8px;border-radius:4px;white-space:pre-wrap;word-break:break-word;margin:4px 0}
table{border-collapse:collapse;width:100%;margin-top:6px}
td,th{border-top:1px solid #e6e9ee;padding:4px 6px;text-align:left;vertical-align:top}
.badge{display:inline-block;border-radius:9px;padding:0 8px;font-size:12px;background:#e8ebf0}
.b-auto{background:#dff3e6}.b-approved{background:#dbe9fb}.b-denied{background:#fbdcdc}
.b-manual{background:#efe4fb}.b-pending{background:#fff1c6}.err{color:#b3261e}
.kind-sub-run{border-left:4px solid #8a94a6;background:#fafbfc;margin:4px 0 4px 18px}
.kind-sub-run ol{list-style:none;padding:0;margin:0}
.agent{display:inline-block;border-radius:9px;padding:0 8px;font-size:12px;background:#e4e1f7;margin-left:8px}
"""


def to_html(state: RunState, *, title: str | None = None) -> str:
    """Render a run as one self-contained HTML page (a timeline of its steps).

    Args:
        state: Any state, finished or not: a stored one loaded with
            `RunState.from_json` works the same.
        title: The page title (default: the run id).

    Returns:
        The HTML text; nothing in it loads from the network.
    """
    heading = title or f"toolfold run {state.run_id}"
    body = "".join(_timeline(state, 0))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        f"<title>{_e(heading)}</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>{_e(heading)}</h1><div class='facts'>{_facts(state)}</div></header>"
        f"<main><ol style='list-style:none;padding:0' id='timeline'>{body}</ol></main>"
        "</body></html>"
    )


# Shown as visible escapes (``\u202e``, ``\udce9``), as the CLI shows them: a
# bidirectional override or isolate reorders what a reviewer reads
# (``invoice_\u202efdp.exe`` shows as ``invoice_exe.pdf``), and a lone surrogate
# (a tool's ``os.listdir()`` of a file name that is not UTF-8) cannot be written
# in the page's UTF-8.
_HIDDEN = re.compile(f"[{BIDI}\ud800-\udfff]")


def _e(value: object) -> str:
    text = html.escape(str(value), quote=True)
    return text if text.isascii() else _HIDDEN.sub(escaped_control, text)


def _facts(state: RunState) -> str:
    usage = state.usage
    facts = [
        ("phase", state.phase),
        ("finish", state.finish_reason or "-"),
        ("steps", state.step),
        ("tokens", f"{usage.input_tokens} in / {usage.output_tokens} out"),
        ("requests", usage.requests),
    ]
    # The tree's own usage whenever it differs: a sub-run's usage can be held with no
    # entry in ``sub_runs`` (an attempt dropped when a sub-agent's failure was raised).
    tree = state.tree_usage
    if tree != usage:
        facts.append(
            (
                "with sub-runs",
                f"{tree.input_tokens} in / {tree.output_tokens} out, {tree.requests} request"
                f"{'' if tree.requests == 1 else 's'}",
            )
        )
    return "".join(f"<span data-fact='{k}'>{_e(k)}: <b>{_e(v)}</b></span>" for k, v in facts)


@attrs.define
class _Call:
    """What the page shows of one tool call, filled in as events arrive."""

    call: ToolCallPart
    disposition: str
    result: str | None = None
    is_error: bool = False
    outcome: str | None = None
    duration: float | None = None
    child: RunState | None = None
    parts: tuple[Any, ...] = ()


@attrs.define
class _Step:
    number: int
    response: Any
    calls: list[_Call]
    agent: str | None = None


_DISPOSITION = {"execute": "auto", "approve": "pending", "return": "manual"}


class _Timeline:
    """Reads the event log once; each event kind adds rows or fills in a call."""

    def __init__(self, events: Sequence[Event] = ()) -> None:
        self.events = events  # the log read, and where in it the event read now is
        self.at = 0
        self.calls: dict[str, _Call] = {}
        self.steps = 0
        self.rows: list[_Step | str] = []  # steps render last, once their results are known
        self.agent: str | None = None  # who answers now (a handoff changes it)

    def run_started(self, event: RunStarted) -> None:
        self.agent = event.agent
        self.rows.append(
            _row(
                "start", "Run started", f"{len(event.messages)} messages", _messages(event.messages)
            )
        )

    def user_message_added(self, event: UserMessageAdded) -> None:
        self.rows.append(_row("user", "User message", "new turn", _messages((event.message,))))

    def model_responded(self, event: ModelResponded) -> None:
        self.steps += 1
        step = _Step(self.steps, event.response, [], self.agent)
        for index, call in enumerate(event.response.message.tool_calls):
            label = event.dispositions[index] if index < len(event.dispositions) else "execute"
            # The step's own record, also for an id an earlier step used (a model may
            # reuse one): the events that follow answer this step's call.
            made = self.calls[call.id] = _Call(call, _DISPOSITION[label])
            step.calls.append(made)
        self.rows.append(step)
        waiting = [c.call.name for c in step.calls if c.disposition in ("pending", "manual")]
        if waiting:
            self.rows.append(_row("suspend", "Suspended", "waiting for " + ", ".join(waiting), ""))

    def tool_returned(self, event: ToolReturned) -> None:
        found = self.calls.get(event.call_id)
        if found is not None:
            found.result, found.is_error = event.content, event.is_error
            found.outcome = event.outcome
            found.duration = getattr(event, "duration", None)
            found.parts = event.parts

    def tool_suspended(self, event: ToolSuspended) -> None:
        found = self.calls.get(event.call_id)
        name = found.call.name if found else event.call_id
        if event.child.phase not in WAITING_PHASES:
            # interrupted midway (a cancellation): kept, to be continued on resume
            detail = f"{name}: stopped at step {event.child.step} ({event.child.phase})"
            self.rows.append(_row("suspend", "Sub-run interrupted", detail, ""))
            return
        waiting = ", ".join(
            c.name for c in (*event.child.pending_approvals, *event.child.tool_calls)
        )
        self.rows.append(_row("suspend", "Sub-run suspended", f"{name}: waiting for {waiting}", ""))

    def call_resumed(self, event: CallResumed) -> None:
        found = self.calls.get(event.call_id)
        kinds = ", ".join(e.kind for e in event.events)
        self.rows.append(
            _row(
                "resume",
                "Sub-run answered",
                f"{found.call.name if found else event.call_id}: {kinds}",
                "",
            )
        )

    def handed_off(self, event: HandedOff) -> None:
        detail = ""
        if event.messages is not None:
            answered = self._not_transferred(event.messages)
            if answered is None:  # an input filter chose the conversation
                detail = f" ({len(event.messages)} messages kept)"
            else:
                detail = f" ({answered} other transfer{'s' if answered > 1 else ''} not taken)"
        self.rows.append(_row("handoff", "Handed off", f"to {event.agent}{detail}", ""))
        self.agent = event.agent

    def _not_transferred(self, messages: tuple[Message, ...]) -> int | None:
        """How many results a handoff's conversation answered ``Not transferred``, when
        that is all it changed (no input filter ran), else None."""
        try:
            before = replay(self.events[: self.at]).messages
        except Exception:  # (a log that does not replay: say what the event holds)
            return None
        if len(before) != len(messages):
            return None
        answered: list[ToolResultPart] = []
        for old, new in zip(before, messages, strict=True):
            if old == new:
                continue
            if old.role != "tool" or new.role != "tool" or len(old.parts) != len(new.parts):
                return None
            for was, now in zip(old.parts, new.parts, strict=True):
                if was == now:
                    continue
                if not (
                    isinstance(was, ToolResultPart)
                    and isinstance(now, ToolResultPart)
                    and was.call_id == now.call_id
                    and now.content.startswith("Not transferred:")
                ):
                    return None
                answered.append(now)
        for part in answered:
            found = self.calls.get(part.call_id)
            if found is not None:
                found.result, found.is_error = part.content, part.is_error
        return len(answered) or None

    def approval_granted(self, event: ApprovalGranted) -> None:
        self._approval(event.call_id, "approved", "")

    def approval_denied(self, event: ApprovalDenied) -> None:
        self._approval(
            event.call_id, "denied", f"<pre>{_e(event.reason)}</pre>" if event.reason else ""
        )

    def _approval(self, call_id: str, verdict: str, body: str) -> None:
        found = self.calls.get(call_id)
        if found is not None:
            found.disposition = verdict
        title = "Approved" if verdict == "approved" else "Denied"
        self.rows.append(_row("resume", title, found.call.name if found else call_id, body))

    def tool_results_provided(self, event: ToolResultsProvided) -> None:
        for part in event.results:
            self._fill(part)
        names = ", ".join(p.tool_name for p in event.results)
        self.rows.append(_row("resume", "Results provided", names, ""))

    def _fill(self, part: ToolResultPart) -> None:
        found = self.calls.get(part.call_id)
        if found is not None and found.result is None:
            found.result, found.is_error = part.content, part.is_error
            found.outcome = "error" if part.is_error else "ok"
            found.parts = part.parts

    def output_accepted(self, event: OutputAccepted) -> None:
        self.rows.append(_row("finished", "Output accepted", "", _pre(event.value)))

    def output_rejected(self, event: OutputRejected) -> None:
        self.rows.append(_row("failed", "Output rejected", "", f"<pre>{_e(event.message)}</pre>"))

    def stop_requested(self, event: StopRequested) -> None:
        condition = event.condition
        meta = event.reason if condition is None else describe_condition(condition)
        self.rows.append(_row("finished", "Stop requested", meta, ""))

    def step_limit_changed(self, event: StepLimitChanged) -> None:
        detail = f"max_steps={event.max_steps}"
        self.rows.append(_row("resume", "Step limit changed", detail, ""))

    def attempt_dropped(self, event: AttemptDropped) -> None:
        kept = event.usage + event.sub_run_usage
        # An answer the output type rejected, or a stream cut after its usage came (the
        # run may not have been resumed yet), or the failed sub-runs of a raised round.
        if event.usage != Usage():
            title, what = (
                "Answer dropped, still counted",
                "a dropped answer (rejected, or its stream cut)",
            )
        else:
            title, what = "Resumed after a failure", "failed sub-runs dropped to run again"
        detail = (
            f"{what}: {kept.requests} request"
            f"{'' if kept.requests == 1 else 's'}, "
            f"{kept.input_tokens} in / {kept.output_tokens} out, still counted"
        )
        self.rows.append(_row("resume", title, detail, ""))

    def run_failed(self, event: RunFailed) -> None:
        tool = f" (tool {event.tool_name})" if event.tool_name else ""
        body = f"<pre class='err'>{_e(event.message)}</pre>"
        self.rows.append(_row("failed", "Run failed", event.error_kind + tool, body))

    def end(self, state: RunState) -> None:
        for call_id, child in state.sub_runs.items():  # the latest state of each sub-run
            found = self.calls.get(call_id)
            if found is not None:
                found.child = child
        # results the reducer made itself (unknown tool, unreadable arguments) are only messages
        for message in state.messages:
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    self._fill(part)
        if state.phase == "finished":
            self.rows.append(
                _row("finished", "Finished", state.finish_reason or "", _pre(state.output))
            )
        elif state.phase == "failed" and state.error is not None:
            body = f"<pre class='err'>{_e(state.error.message)}</pre>"
            self.rows.append(_row("failed", "Failed", state.error.kind, body))


def _timeline(state: RunState, depth: int) -> Iterator[str]:
    events = state.events
    timeline = _Timeline(events)
    for at, event in enumerate(events):
        timeline.at = at
        getattr(timeline, event.kind)(event)
    timeline.end(state)
    for row in timeline.rows:
        yield _step(row, depth) if isinstance(row, _Step) else row


def _sub_run(child: RunState, depth: int) -> str:
    """A sub-run (an agent used as a tool) as a collapsible row holding its own timeline.

    Open when it did not finish (it waits, or failed): that is where to look.
    """
    started = child.events[0] if child.events else None
    agent = getattr(started, "agent", None) or "agent"
    kind = "Workflow" if _is_workflow(child) else "Sub-run"
    usage = child.tree_usage
    meta = (
        f"{child.phase} · {child.step} steps · {usage.input_tokens} in / {usage.output_tokens} out"
    )
    opened = "" if child.phase == "finished" else " open"
    inner = (
        f"<summary>{kind} {_e(agent)}<span class='meta'>{_e(meta)}</span></summary>"
        f"<ol>{''.join(_timeline(child, depth))}</ol>"
    )
    return (
        f"<tr data-kind='sub-run-row'><td colspan='5'><details class='row kind-sub-run' "
        f"data-kind='sub-run' data-agent='{_e(agent)}' data-depth='{depth}' "
        f"data-workflow='{'yes' if kind == 'Workflow' else 'no'}' "
        f"data-run-id='{_e(child.run_id)}'{opened}>{inner}</details></td></tr>"
    )


def _row(kind: str, title: str, meta: str, body: str) -> str:
    inner = f"<summary>{_e(title)}<span class='meta'>{_e(meta)}</span></summary>{body}"
    return f"<li><details class='row kind-{kind}' data-kind='{kind}' open>{inner}</details></li>"


def _step(step: _Step, depth: int) -> str:
    response = step.response
    message: Message = response.message
    usage: Usage = response.usage
    meta = (
        f"{response.model_name or ''} · {usage.input_tokens} in / {usage.output_tokens} out"
        f" · finish {response.finish_reason}"
    )
    parts = []
    for part in message.parts:
        # A part with neither text nor signature only marks provider data
        # (an audio id, an output item): nothing to show.
        if isinstance(part, ReasoningPart) and (part.text or part.signature):
            parts.append(
                f"<details data-kind='reasoning'><summary>reasoning</summary><pre>{_e(part.text)}</pre></details>"
            )
    if message.text:
        parts.append(f"<pre data-kind='text'>{_e(message.text)}</pre>")
    parts.append(_images(message.parts, "answer-image"))
    if step.calls:
        rows = "".join(_call_row(c, depth) for c in step.calls)
        parts.append(
            "<table><tr><th>tool</th><th>arguments</th><th>handled</th><th>result</th><th>time</th></tr>"
            f"{rows}</table>"
        )
    agent = f"<span class='agent'>{_e(step.agent)}</span>" if step.agent else ""
    inner = (
        f"<summary>Step {step.number}{agent}<span class='meta'>{_e(meta)}</span></summary>"
        f"{''.join(parts)}"
    )
    return f"<li><details class='row kind-step' data-kind='step' data-step='{step.number}' open>{inner}</details></li>"


def _is_workflow(state: RunState) -> bool:
    """Whether a run is a workflow's (its decisions come from the planner, not a model)."""
    for event in state.log:
        if isinstance(event, ModelResponded):
            return event.response.model_name == PLANNER_MODEL
    return False


def _call_row(call: _Call, depth: int) -> str:
    arguments = call.call.arguments if call.call.arguments is not None else call.call.arguments_text
    if call.result is None:
        result = "<i>no result yet</i>"
    else:
        cls = " class='err'" if call.is_error else ""
        outcome = (
            f"<div class='meta'>{_e(call.outcome)}</div>"
            if call.outcome not in (None, "ok")
            else ""
        )
        result = f"<pre{cls}>{_e(call.result)}</pre>{outcome}{_images(call.parts)}"
    took = "" if call.duration is None else f"{call.duration * 1000:.0f} ms"
    return (
        f"<tr data-kind='call' data-call-id='{_e(call.call.id)}'><td>{_e(call.call.name)}</td>"
        f"<td>{_pre(arguments)}</td>"
        f"<td><span class='badge b-{_e(call.disposition)}'>{_e(call.disposition)}</span></td>"
        f"<td>{result}</td><td>{_e(took)}</td></tr>"
    ) + ("" if call.child is None else _sub_run(call.child, depth + 1))


# Shown inline as data: URLs (the page's CSP allows img-src data:, nothing else).
_SHOWN_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _images(parts: tuple[Any, ...], kind: str = "result-image") -> str:
    """A tool result's (or an answer's) inline images, shown (an SVG is not: it could carry script)."""
    shown = []
    for part in parts:
        if isinstance(part, ImagePart) and part.data and part.media_type in _SHOWN_IMAGES:
            data = base64.b64encode(part.data).decode("ascii")
            shown.append(
                f"<img data-kind='{kind}' alt='{_e(part.media_type)}' "
                f"style='max-width:320px;display:block;margin:4px 0' "
                f"src='data:{part.media_type};base64,{data}'>"
            )
    return "".join(shown)


def _messages(messages: Iterable[Message]) -> str:
    return "".join(
        f"<div data-kind='message' data-role='{_e(m.role)}'><b>{_e(m.role)}</b><pre>{_e(m.text)}</pre></div>"
        for m in messages
    )


def _pre(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return f"<pre>{_e(value)}</pre>"
    try:
        text = json.dumps(_plain(value), indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return f"<pre>{_e(text)}</pre>"


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
