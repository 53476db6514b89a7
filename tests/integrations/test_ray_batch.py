"""run_batch on a real local Ray: order, failure isolation, checkpoints that survive a SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ray_agents import expected, make_agent

import toolfold
from toolfold.integrations.ray import BatchResult, run_batch
from toolfold.testing import ScriptedModel

HERE = Path(__file__).parent


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
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def test_a_killed_batch_reruns_only_what_did_not_finish(ray_address: str, tmp_path: Path) -> None:
    """SIGKILL the driver halfway; the rerun skips the checkpointed inputs and gives every answer."""
    checkpoint, log, gate = tmp_path / "batch.jsonl", tmp_path / "runs.log", tmp_path / "gate"
    count = 40  # inputs from 20 on wait at the gate, so the kill always lands halfway
    driver = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "ray_batch_driver.py"),
            ray_address,
            str(checkpoint),
            str(log),
            str(gate),
            str(count),
        ],
        cwd=HERE,
    )
    try:
        deadline = time.monotonic() + 90
        while len(_lines(checkpoint)) < 1 + count // 2:  # the header, then the ungated half
            assert driver.poll() is None, "the driver exited before it was killed"
            assert time.monotonic() < deadline, "the checkpoint did not fill"
            time.sleep(0.05)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    header, *done = _lines(checkpoint)
    finished = {int(str(line["index"])) for line in done}
    assert finished == set(range(count // 2))
    ran_before = log.read_text(encoding="utf-8").split()
    assert len(ran_before) > count // 2  # gated inputs were in flight when the driver died

    log.unlink()
    gate.touch()
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
    with pytest.raises(toolfold.UsageError, match="concurrency and num_actors must be at least 1"):
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
