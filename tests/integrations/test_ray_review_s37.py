"""What a review of run_batch found (session 37): a checkpoint in use, and inputs that are no list of prompts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ray_agents import expected, make_agent

import toolfold
from toolfold.integrations.ray import BatchResult, run_batch

HERE = Path(__file__).parent

_SECOND_DRIVER = textwrap.dedent(
    """
    import sys

    import ray
    from ray_agents import make_agent

    from toolfold import UsageError
    from toolfold.integrations.ray import run_batch

    ray.init(address=sys.argv[1], log_to_driver=False)
    try:
        run_batch(make_agent(log=sys.argv[3]), ["1", "2"], checkpoint=sys.argv[2], progress=False)
    except UsageError as exc:
        print("refused:", exc)
    """
)


def test_a_second_run_batch_on_a_checkpoint_in_use_is_refused_and_runs_nothing(
    ray_address: str, tmp_path: Path
) -> None:
    """While one run_batch holds a checkpoint, another (another process, or the same one) raises UsageError and runs no input."""
    checkpoint, log = tmp_path / "batch.jsonl", tmp_path / "runs.log"
    seen: list[str] = []

    def second(result: BatchResult) -> None:  # runs while the first batch holds the file
        if seen:
            return
        worktree = Path(toolfold.__file__).parents[1]  # the toolfold under test
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(worktree), str(HERE)])}
        driver = subprocess.run(
            [sys.executable, "-c", _SECOND_DRIVER, ray_address, str(checkpoint), str(log)],
            cwd=HERE,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        seen.append(driver.stdout)
        try:
            run_batch(make_agent(log=str(log)), ["1", "2"], checkpoint=checkpoint, progress=False)
        except toolfold.UsageError as exc:
            seen.append(str(exc))

    results = run_batch(
        make_agent(log=str(log)),
        ["1", "2"],
        checkpoint=checkpoint,
        concurrency=1,
        num_actors=1,
        progress=False,
        on_result=second,
    )
    assert [r.text for r in results] == [expected(1), expected(2)]
    in_use = f"checkpoint {checkpoint} is in use by another run_batch"
    assert len(seen) == 2
    assert seen[0].startswith(f"refused: {in_use}")
    assert seen[1].startswith(in_use)
    assert sorted(log.read_text(encoding="utf-8").split()) == ["1", "2"]  # each ran once
    lines = checkpoint.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3  # the header and one line per input
    # the lock ends with the batch: a rerun reads the file and runs nothing again
    again = run_batch(make_agent(log=str(log)), ["1", "2"], checkpoint=checkpoint, progress=False)
    assert all(r.from_checkpoint for r in again)
    assert sorted(log.read_text(encoding="utf-8").split()) == ["1", "2"]
    assert json.loads(lines[0])["inputs"] == 2


@pytest.mark.parametrize(
    ("inputs", "shown"),
    [
        ("ok a", "str 'ok a'"),
        (b"ok", "bytes b'ok'"),
        ({"role": "user", "content": "hi"}, "dict "),
        (toolfold.Message.user("hi"), "Message "),
        (None, "NoneType None"),
        (3, "int 3"),
    ],
)
def test_inputs_that_are_one_prompt_or_no_iterable_are_refused_before_running(
    inputs: object, shown: str
) -> None:
    """A str, bytes, dict or Message as inputs (one run per character or key) or no iterable is a UsageError saying to wrap it in a list."""
    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(make_agent(), inputs, progress=False)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("run_batch(): inputs must be an iterable of prompts")
    assert f"got {shown}" in message
    assert "wrap a single prompt in a list" in message


@pytest.mark.parametrize("argument", ["concurrency", "num_actors"])
@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "bool True"), ("4", "str '4'"), (None, "NoneType None"), (0, "int 0")],
)
def test_a_concurrency_or_actor_count_that_is_no_int_of_at_least_one_is_refused(
    argument: str, value: object, shown: str
) -> None:
    """concurrency and num_actors must be ints >= 1 (not bool, not a str): a UsageError naming the argument and the value."""
    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(make_agent(), ["1"], progress=False, **{argument: value})  # type: ignore[arg-type]
    assert str(refused.value) == f"run_batch(): {argument} must be an int >= 1, got {shown}"


class _Int64:
    """A stand-in for numpy.int64: an integer type that is no int subclass (it has __index__)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_a_concurrency_and_actor_count_of_another_integer_type_run(ray_address: str) -> None:
    """concurrency=np.int64(2) and num_actors=np.int64(1) (integers that are no int) run the batch, not a UsageError."""
    results = run_batch(
        make_agent(),
        ["1", "2", "3"],
        concurrency=_Int64(2),  # type: ignore[arg-type]
        num_actors=_Int64(1),  # type: ignore[arg-type]
        progress=False,
    )
    assert [r.text for r in results] == [expected(n) for n in (1, 2, 3)]


class _DataFrame:
    """A stand-in for a pandas DataFrame: it iterates its column labels, and has columns and iloc."""

    columns = ("prompt", "label")
    iloc = None

    def __iter__(self) -> object:
        return iter(self.columns)


def test_a_dataframe_as_inputs_is_refused_saying_to_pass_a_column_as_a_list() -> None:
    """A DataFrame as inputs (one paid run per column label) is a UsageError pointing at df['prompt'].tolist()."""
    with pytest.raises(toolfold.UsageError) as refused:
        run_batch(make_agent(), _DataFrame(), progress=False)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("run_batch(): inputs must be an iterable of prompts")
    assert "got _DataFrame" in message
    assert "run_batch(agent, df['prompt'].tolist())" in message
