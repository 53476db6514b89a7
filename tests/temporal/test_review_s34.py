"""What a user review of the durable docs found: bad settings, names and answers refused clearly."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from toolfold import UsageError
from toolfold.integrations.temporal import ActivitySettings


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("model_timeout", 0, "datetime.timedelta greater than zero, got 0"),
        ("tool_timeout", "5m", "datetime.timedelta greater than zero, got '5m'"),
        ("heartbeat_timeout", timedelta(seconds=-1), "greater than zero"),
        ("model_timeout", timedelta(0), "greater than zero"),
        ("continue_as_new_steps", 0, "integer >= 1, or None, got 0"),
        ("continue_as_new_steps", -1, "integer >= 1, or None, got -1"),
        ("continue_as_new_steps", True, "integer >= 1, or None, got True"),
        ("max_result_bytes", 0, "integer >= 1, or None, got 0"),
        ("max_result_bytes", -5, "integer >= 1, or None, got -5"),
        ("retry_policy", None, "RetryPolicy, got None"),
    ],
)
def test_activity_settings_refuse_values_that_make_runs_retry_forever(
    setting: str, value: Any, expected: str
) -> None:
    """A setting that would fail every workflow task is a UsageError naming it and its value."""
    with pytest.raises(UsageError, match=f"ActivitySettings.{setting} must be") as raised:
        ActivitySettings(**{setting: value})
    assert expected in str(raised.value)


def test_activity_settings_accept_none_where_documented() -> None:
    """None stays allowed for continue_as_new_steps and max_result_bytes, 1 for both."""
    settings = ActivitySettings(continue_as_new_steps=None, max_result_bytes=None)
    assert settings.continue_as_new_steps is None
    assert settings.max_result_bytes is None
    assert ActivitySettings(continue_as_new_steps=1, max_result_bytes=1).max_result_bytes == 1
