"""run_batch on a real local Ray: order, failure isolation, checkpoints that survive a SIGKILL."""

from __future__ import annotations

import asyncio
import http.server
import json
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from child_processes import dies_with_this_process
from ray_agents import (
    echo,
    expected,
    make_agent,
    make_workflow,
    paused_agent,
    workflow_expected,
)

import toolfold
from toolfold.integrations.ray import BatchResult, run_batch
from toolfold.integrations.ray._actor import pickled
from toolfold.testing import ScriptedModel

HERE = Path(__file__).parent


@pytest.mark.once  # load and crash: Ray is the subject, not the interpreter
def test_500_inputs_come_back_in_input_order(ray_address: str) -> None:
    """500 inputs run on two actors; each result is its own input's answer, in input order."""
    seen: list[BatchResult] = []
    results = run_batch(
        make_agent(),
        [str(n) for n in range(500)],
        concurrency=32,
        num_actors=2,
        progress=False,
        on_result=seen.append,
    )
    assert [r.index for r in results] == list(range(500))
    assert [r.text for r in results] == [expected(n) for n in range(500)]
    assert all(r.ok and not r.from_checkpoint for r in results)
    assert sorted(r.index for r in seen) == list(range(500))
    assert results[3].response is not None
    assert results[3].response.usage.requests == 2


def test_an_input_whose_tool_raises_fails_alone(
    ray_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The input whose tool raises gets an error result with its state; the others finish."""
    results = run_batch(make_agent(fail_on=7), [str(n) for n in range(20)])
    bar = capsys.readouterr().err
    assert "toolfold batch" in bar
    assert "20/20" in bar
    assert "failed=1" in bar
    failed = results[7]
    assert failed.error is not None
    assert failed.response is None
    assert failed.error.type == "toolfold.ToolExecutionError"
    assert "cannot square 7" in failed.error.traceback
    assert failed.error.state is not None
    assert failed.error.state.phase == "running_tools"  # the last consistent state
    assert [r.text for r in results if r.index != 7] == [expected(n) for n in range(20) if n != 7]


def test_an_input_failing_with_a_provider_error_keeps_its_state_and_usage(
    ray_address: str,
) -> None:
    """A provider error (no RunError) comes back with the run's state, as locally: the
    usage of every billed model call, the abnormally ended answer's included."""
    agent = paused_agent()
    with pytest.raises(toolfold.ProviderFinishError) as local:
        agent.run("3")
    (result,) = run_batch(agent, ["3"], num_actors=1, progress=False)
    assert result.error is not None
    assert result.error.type == "toolfold.ProviderFinishError"
    state = result.error.state
    assert state is not None
    assert state.usage == toolfold.state_of(local.value).usage  # type: ignore[union-attr]
    assert state.usage.requests == 2
    assert state.usage.input_tokens >= 40


def test_an_actor_that_dies_fails_its_inputs_not_the_batch(ray_address: str) -> None:
    """A tool that kills its actor fails the inputs sent to it; the restarted actor runs the rest."""
    results = run_batch(
        make_agent(crash_on=5),
        [str(n) for n in range(12)],
        concurrency=2,
        num_actors=1,
        progress=False,
    )
    failed = [r for r in results if not r.ok]
    assert 5 in {r.index for r in failed}
    assert len(failed) <= 2  # the runs in flight when it died; no input waits on a dead actor
    for result in failed:
        assert result.error is not None
        assert result.error.type.startswith("ray.exceptions.")
        assert "the Ray actor running this input died" in result.error.message
    assert all(r.ok for r in results[:4])
    assert all(r.ok for r in results[7:])  # ran on the restarted actor
    assert [r.text for r in results if r.ok] == [expected(r.index) for r in results if r.ok]


def _lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def _kill_halfway(kind: str, ray_address: str, tmp_path: Path, count: int) -> set[int]:
    """Run ray_batch_driver.py on ``count`` inputs; SIGKILL it once the ungated half finished.

    Returns the inputs whose lines the checkpoint holds. The driver prints each
    finished input after its checkpoint line is written, so the kill lands when
    the first half is done and the other half is in flight, held at the gate.
    """
    checkpoint, log, gate = tmp_path / "batch.jsonl", tmp_path / "runs.log", tmp_path / "gate"
    arguments = [ray_address, str(checkpoint), str(log), str(gate), str(count)]
    driver = subprocess.Popen(
        [sys.executable, str(HERE / "ray_batch_driver.py"), kind, *arguments],
        cwd=HERE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),
    )
    reported: set[int] = set()
    try:
        assert driver.stdout is not None
        while len(reported) < count // 2:
            line = driver.stdout.readline()
            assert line, "the driver exited before it was killed"
            reported.add(int(line))
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        if driver.stdout is not None:
            driver.stdout.close()
    assert reported == set(range(count // 2))  # the gated half cannot finish
    header, *done = _lines(checkpoint)
    assert header["inputs"] == count
    finished = {int(str(line["index"])) for line in done}
    assert finished == reported
    ran_before = [int(n) for n in log.read_text(encoding="utf-8").split()]
    # the finished half ran once each; gated inputs may have reached their tool too
    assert sorted(n for n in ran_before if n < count // 2) == sorted(finished)
    log.unlink()
    gate.touch()
    return finished


@pytest.mark.once  # load and crash: Ray is the subject, not the interpreter
def test_a_killed_batch_reruns_only_what_did_not_finish(ray_address: str, tmp_path: Path) -> None:
    """SIGKILL the driver halfway; the rerun skips the checkpointed inputs and gives every answer."""
    count = 40  # inputs from 20 on wait at the gate, so the kill always lands halfway
    finished = _kill_halfway("agent", ray_address, tmp_path, count)
    checkpoint, log, gate = tmp_path / "batch.jsonl", tmp_path / "runs.log", tmp_path / "gate"
    results = run_batch(
        make_agent(log=str(log), gate=str(gate), gate_from=count // 2),
        [str(n) for n in range(count)],
        concurrency=8,
        checkpoint=checkpoint,
        progress=False,
    )
    ran_again = {int(n) for n in log.read_text(encoding="utf-8").split()}
    assert ran_again == set(range(count)) - finished
    assert [r.text for r in results] == [expected(n) for n in range(count)]
    assert {r.index for r in results if r.from_checkpoint} == finished
    # the rerun kept the batch's run ids, so tools see the same idempotency keys
    header = _lines(checkpoint)[0]
    assert results[-1].response is not None
    assert results[-1].response.run_id == f"{header['batch_id']}-{count - 1}"
    assert len(_lines(checkpoint)) == 1 + count


def test_a_finished_checkpoint_answers_without_running(ray_address: str, tmp_path: Path) -> None:
    """A rerun over a complete checkpoint runs nothing, and drops a line cut off by a crash."""
    checkpoint, log = tmp_path / "batch.jsonl", tmp_path / "runs.log"
    inputs = [str(n) for n in range(4)]
    first = run_batch(make_agent(), inputs, checkpoint=checkpoint, progress=False)
    with checkpoint.open("a", encoding="utf-8") as file:
        file.write('{"index": 2, "inp')  # a write the crash cut short
    again = run_batch(make_agent(log=str(log)), inputs, checkpoint=checkpoint, progress=False)
    assert not log.exists()
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.from_checkpoint for r in again)
    assert checkpoint.read_text(encoding="utf-8").endswith("}\n")


def test_an_agent_given_by_import_path_runs_in_the_actors(ray_address: str) -> None:
    """An import path 'module:name' names the agent each actor imports (from its PYTHONPATH)."""
    runtime_env = {"env_vars": {"PYTHONPATH": str(HERE)}}
    results = run_batch(
        "ray_agents:default_agent",
        ["3", "4"],
        num_actors=1,
        progress=False,
        actor_options={"runtime_env": runtime_env},
    )
    assert [r.text for r in results] == [expected(3), expected(4)]


def test_a_checkpoint_of_other_inputs_is_refused(tmp_path: Path) -> None:
    """A checkpoint written for other inputs is a clear error, before anything runs."""
    checkpoint = tmp_path / "batch.jsonl"
    header = {"toolfold_batch": 1, "batch_id": "b", "inputs": 2}
    line = {"index": 1, "input": "0" * 16, "state": {}}
    checkpoint.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(toolfold.UsageError, match="written for other inputs: input 1 differs"):
        run_batch(make_agent(), ["1", "2"], checkpoint=checkpoint, progress=False)
    with pytest.raises(toolfold.UsageError, match="written for 2 inputs, this batch has 3"):
        run_batch(make_agent(), ["1", "2", "3"], checkpoint=checkpoint, progress=False)


def test_an_agent_that_cannot_travel_is_a_clear_error() -> None:
    """An agent whose model cannot be pickled is refused with what to do instead."""
    agent = toolfold.Agent(ScriptedModel(["hi"]))
    with pytest.raises(toolfold.UsageError, match=r"cannot be sent to Ray actors.*import path"):
        run_batch(agent, ["hi"], progress=False)


def test_bad_arguments_are_refused() -> None:
    """A non-prompt input, a bad import path and a zero concurrency name the problem."""
    with pytest.raises(toolfold.UsageError, match="input 1 is not a prompt"):
        run_batch(make_agent(), ["1", 2], progress=False)
    with pytest.raises(toolfold.UsageError, match=r"reads 'package\.module:name'"):
        run_batch("ray_agents.default_agent", ["1"], progress=False)
    with pytest.raises(toolfold.UsageError, match="concurrency must be an int >= 1, got int 0"):
        run_batch(make_agent(), ["1"], concurrency=0, progress=False)


def test_the_tests_ray_listens_on_loopback_only(ray_address: str) -> None:
    """The tests' Ray cluster is reached at 127.0.0.1, not the machine's network address."""
    assert ray_address.startswith("127.0.0.1:")


def test_a_recorded_error_is_kept_when_errors_are_not_retried(tmp_path: Path) -> None:
    """With retry_errors=False a rerun returns the recorded error instead of running the input."""
    from toolfold.integrations.ray._checkpoint import input_digest

    checkpoint = tmp_path / "batch.jsonl"
    error = {"type": "builtins.ValueError", "message": "boom", "traceback": "tb", "state": None}
    lines = [
        {"toolfold_batch": 1, "batch_id": "b", "inputs": 1},
        {"index": 0, "input": input_digest("1"), "error": error},
    ]
    checkpoint.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    (result,) = run_batch(
        make_agent(), ["1"], checkpoint=checkpoint, retry_errors=False, progress=False
    )
    assert result.from_checkpoint
    assert result.error is not None
    assert (result.error.type, result.error.message) == ("builtins.ValueError", "boom")


def _same_as_local(workflow: toolfold.Workflow, result: BatchResult, prompt: str) -> None:
    """The result is the response a local run of the workflow gives under the same run id."""
    response = result.response
    assert isinstance(response, toolfold.WorkflowResponse)
    local = workflow.run(prompt, run_id=response.run_id)
    assert response.state == local.state
    assert (response.output, response.outputs, response.text) == (
        local.output,
        local.outputs,
        local.text,
    )


def test_a_batch_of_workflow_inputs_gives_what_local_runs_give(ray_address: str) -> None:
    """A Sequence of agents and a Parallel runs per input in the actors; one failing step fails alone."""
    workflow = make_workflow(fail_on=7)
    inputs = [str(n) for n in range(24)]
    results = run_batch(workflow, inputs, concurrency=8, progress=False)
    assert [r.index for r in results] == list(range(24))
    failed = results[7]
    assert failed.response is None
    assert failed.error is not None
    assert failed.error.type == "toolfold.RunError"
    assert "step 'square' of Sequence 'squares' failed" in failed.error.message
    assert "cannot square 7" in failed.error.message
    assert failed.error.state is not None
    assert failed.error.state.phase == "failed"  # the workflow's state, the failure recorded
    for result in results:
        if result.index != 7:
            assert result.ok
            assert result.response is not None
            assert result.response.output == workflow_expected(result.index)
            _same_as_local(workflow, result, inputs[result.index])


@pytest.mark.once  # load and crash: Ray is the subject, not the interpreter
def test_a_killed_workflow_batch_reruns_only_what_did_not_finish(
    ray_address: str, tmp_path: Path
) -> None:
    """SIGKILL a workflow batch's driver halfway; the rerun skips what finished, same results."""
    count = 16
    finished = _kill_halfway("workflow", ray_address, tmp_path, count)
    checkpoint, log, gate = tmp_path / "batch.jsonl", tmp_path / "runs.log", tmp_path / "gate"
    workflow = make_workflow(log=str(log), gate=str(gate), gate_from=count // 2)
    inputs = [str(n) for n in range(count)]
    results = run_batch(workflow, inputs, concurrency=8, checkpoint=checkpoint, progress=False)
    ran_again = {int(n) for n in log.read_text(encoding="utf-8").split()}
    assert ran_again == set(range(count)) - finished
    assert {r.index for r in results if r.from_checkpoint} == finished
    assert [r.response.output if r.response else None for r in results] == [
        workflow_expected(n) for n in range(count)
    ]
    for result in results:  # read back or run again, each is a local run's response
        _same_as_local(make_workflow(), result, inputs[result.index])
    assert len(_lines(checkpoint)) == 1 + count


def test_a_workflow_given_by_import_path_takes_plain_data(ray_address: str, tmp_path: Path) -> None:
    """A workflow named by import path runs on dict inputs, and its checkpoint answers a rerun."""
    runtime_env = {"env_vars": {"PYTHONPATH": str(HERE)}}
    checkpoint = tmp_path / "batch.jsonl"
    inputs = [{"n": 3}, {"n": 4}]

    def go() -> list[BatchResult]:
        return run_batch(
            "ray_agents:make_dict_workflow",
            inputs,
            num_actors=1,
            checkpoint=checkpoint,
            progress=False,
            actor_options={"runtime_env": runtime_env},
        )

    first = go()
    assert [r.text for r in first] == ["shout(3)", "shout(4)"]
    again = go()
    assert all(r.from_checkpoint for r in again)
    assert [r.text for r in again] == ["shout(3)", "shout(4)"]
    with pytest.raises(toolfold.UsageError, match="input 0 differs"):
        run_batch("ray_agents:make_dict_workflow", [{"n": 5}, {"n": 4}], checkpoint=checkpoint)


def test_a_workflow_whose_template_names_no_step_is_refused_before_running() -> None:
    """A workflow that no input could start (a template naming no step) fails before any actor."""
    writer = toolfold.Task(echo("shout"), prompt="{missing}")
    workflow = toolfold.Sequence(writer, name="broken")
    with pytest.raises(toolfold.WorkflowDefinitionError, match=r"\{missing\}"):
        run_batch(workflow, ["1"], progress=False)


class _FakeOllama(http.server.BaseHTTPRequestHandler):
    """Ollama's ``POST /api/chat``: answers ``heard: <last message>``, records each bearer token."""

    tokens: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.tokens.append(self.headers.get("authorization", ""))
        answer = {
            "model": body["model"],
            "message": {
                "role": "assistant",
                "content": f"heard: {body['messages'][-1]['content']}",
            },
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 3,
            "eval_count": 2,
        }
        data = json.dumps(answer).encode() + (b"\n" if body.get("stream") else b"")
        self.send_response(200)
        kind = "application/x-ndjson" if body.get("stream") else "application/json"
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_models_are_rebuilt_in_the_actors_from_the_spec(
    ray_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model string travels, not the client: each actor resolves it with its own host and key."""
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # the driver's: nothing listens
    monkeypatch.setenv("OLLAMA_API_KEY", "driver-secret-key")
    agent = toolfold.Agent("ollama:qwen3")
    assert b"driver-secret-key" not in pickled(agent)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeOllama.tokens = []
    try:
        host = f"http://127.0.0.1:{server.server_address[1]}"
        env = {"OLLAMA_HOST": host, "OLLAMA_API_KEY": "actor-key"}
        results = run_batch(
            agent,
            ["one", "two", "three"],
            progress=False,
            actor_options={"runtime_env": {"env_vars": env}},
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert [r.text for r in results] == ["heard: one", "heard: two", "heard: three"]
    assert _FakeOllama.tokens == ["Bearer actor-key"] * 3


class _FakeChat(http.server.BaseHTTPRequestHandler):
    """A chat-completions server that repeats the prompt; records each request's auth header."""

    tokens: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).tokens.append(self.headers.get("authorization", ""))
        prompt = body["messages"][-1]["content"]
        answer = {
            "id": "chat-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"heard: {prompt}"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A `_FakeChat` server (its tokens reset) whose URL `ray_keyed_models` reads; yields the URL.

    The `ray_keyed` modules are imported afresh by each test (dropped before and after).
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeChat.tokens = []
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("RAY_KEYED_BASE_URL", url)
    for name in _KEYED_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        for name in _KEYED_MODULES:
            sys.modules.pop(name, None)


_KEYED_MODULES = ("ray_keyed", "ray_keyed_models")


def _keyed_env(url: str, key: str) -> dict[str, Any]:
    """actor_options giving the actors ``key`` as DEEPSEEK_API_KEY ("" reads as none)."""
    env = {"PYTHONPATH": str(HERE), "DEEPSEEK_API_KEY": key, "RAY_KEYED_BASE_URL": url}
    return {"runtime_env": {"env_vars": env}}


def test_a_model_object_without_a_key_is_rebuilt_in_the_actors(
    ray_address: str, chat_server: str
) -> None:
    """A model object built with base_url and no key (openai-compatible) reaches the actors:
    each builds it again from its name and options."""
    model = toolfold.model("openai-compatible:m", base_url=f"{chat_server}/v1", retry=0)
    results = run_batch(toolfold.Agent(model), ["one", "two"], num_actors=1, progress=False)
    assert [r.text for r in results] == ["heard: one", "heard: two"]
    model.close()


def test_a_model_object_built_with_a_key_is_refused_naming_it(chat_server: str) -> None:
    """A model given api_key= in code cannot reach the actors: the error names the model and
    the import path to use, never the key; nothing runs."""
    key = "sk-proj-SECRET-in-code-0123456789"
    model = toolfold.model("deepseek:deepseek-chat", base_url=f"{chat_server}/v1", api_key=key)
    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(toolfold.Agent(model), ["one"], progress=False)
    message = str(refused.value)
    assert message.startswith(
        "the agent cannot be sent to Ray actors: the model 'deepseek:deepseek-chat' "
        "cannot be pickled: it was built with api_key=..., and a key never leaves its process. "
        "Build it without that (each process then reads DEEPSEEK_API_KEY from its own "
        "environment), or build it where it runs (for Ray: from an import path"
    )
    assert "Give models as" not in message  # (the model's own advice, alone)
    assert key not in message
    assert _FakeChat.tokens == []
    model.close()


def test_a_local_model_object_is_refused_naming_its_string() -> None:
    """A LocalModel cannot reach the actors: the error says to pass 'local:smollm2', not a
    lock's TypeError followed by advice about keys."""
    from toolfold.local import LocalModel

    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(toolfold.Agent(LocalModel("smollm2")), ["one"], progress=False)
    assert str(refused.value) == (
        "the agent cannot be sent to Ray actors: the model 'local:smollm2' cannot be pickled: "
        "its llama-server runs in this process. Pass the string 'local:smollm2' instead of the "
        "model object (e.g. Agent('local:smollm2')), so that each process (each Ray actor) "
        "starts a server of its own"
    )


def test_a_pickled_model_without_its_key_in_the_actor_says_where_to_set_it(
    ray_address: str, chat_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model object whose key only the driver has fails the batch saying it was rebuilt in
    the actor and reads its key there: no advice to pass api_key= (it would not pickle), nor
    about an import path the actor imported (none was)."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-DRIVER-ONLY-0123456789abcdef")
    model = toolfold.model("deepseek:deepseek-chat", base_url=f"{chat_server}/v1")
    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(
            toolfold.Agent(model),
            ["one"],
            num_actors=1,
            progress=False,
            actor_options=_keyed_env(chat_server, ""),  # the actors' key blank
        )
    message = str(refused.value)
    assert message.startswith(
        "the spec could not be built in a Ray actor: ModelConfigError: no API key for "
        "provider 'deepseek': the model was pickled without its key and built again in this "
        "process, which reads it from its own environment: set DEEPSEEK_API_KEY there (the "
        "spec was pickled and built again in the actor, its models with it, which read their "
        "API keys from the actor's own environment: set them in the environment the cluster's "
        "nodes start with"
    )
    assert "api_key=" not in message
    assert "imports an import path" not in message
    assert "DRIVER-ONLY" not in message
    assert _FakeChat.tokens == []
    model.close()


def test_a_crashed_actor_names_the_inputs_in_flight_on_it(ray_address: str, tmp_path: Path) -> None:
    """Every input in flight on an actor that crashed says which inputs were (any may have
    crashed it) and that concurrency=1 tells which."""
    results = run_batch(
        make_agent(gate=str(tmp_path / "never"), gate_from=1, crash_on=0),
        ["0", "1", "2"],  # all three on the one actor: 1 and 2 wait while 0 crashes it
        concurrency=3,
        num_actors=1,
        progress=False,
    )
    for result in results:
        assert result.error is not None
        assert result.error.message.startswith(
            "the Ray actor running this input died with inputs 0, 1, 2 in flight (any of them "
            "may have crashed it: rerun them with concurrency=1 to tell which): "
        )


def test_an_agent_named_by_import_path_needs_its_key_only_on_the_actors(
    ray_address: str, chat_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver builds an imported agent without its API key; the actors read theirs from actor_options' env_vars."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    results = run_batch(
        "ray_keyed:agent",
        ["one", "two"],
        num_actors=1,
        progress=False,
        actor_options=_keyed_env(chat_server, "actor-key"),
    )
    assert [r.text for r in results] == ["heard: one", "heard: two"]
    assert _FakeChat.tokens == ["Bearer actor-key"] * 2


def test_a_driver_with_the_key_keeps_the_module_an_import_path_names(
    ray_address: str, chat_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the key on the driver, the path is imported once and kept: outputs are its classes' instances and pickle."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "driver-key")
    results = run_batch(
        "ray_keyed:cities",
        ["paris", "rome"],
        num_actors=1,
        progress=False,
        actor_options=_keyed_env(chat_server, "actor-key"),
    )
    import ray_keyed  # the module run_batch imported, not a new one

    assert sys.modules["ray_keyed"] is ray_keyed
    outputs = [r.response.output if r.response else r.error for r in results]
    assert outputs == [ray_keyed.City("Paris"), ray_keyed.City("Rome")]
    assert all(isinstance(output, ray_keyed.City) for output in outputs)
    assert pickle.loads(pickle.dumps(outputs)) == outputs
    toolfold.Agent(sys.modules["ray_keyed_models"].chat).run("three")  # keyed as on main
    assert _FakeChat.tokens == ["Bearer driver-key"]


def test_a_keyless_driver_keeps_the_module_and_its_output_classes(
    ray_address: str, chat_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the key on the driver, outputs are instances of the named module's classes, and pickle."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    results = run_batch(
        "ray_keyed:cities",
        ["paris"],
        num_actors=1,
        progress=False,
        actor_options=_keyed_env(chat_server, "actor-key"),
    )
    module = sys.modules["ray_keyed"]
    output = results[0].response.output if results[0].response else results[0].error
    assert isinstance(output, module.City)
    assert pickle.loads(pickle.dumps(output)) == module.City("Paris")


def test_a_keyless_model_left_in_a_sub_module_refuses_to_send(
    ray_address: str, chat_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model the named module's imports built without the key raises ModelConfigError on every call; nothing is sent."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    run_batch(
        "ray_keyed:cities",
        ["paris"],
        num_actors=1,
        progress=False,
        actor_options=_keyed_env(chat_server, "actor-key"),
    )
    from ray_keyed_models import chat

    agent = toolfold.Agent(chat)
    missing = (
        "no API key for provider 'deepseek': pass api_key=... to the model "
        "(toolfold.model('deepseek:...', api_key=...)) or set DEEPSEEK_API_KEY"
    )
    with pytest.raises(toolfold.ModelConfigError) as refused:
        agent.run("hello")
    assert str(refused.value).startswith(f"{missing} (this model was built without its key")
    with pytest.raises(toolfold.ModelConfigError) as refused:
        asyncio.run(agent.arun("hello"))
    assert str(refused.value).startswith(f"{missing} (this model was built without its key")
    assert _FakeChat.tokens == []  # no request reached the server, keyless or not


def test_an_actor_without_the_api_key_fails_the_batch_with_a_usage_error(
    ray_address: str, chat_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor that cannot build the agent for want of its key fails the batch at once, naming the variable."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    seen: list[BatchResult] = []
    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(
            "ray_keyed:agent",
            ["one", "two"],
            num_actors=1,
            progress=False,
            on_result=seen.append,
            # blank, not unset: a key in the environment that started Ray is not inherited
            actor_options=_keyed_env(chat_server, ""),
        )
    message = str(refused.value)
    assert message.startswith(
        "the spec could not be built in a Ray actor: ModelConfigError: no API key for "
        "provider 'deepseek': pass api_key=... to the model "
        "(toolfold.model('deepseek:...', api_key=...)) or set DEEPSEEK_API_KEY (an actor"
    )
    # where to set it: runtime_env's env_vars land in Ray's session logs in plain text
    assert "set them in the environment the cluster's nodes start with" in message
    assert "Ray writes those values in plain text into its session logs" in message
    assert "Traceback" not in message
    assert seen == []  # no input ran
    assert _FakeChat.tokens == []


def test_inputs_left_when_a_restarted_actor_cannot_build_the_spec_say_why(
    ray_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor that restarts but cannot import the spec again: the inputs left fail with the reason it gave."""
    flag = tmp_path / "crashed"
    monkeypatch.setenv("RAY_FRAGILE_FLAG", str(flag))  # the driver imports it too, before the crash
    monkeypatch.delitem(sys.modules, "ray_fragile", raising=False)
    env = {"PYTHONPATH": str(HERE), "RAY_FRAGILE_FLAG": str(flag)}
    results = run_batch(
        "ray_fragile:agent",
        ["crash", "b", "c"],
        num_actors=1,
        concurrency=1,
        progress=False,
        actor_options={"runtime_env": {"env_vars": env}},
    )
    assert results[0].error is not None
    assert "the Ray actor running this input died" in results[0].error.message
    for result in results[1:]:
        assert result.error is not None
        assert result.error.message == (
            "the Ray actor running this input died: no actor is left; a restarted actor "
            "could not build the spec: RuntimeError: this node may no longer run the agent"
        )


def test_a_checkpointed_state_that_no_longer_replays_is_refused(
    ray_address: str, tmp_path: Path
) -> None:
    """A recorded state its own event log no longer gives (another reducer, an edit) is refused."""
    checkpoint = tmp_path / "batch.jsonl"
    inputs = ["2", "3"]
    run_batch(make_agent(), inputs, checkpoint=checkpoint, progress=False)
    header, first, second = _lines(checkpoint)
    state = second["state"]
    assert isinstance(state, dict)
    state["phase"] = "running_tools"  # what a reducer that folds the log otherwise would see
    checkpoint.write_text(
        "".join(json.dumps(line) + "\n" for line in (header, first, second)), encoding="utf-8"
    )
    with pytest.raises(toolfold.UsageError, match=r"state recorded for input \d does not load"):
        run_batch(make_agent(), inputs, checkpoint=checkpoint, progress=False)


def test_a_run_that_waits_for_an_approval_is_a_result_to_resume(ray_address: str) -> None:
    """An input whose tool call needs an approval comes back suspended; its state resumes locally."""
    agent = make_agent(ask_on=2)
    results = run_batch(agent, ["1", "2", "3"], progress=False)
    waiting = results[1].response
    assert waiting is not None
    assert waiting.finish_reason == "approval_required"
    assert [r.text for r in results if r.index != 1] == [expected(1), expected(3)]
    (call,) = waiting.pending_approvals
    done = agent.resume(waiting.state, approvals={call.id: True})
    assert done.text == expected(2)


def test_a_response_as_an_input_is_told_to_go_on_by_the_agents_resume() -> None:
    """A batch input that is a Response says how an agent's run goes on: agent.resume (it
    said resume(...), the module's function, which needs the model and tools again)."""
    response = toolfold.Agent(ScriptedModel(["hi"])).run("hi")
    with pytest.raises(
        toolfold.UsageError,
        match=r"input 1 is not a prompt: .*run itself: agent\.resume\(response\.state\)\)$",
    ):
        run_batch(make_agent(), ["1", response], progress=False)


def test_an_input_dict_without_content_is_refused_before_running() -> None:
    """A batch input dict with a mistyped key is refused naming its index and keys."""
    with pytest.raises(
        toolfold.UsageError, match=r"input 1 is not a prompt: .*got keys \['text'\]"
    ):
        run_batch(make_agent(), ["1", [{"text": "2"}]], progress=False)
