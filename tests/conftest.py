"""Test-wide configuration."""

from __future__ import annotations

import gc
import ipaddress
import os
import resource
import signal
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Ray reads this once, when it is first imported (tests/test_public_api.py imports it at
# collection): off, a local Ray cluster binds 127.0.0.1 instead of the machine's address
# (as it does on macOS), so the Ray tests touch no network but loopback.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

# A developer's gateway (the official SDKs' variables, which toolfold reads too when no
# base_url= is given) must not take the requests of tests that expect the providers' own
# URLs; the tests of these variables set them themselves.
for _variable in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_variable, None)

# No property test is about speed: Hypothesis's timing checks (a 200 ms deadline per
# example, the too_slow health check on generation) only measure how loaded the
# machine is, and a collection pause in a long run, or three suites on two cores,
# fails them. Every test without settings of its own runs under this profile.
settings.register_profile("toolfold", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toolfold")

# A shell without job control starts a command in the background with SIGINT ignored
# (POSIX), and an ignored signal stays ignored across exec: every process the tests start
# would then shrug off Ctrl-C, and the tests of Ctrl-C would fail only when their suite
# runs in the background (scripts/check runs three of its four that way). A Python
# handler is reset to the default at exec, so the processes the tests start take SIGINT.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_UNDOCUMENTED = "ignore::toolfold.toolkit.UndocumentedParameterWarning"
# anyio's happy-eyeballs connect (under httpcore) can leave a connection attempt's
# coroutine unstarted when a cancellation lands as it hands it to its task group: its
# "never awaited" is collected later, in whatever test runs then (seen after the soak's
# close was cut under load). Another library's, and not toolfold's to close.
_ANYIO_ATTEMPT = (
    "ignore:coroutine 'connect_tcp.<locals>.try_connect' was never awaited:RuntimeWarning"
)


# What a suite has loaded by a test's start (modules, parametrized cases, the specs and
# recordings read into memory) lives until the end, and every full garbage collection
# walked all of it again: the leak checks' gc.collect() and Python's own collections
# cost ~0.3 s each once the adapter tests were loaded, about two thirds of the time of
# the fault matrices. So before each test, what is garbage is collected and what is left
# is frozen (gc.freeze: kept out of later collections); the test's own objects, and its
# garbage, are collected as before.
def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection loaded (see the comment above)."""
    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Collect the last test's garbage and freeze what is left (see above)."""
    gc.collect()
    gc.freeze()


def _cpu() -> tuple[float, float]:
    """CPU seconds so far: this process's, and its ended (waited for) children's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


#: CPU seconds (pytest's own, its children's) by test file, for the summary.
_CPU_BY_FILE: dict[str, list[float]] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Count the CPU each test file costs, its children's included (for the summary)."""
    own, children = _cpu()
    try:
        return (yield)
    finally:
        own_after, children_after = _cpu()
        spent = _CPU_BY_FILE.setdefault(item.location[0], [0.0, 0.0])
        spent[0] += own_after - own
        spent[1] += children_after - children


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """End the report with the CPU time the run used, its own and its ended children's,
    and the test files that cost most of it.

    scripts/check runs nine suites side by side on two cores, so a suite's wall time
    says more about its neighbours than about itself; its CPU time is what it costs.
    """
    own, children = _cpu()
    terminalreporter.write_line(
        f"CPU: {own:.0f} s in pytest, {children:.0f} s in the processes it started and waited for"
    )
    costly = sorted(_CPU_BY_FILE.items(), key=lambda item: -sum(item[1]))[:10]
    for path, (mine, theirs) in costly:
        terminalreporter.write_line(
            f"  {mine + theirs:6.0f} s ({theirs:.0f} s in children)  {path}"
        )


def pytest_configure(config: pytest.Config) -> None:
    """Keep ignoring UndocumentedParameterWarning (and anyio's, see `_ANYIO_ATTEMPT`) under
    ``pytest -W error``.

    Tests define many quick tools without docstrings; pyproject's filterwarnings
    ignores the warning, but command-line ``-W`` filters take precedence over
    the ini ones, so the ignore is repeated after them. Tests of the warning
    use ``pytest.warns``, which records it regardless.
    """
    filters = config.known_args_namespace.pythonwarnings
    for ignored in (_UNDOCUMENTED, _ANYIO_ATTEMPT):
        if filters and ignored not in filters:
            filters.append(ignored)


# Tests never touch the network beyond this machine. An audit hook (PEP 578) sees every
# socket this process connects or sends to and every name it asks the resolver for; one
# that leaves the loopback (or a DNS query for a name that is no address) fails the test
# that made it, after it has run: raised in the hook, the error could be swallowed by
# the code under test (a connect error becomes a ProviderError). Processes the tests
# start (servers, Ray, Temporal) are their own; they listen on 127.0.0.1.
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_RESOLVING = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"})
_SENDING = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})
_left_the_machine: list[str] = []


def _is_local(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str) or not host or host in _LOCAL_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False  # a name: resolving it asks a DNS server
    return address.is_loopback or address.is_unspecified


def _network_audit(event: str, args: tuple[object, ...]) -> None:
    if not event.startswith("socket."):
        return
    if event in _SENDING:
        address = args[1]
        if isinstance(address, tuple) and address and not _is_local(address[0]):
            _left_the_machine.append(f"{event} {address!r}")
    elif event in _RESOLVING and args and not _is_local(args[0]):
        _left_the_machine.append(f"{event} {args[0]!r}")


sys.addaudithook(_network_audit)


@pytest.fixture(autouse=True)
def _stays_on_this_machine() -> Iterator[None]:
    """Fail a test that connected, sent or resolved beyond the loopback."""
    del _left_the_machine[:]
    yield
    found, _left_the_machine[:] = list(_left_the_machine), []
    if found:
        pytest.fail(f"the test reached beyond this machine: {'; '.join(found[:5])}")
