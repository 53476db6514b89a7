"""A run suspended for approval is serialized, and resumed in another process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfold import UsageError
from toolfold.runtime import RunState

AGENT_MODULE = textwrap.dedent(
    '''
    """An agent both processes build the same way: tools and model by name."""
    from toolfold import Agent, tool
    from toolfold.testing import ScriptedModel

    LOG = []

    @tool(requires_approval=True)
    def transfer(amount: int, to: str) -> str:
        """Transfer money.

        Args:
            amount: How much.
            to: To whom.
        """
        LOG.append((amount, to))
        return f"sent {amount} to {to}"

    @tool
    def balance() -> int:
        """The balance."""
        return 1000

    def make_agent(script):
        return Agent(ScriptedModel(script), tools=[transfer, balance], max_steps=5)
    '''
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from bank_agent import LOG, make_agent
    from toolfold import Denied
    from toolfold.runtime import RunState

    payload = json.loads(sys.stdin.read())
    state = RunState.from_json(payload["state"])
    agent = make_agent(["Transfer done."])
    decision = payload["decision"]
    approval = True if decision == "yes" else Denied(decision)
    response = agent.resume(state, approvals={payload["call_id"]: approval})
    results = [r.content for m in response.messages for r in m.tool_results]
    print(json.dumps({"text": response.text, "log": LOG, "results": results,
                      "reason": response.finish_reason, "steps": len(response.steps)}))
    """
)


@pytest.fixture
def agent_dir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "bank_agent.py").write_text(AGENT_MODULE, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("bank_agent", None)


def _suspend(agent_dir: Path) -> tuple[str, str]:
    from bank_agent import LOG, make_agent  # type: ignore[import-not-found]

    from toolfold.testing import ScriptedModel

    call = ScriptedModel.call
    agent = make_agent([[call("balance"), call("transfer", {"amount": 50, "to": "bob"})]])
    response = agent.run("pay bob 50")
    assert response.finish_reason == "approval_required"
    assert LOG == []
    return response.state.to_json(), response.pending_approvals[0].id


def _child(agent_dir: Path, payload: dict[str, str]) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(agent_dir)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_approved_in_another_process(agent_dir: Path) -> None:
    """The child loads the state, approves, runs the tool and finishes the run."""
    state_json, call_id = _suspend(agent_dir)
    out = _child(agent_dir, {"state": state_json, "call_id": call_id, "decision": "yes"})
    assert out["log"] == [[50, "bob"]]
    assert out["results"] == ["1000", "sent 50 to bob"]
    assert out["text"] == "Transfer done."
    assert out["reason"] == "stop"
    assert out["steps"] == 2


def test_denied_in_another_process(agent_dir: Path) -> None:
    """A denial in the child never runs the tool; the model sees the reason."""
    state_json, call_id = _suspend(agent_dir)
    out = _child(agent_dir, {"state": state_json, "call_id": call_id, "decision": "too much"})
    assert out["log"] == []
    assert "denied this tool call: too much" in str(out["results"])


def test_resume_without_the_tools_is_refused(agent_dir: Path) -> None:
    """Resuming a loaded state without the tools it names is a clear error."""
    from toolfold import Agent
    from toolfold.testing import ScriptedModel

    state_json, call_id = _suspend(agent_dir)
    state = RunState.from_json(state_json)
    with pytest.raises(UsageError, match="tools that were not given: transfer, balance"):
        Agent(ScriptedModel([])).resume(state, approvals={call_id: True})
