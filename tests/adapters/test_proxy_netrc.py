"""The proxy's user and password from the netrc file, under aiohttp, as aiohttp's own ``trust_env`` takes them.

The session a transport makes reads the proxy once, with ``trust_env=False``;
when the proxy's URL carries no ``user:password@``, the entry the netrc file
(``NETRC``, else ``~/.netrc``) holds for the proxy's host goes to the proxy as
``Proxy-Authorization``. The proxy here is the scripted server on 127.0.0.1,
which records the headers it receives.
"""

from __future__ import annotations

import asyncio
import logging
import netrc
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import pytest
from backends import OWNED
from scripted_http import Reply, ScriptedServer
from test_owned_clients import _clear_proxies, _send, _system_settings

from toolfold import ModelConfigError, ProviderError
from toolfold.adapters._http._transport import Transport

BASIC = "Basic dXNlcjpwdw=="  # user:pw
TARGET = "http://api.example.invalid/v1"  # never resolved: the proxy answers for it


def _proxy(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, userinfo: str = "") -> None:
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", f"http://{userinfo}127.0.0.1:{server.port}")
    monkeypatch.setenv("HTTPS_PROXY", f"http://{userinfo}127.0.0.1:{server.port}")


def _netrc(directory: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = directory / "netrc"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("NETRC", str(path))


@pytest.mark.parametrize(
    "text",
    [
        "machine 127.0.0.1 login user password pw\n",
        "machine other.example login other password nope\ndefault login user password pw\n",
        "machine 127.0.0.1 account user password pw\n",  # no login: the account, as aiohttp
    ],
    ids=["the-host", "the-default", "the-account"],
)
def test_aiohttp_sends_the_netrc_entry_of_the_proxys_host(
    http_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """A proxy URL without a user and password: the netrc file NETRC names gives them, sent to
    the proxy as Proxy-Authorization (the session sent none)."""
    _proxy(http_server, monkeypatch)
    _netrc(tmp_path, monkeypatch, text)
    http_server.add(Reply(json={"ok": 1}))
    assert _send(TARGET, "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].path == f"{TARGET}/chat/completions"
    assert http_server.requests[0].headers["proxy-authorization"] == BASIC


def test_without_netrc_the_file_in_the_home_directory_is_read(
    http_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without NETRC, ~/.netrc gives the proxy's user and password."""
    _proxy(http_server, monkeypatch)
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login user password pw\n")
    http_server.add(Reply(json={"ok": 1}))
    assert _send(TARGET, "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].headers["proxy-authorization"] == BASIC


def test_the_netrc_entry_goes_in_the_connect_of_an_https_request(
    http_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """To an https:// base URL the credentials go in the CONNECT the proxy receives."""
    _proxy(http_server, monkeypatch)
    _netrc(tmp_path, monkeypatch, "machine 127.0.0.1 login user password pw\n")
    http_server.add(Reply(status=407, headers={"proxy-authenticate": "Basic realm=x"}))
    with pytest.raises(ProviderError):
        _send("https://api.example.invalid/v1", "async", http="aiohttp", retry=0)
    assert http_server.requests[0].method == "CONNECT"
    assert http_server.requests[0].headers["proxy-authorization"] == BASIC


def test_the_proxy_urls_own_user_and_password_win_over_netrc(
    http_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy URL with user:password@ sends those; the netrc entry for its host is not used."""
    _proxy(http_server, monkeypatch, userinfo="user:pw@")
    _netrc(tmp_path, monkeypatch, "machine 127.0.0.1 login other password nope\n")
    http_server.add(Reply(json={"ok": 1}))
    assert _send(TARGET, "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].headers["proxy-authorization"] == BASIC


@pytest.mark.parametrize(
    "text",
    [
        None,  # no file where NETRC points
        "machine other.example login other password nope\n",  # no entry for the proxy
        "machine 127.0.0.1 login user password pw\nsecret-word-XYZ\n",  # does not parse
        "",  # a directory, not a file
    ],
    ids=["missing", "another-host", "unparsable", "a-directory"],
)
def test_without_a_netrc_entry_no_proxy_authorization_is_sent(
    http_server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    text: str | None,
) -> None:
    """A netrc file missing, unreadable, that does not parse or has no entry for the proxy's host
    gives no credentials, and nothing is said of it (a parse error quotes the file's words)."""
    _proxy(http_server, monkeypatch)
    path = tmp_path / "netrc"
    if text == "":
        path.mkdir()
    elif text is not None:
        path.write_text(text)
    monkeypatch.setenv("NETRC", str(path))
    http_server.add(Reply(json={"ok": 1}))
    with caplog.at_level(logging.DEBUG):
        assert _send(TARGET, "async", http="aiohttp") == [{"ok": 1}]
    assert "proxy-authorization" not in http_server.requests[0].headers
    assert "secret-word" not in caplog.text
    assert "netrc" not in caplog.text


@pytest.mark.parametrize(
    "entry",
    ["login us:er password Netrc-Passw0rd", "login user password Netrc-Passw0rd-\u20ac"],
    ids=["a-colon-in-the-login", "not-latin-1"],
)
def test_a_netrc_entry_basic_auth_cannot_carry_is_a_config_error(
    http_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """A login with ':' or a password outside Latin-1 cannot be sent as basic auth: a
    ModelConfigError naming the netrc entry, showing no password (aiohttp's ValueError, or a
    UnicodeEncodeError quoting it). Python 3.10's netrc cannot read the second file at all."""
    _proxy(http_server, monkeypatch)
    _netrc(tmp_path, monkeypatch, f"machine 127.0.0.1 {entry}\n")
    if "\u20ac" in entry and sys.version_info < (3, 11):
        # Python 3.10's netrc reads words of ASCII only: "bad follower token '€'", a file
        # that does not parse, so no credentials and nothing said (as aiohttp there).
        http_server.add(Reply(json={"ok": 1}))
        assert _send(TARGET, "async", http="aiohttp") == [{"ok": 1}]
        assert "proxy-authorization" not in http_server.requests[0].headers
        return
    with pytest.raises(ModelConfigError, match=r"netrc file's entry for 127\.0\.0\.1") as caught:
        _send(TARGET, "async", http="aiohttp")
    shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    assert "Netrc-Passw0rd" not in shown
    assert "\u20ac" not in shown
    assert http_server.connections == 0


def test_the_netrc_password_is_kept_out_of_the_logs(
    http_server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once sent to the proxy, the netrc password and its Basic credentials are scrubbed from
    aiohttp's log records, as a password in the proxy's URL is."""
    password = "Netrc-Proxy-Passw0rd"
    basic = "dXNlcjpOZXRyYy1Qcm94eS1QYXNzdzByZA=="  # user:Netrc-Proxy-Passw0rd
    _proxy(http_server, monkeypatch)
    _netrc(tmp_path, monkeypatch, f"machine 127.0.0.1 login user password {password}\n")
    http_server.add(Reply(json={"ok": 1}))
    assert _send(TARGET, "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].headers["proxy-authorization"] == f"Basic {basic}"
    with caplog.at_level(logging.DEBUG, logger="aiohttp.client"):
        logging.getLogger("aiohttp.client").debug("proxy %s, %s", password, basic)
    message = caplog.records[-1].getMessage()
    assert password not in message
    assert basic not in message


@pytest.mark.parametrize("name", OWNED)
def test_the_reads_that_may_block_run_off_the_event_loop(
    http_server: ScriptedServer, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making an async client asks the system's exceptions (which may resolve the host) and,
    under aiohttp, reads the netrc file: both in a worker thread, not on the loop's own, where
    a slow DNS answer or file system stalled every run in flight."""
    _clear_proxies(monkeypatch)
    _netrc(tmp_path, monkeypatch, "machine 127.0.0.1 login user password pw\n")
    threads: dict[str, int] = {}

    def bypass(host: str) -> bool:
        threads.setdefault("proxy_bypass", threading.get_ident())
        return False

    reads = netrc.netrc

    def read(*args: Any) -> netrc.netrc:
        threads["netrc"] = threading.get_ident()
        return reads(*args)

    _system_settings(monkeypatch, {"http": http_server.url}, bypass)
    monkeypatch.setattr(netrc, "netrc", read)
    http_server.add(Reply(json={"ok": 1}))
    assert _send(TARGET, "async", http=name) == [{"ok": 1}]
    loop_thread = threading.get_ident()  # `_send` runs its loop on this thread
    assert threads["proxy_bypass"] != loop_thread
    if name == "aiohttp":
        assert threads["netrc"] != loop_thread
        assert http_server.requests[0].headers["proxy-authorization"] == BASIC


@pytest.mark.parametrize("name", OWNED)
def test_concurrent_first_calls_with_a_proxy_set_share_one_client(
    http_server: ScriptedServer, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four calls at once on a new transport, with proxy settings to read (in a thread): every
    one is answered, through one client. Each made its own while the settings were read, and
    the clients replaced were closed under the calls still using them ("Session is closed")."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # not used: NO_PROXY spares the host
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for _ in range(4):
        http_server.add(Reply(json={"ok": 1}))
    transport = Transport("openai", f"{http_server.url}/v1", "sk-" + "k" * 20, http=name)

    async def run() -> tuple[list[Any], Any]:
        try:
            answers = await asyncio.gather(
                *[transport.post_json("chat/completions", {"model": "m"}) for _ in range(4)]
            )
            return answers, transport._sender.clients.ready_async()
        finally:
            await transport.aclose()

    answers, client = asyncio.run(run())
    assert answers == [{"ok": 1}] * 4
    assert client is not None
    assert http_server.connections >= 1


@pytest.mark.parametrize("name", OWNED)
def test_no_proxy_alone_reads_nothing_in_a_thread(
    http_server: ScriptedServer, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NO_PROXY without any proxy: nothing to read, so no worker thread is asked for."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("NO_PROXY", "localhost")
    offloaded: list[str] = []
    real = asyncio.BaseEventLoop.run_in_executor

    def run_in_executor(self: Any, executor: Any, function: Any, *args: Any) -> Any:
        offloaded.append(getattr(function, "__name__", repr(function)))
        return real(self, executor, function, *args)

    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", run_in_executor)
    http_server.add(Reply(json={"ok": 1}))
    assert _send(f"{http_server.url}/v1", "async", http=name) == [{"ok": 1}]
    assert offloaded == []


@pytest.mark.parametrize("name", OWNED)
def test_a_shut_down_default_executor_reads_the_proxy_on_the_loop(
    http_server: ScriptedServer, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the loop's default executor shut down, the proxy settings are read on the loop
    itself: the client is made and the call answered (it was a bare RuntimeError)."""
    _proxy(http_server, monkeypatch)
    http_server.add(Reply(json={"ok": 1}))
    transport = Transport("openai", TARGET, "sk-" + "k" * 20, http=name)

    async def run() -> Any:
        await asyncio.get_running_loop().shutdown_default_executor()
        try:
            return await transport.post_json("chat/completions", {"model": "m"})
        finally:
            await transport.aclose()

    assert asyncio.run(run()) == {"ok": 1}
    assert http_server.requests[0].path == f"{TARGET}/chat/completions"
