"""Test-wide configuration."""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import HealthCheck, settings

# Ray reads this once, when it is first imported (tests/test_public_api.py imports it at
# collection): off, a local Ray cluster binds 127.0.0.1 instead of the machine's address
# (as it does on macOS), so the Ray tests touch no network but loopback.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

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


def pytest_configure(config: pytest.Config) -> None:
    """Keep ignoring UndocumentedParameterWarning under ``pytest -W error``.

    Tests define many quick tools without docstrings; pyproject's filterwarnings
    ignores the warning, but command-line ``-W`` filters take precedence over
    the ini ones, so the ignore is repeated after them. Tests of the warning
    use ``pytest.warns``, which records it regardless.
    """
    filters = config.known_args_namespace.pythonwarnings
    if filters and _UNDOCUMENTED not in filters:
        filters.append(_UNDOCUMENTED)
