"""Every HTTP failure maps to one ProviderError child at one boundary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import h11
import httpx
import pytest
import yaml
import yarl
from aiohttp import http_exceptions

import toolfold
from toolfold import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    NotFoundError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
    ToolfoldError,
    ToolUseFailedError,
)
from toolfold._errors import gives_up
from toolfold.adapters._http._http_errors import (
    ErrorInfo,
    is_client_error,
    malformed_answer,
    parse_error_body,
    status_error,
    transport_error,
)
from toolfold.adapters._http._keys import Secret
from toolfold.toolkit._results import one_line

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "provider-traffic"


def httpx_exception_classes() -> list[type[BaseException]]:
    """Every exception class httpx exports."""
    classes = []
    for name in dir(httpx):
        value = getattr(httpx, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            classes.append(value)
    return classes


def instance(cls: type[BaseException]) -> BaseException:
    request = httpx.Request("POST", "https://api.example.com/v1/x")
    if cls is httpx.HTTPStatusError:
        response = httpx.Response(503, request=request)
        return cls("boom", request=request, response=response)
    if issubclass(cls, httpx.RequestError):
        return cls("boom", request=request)
    try:
        return cls()
    except TypeError:
        return cls("boom")


EXPECTED: dict[str, type[ProviderError]] = {
    "ConnectTimeout": ProviderTimeoutError,
    "ReadTimeout": ProviderTimeoutError,
    "WriteTimeout": ProviderTimeoutError,
    "PoolTimeout": ProviderTimeoutError,
    "TimeoutException": ProviderTimeoutError,
    "ConnectError": ProviderConnectionError,
    "ReadError": ProviderConnectionError,
    "WriteError": ProviderConnectionError,
    "CloseError": ProviderConnectionError,
    "NetworkError": ProviderConnectionError,
    "RemoteProtocolError": ProviderConnectionError,
    "LocalProtocolError": ProviderConnectionError,
    "ProtocolError": ProviderConnectionError,
    "ProxyError": ProviderConnectionError,
    "UnsupportedProtocol": ProviderConnectionError,
    "TransportError": ProviderConnectionError,
    "InvalidURL": ProviderConnectionError,
    "HTTPStatusError": ServerError,
}


def test_every_httpx_exception_maps() -> None:
    """Each exception class httpx exports maps to a ProviderError child, as the table says."""
    classes = httpx_exception_classes()
    assert len(classes) >= 25
    for cls in classes:
        exc = instance(cls)
        assert is_client_error(exc), cls
        error = transport_error("openai", exc, "https://api.example.com/v1/x")
        assert isinstance(error, ProviderError), cls
        assert isinstance(error, ToolfoldError)
        expected = EXPECTED.get(cls.__name__, ProviderError)
        assert type(error) is expected, (cls, type(error))
        assert "openai" in str(error)


def test_while_streaming_lost_connections_are_stream_errors() -> None:
    """Once a stream started, a dropped connection or decoding failure is a StreamError."""
    for cls in (httpx.ReadError, httpx.RemoteProtocolError, httpx.DecodingError):
        error = transport_error("p", instance(cls), "u", streaming=True)
        assert type(error) is StreamError, cls
    assert type(transport_error("p", instance(httpx.ReadTimeout), "u", streaming=True)) is (
        ProviderTimeoutError
    )


def test_os_level_errors_map() -> None:
    """Errors from sockets (custom clients) map too: resets, refusals, builtin timeouts."""
    import builtins

    assert type(transport_error("p", ConnectionResetError(), "u")) is ProviderConnectionError
    assert type(transport_error("p", builtins.TimeoutError(), "u")) is ProviderTimeoutError
    assert not is_client_error(ValueError("a bug in user code"))


def test_lookalike_client_exceptions_map_by_name() -> None:
    """A client with httpx's API but its own exception classes (httpx2) maps by class name."""
    transport_errors = type("TransportError", (Exception,), {"__module__": "httpx2._exceptions"})
    read_timeout = type("ReadTimeout", (transport_errors,), {"__module__": "httpx2._exceptions"})
    timeout_root = type("TimeoutException", (transport_errors,), {"__module__": "httpx2"})
    exc = type("ReadTimeout", (timeout_root,), {"__module__": "httpx2"})("slow")
    assert is_client_error(exc)
    assert type(transport_error("p", exc, "u")) is ProviderTimeoutError
    assert type(transport_error("p", read_timeout("x"), "u")) is ProviderConnectionError


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (402, ProviderError),
        (403, AuthenticationError),
        (404, NotFoundError),
        (408, ProviderTimeoutError),
        (409, ProviderError),
        (413, BadRequestError),
        (422, BadRequestError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
        (504, ServerError),
        (529, ServerError),
    ],
)
def test_status_maps(status: int, expected: type[ProviderError]) -> None:
    """Each HTTP status maps to the documented child, carrying status, body and headers."""
    error = status_error("openai", status, "body", {"x-request-id": "r"}, ErrorInfo("said"), "u")
    assert type(error) is expected
    assert error.status_code == status
    assert error.body == "body"
    assert error.headers == {"x-request-id": "r"}
    assert error.provider_message == "said"
    assert f"HTTP {status}" in str(error)


def test_rate_limit_retry_after_from_header_or_body() -> None:
    """RateLimitError.retry_after comes from the headers, else from the body (Gemini)."""
    error = status_error("p", 429, "", {"retry-after": "7"}, ErrorInfo(retry_after=30.0), "u")
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 7.0
    error = status_error("p", 429, "", {}, ErrorInfo(retry_after=30.0), "u")
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 30.0


def test_groq_tool_use_failed() -> None:
    """Groq's 400 tool_use_failed becomes ToolUseFailedError with the raw generation."""
    body = json.dumps(
        {
            "error": {
                "message": "Tool call validation failed",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": '{"name": "x"}',
            }
        }
    )
    info = parse_error_body(400, body, {})
    error = status_error("groq", 400, body, {}, info, "u")
    assert isinstance(error, ToolUseFailedError)
    assert error.failed_generation == '{"name": "x"}'


@pytest.mark.parametrize(
    ("body", "message", "code", "kind"),
    [
        ('{"error": {"message": "m", "type": "t", "param": null, "code": "c"}}', "m", "c", "t"),
        ('{"object": "error", "message": "flat", "type": "t", "code": "3280"}', "flat", "3280", "t"),
        ('{"type": "error", "error": {"type": "overloaded_error", "message": "o"}}', "o", None, "overloaded_error"),
        ('[{"error": {"code": 400, "message": "g", "status": "INVALID_ARGUMENT"}}]', "g", "400", "INVALID_ARGUMENT"),
        ('{"error": {"code": 402, "message": "credits", "metadata": {}}}', "credits", "402", None),
        ('{"detail": "Not Found"}', "Not Found", None, None),
        ('{"error": "plain text error"}', "plain text error", None, None),
        ("<html>Bad gateway</html>", "<html>Bad gateway</html>", None, None),
        ("", None, None, None),
        # FastAPI's 422 (Mistral's documented HTTPValidationError, vLLM, proxies)
        ('{"detail": [{"loc": ["body", "messages", 0, "content"], "msg": "field required", "type": "value_error.missing"}]}',
         "body.messages.0.content: field required", None, None),
        # Mistral's 422, the same list inside "message"
        ('{"object": "error", "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "foo"], "msg": "Extra inputs are not permitted", "input": 1}]}, "type": "invalid_request_error", "param": null, "code": null}',
         "body.foo: Extra inputs are not permitted", None, "invalid_request_error"),
        ('{"error": {"message": {"detail": {"loc": "query", "msg": "bad"}}}}', "query: bad", None, None),
        ('{"detail": ["not a dict", {"msg": "no loc"}, {"loc": ["body"]}]}', "not a dict; no loc", None, None),
        # no message at all: the start of the body
        ('{"error": {"message": null, "type": "invalid_request_error", "code": "bad"}}',
         '{"error": {"message": null, "type": "invalid_request_error", "code": "bad"}}', "bad", "invalid_request_error"),
        ('{"detail": []}', '{"detail": []}', None, None),
        ('{"error": {"message": ""}}', '{"error": {"message": ""}}', None, None),
    ],
)  # fmt: skip
def test_error_body_shapes(
    body: str, message: str | None, code: str | None, kind: str | None
) -> None:
    """OpenAI, Mistral, Anthropic, Gemini (list-wrapped), OpenRouter and odd bodies are all read."""
    info = parse_error_body(400, body, {})
    assert (info.message, info.code, info.type) == (message, code, kind)


def test_a_long_validation_error_list_is_bounded() -> None:
    """A 422 listing many errors says the first five and counts the rest, in 500 characters at most."""
    many = {"detail": [{"loc": ["body", f"f{i}"], "msg": "field required"} for i in range(9)]}
    said = parse_error_body(422, json.dumps(many), {}).message
    assert said == "; ".join(f"body.f{i}: field required" for i in range(5)) + "; and 4 more"
    huge = {"detail": [{"loc": ["body"], "msg": "x" * 2_000}]}
    said = parse_error_body(422, json.dumps(huge), {}).message or ""
    assert len(said) == 500
    assert said.startswith("body: xxx")
    assert said.endswith("x\u2026")


def test_a_body_with_no_message_is_quoted_to_500_characters() -> None:
    """With no message in a JSON body, its start is the message: 500 characters, the
    last an ellipsis that says it was cut."""
    body = json.dumps({"error": {"message": None, "padding": "p" * 1_000}})
    error = status_error("p", 400, body, {}, parse_error_body(400, body, {}), "u")
    assert error.provider_message == f"{body[:499]}\u2026"
    assert str(error) == f"p returned HTTP 400 for POST u: {body[:499]}\u2026"
    short = '{"error": {"message": null}}'
    assert parse_error_body(400, short, {}).message == short  # whole: no ellipsis


@pytest.mark.parametrize("control", ["\x1b", "\x00", "\x7f", "\x9b", "\u202e"])
def test_a_quoted_body_shows_its_control_characters_escaped(control: str) -> None:
    """A body quoted for want of a message writes its control characters (a terminal's
    colour or erase sequence, a bidi override) as visible escapes, still 500 characters
    at most and never cut inside an escape."""
    said = parse_error_body(502, f"<p>{control}[31mred</p>", {}).message
    assert said == f"<p>{one_line(control)}[31mred</p>"
    long = parse_error_body(502, control * 1_000, {}).message or ""
    assert len(long) <= 500
    assert long == one_line(control) * (499 // len(one_line(control))) + "\u2026"


def test_a_quoted_body_reads_on_one_line() -> None:
    """A pretty-printed JSON body (or an HTML page) with no message is quoted on one
    line, each run of whitespace one space, still 500 characters at most."""
    body = json.dumps({"error": {"code": 5, "status": "UNAVAILABLE"}}, indent=2)
    info = parse_error_body(503, body, {})
    assert info.message == '{ "error": { "code": 5, "status": "UNAVAILABLE" } }'
    assert info.quoted
    page = "<html>\r\n  <body>\n\t<h1>502 Bad Gateway</h1>\u2028</body>\n</html>\n" * 40
    said = parse_error_body(502, page, {}).message or ""
    assert said.startswith("<html> <body> <h1>502 Bad Gateway</h1> </body> </html> <html> <body>")
    assert len(said) == 500
    assert said.splitlines() == [said]
    assert not parse_error_body(400, '{"error": {"message": "bad"}}', {}).quoted


#: A key a redirect's location holds (a server echoing it into a URL).
_KEY = "sk-proj-REDIRECTED0123456789abcdefXYZ"

#: Where the key starts in `test_a_redirect_names_where_it_leads`'s long location: the
#: 500-character cut falls inside it.
_CUT_AT = 499 - 10


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("https://new.example/v1/chat/completions", "https://new.example/v1/chat/completions"),
        ("/v1/chat/completions", "https://old.example/v1/chat/completions"),
        (
            "https://bob:pw-1234@new.example/v1?key=sk-abcdef&alt=sse#tok",
            "https://***@new.example/v1?key=***&alt=***#***",
        ),
        # urllib refuses these (an unclosed "["; on recent Pythons a bracketed host, no IP)
        ("http://[::1/v1", "http://[::1/v1"),
        ("http://[zz]/", "http://[zz]/"),
        (f"http://[{_KEY}]/v1", "http://[***]/v1"),
        # control characters as visible escapes: one line, no terminal sequence
        ("https://new.example/v1\x1b[31mRED\u202e", "https://new.example/v1\\x1b[31mRED\\u202e"),
        # 500 characters at most, a key masked before the cut (not its start left by it)
        (
            "https://new.example/" + "a" * 30_000,
            ("https://new.example/" + "a" * 30_000)[:499] + "\u2026",
        ),
        (
            f"https://new.example/{'a' * (_CUT_AT - 20)}{_KEY}/v1",
            f"https://new.example/{'a' * (_CUT_AT - 20)}***/v1",
        ),
        (
            f"https://new.example/{'a' * (_CUT_AT - 20)}{_KEY}{'b' * 600}",
            f"https://new.example/{'a' * (_CUT_AT - 20)}***{'b' * 7}\u2026",
        ),
        # escaped first, then cut: 500 characters at most, no escape cut in two
        (
            "https://new.example/" + "\u202e" * 1_000,
            "https://new.example/" + "\\u202e" * 79 + "\u2026",
        ),
        (
            "https://new.example/" + "\x1b" * 1_000,
            "https://new.example/" + "\\x1b" * 119 + "\u2026",
        ),
    ],
)
def test_a_redirect_names_where_it_leads(location: str, shown: str) -> None:
    """A 3xx names its location (absolute; userinfo, query values, fragment and the
    key masked; cut to 500 characters; escaped) and what to do; reading it never raises."""
    headers = {"Location": location}
    url = "https://old.example/chat/completions"
    error = status_error("p", 301, "", headers, ErrorInfo(), url, (Secret(_KEY),))
    assert type(error) is ProviderError
    assert str(error) == (
        f"p returned HTTP 301 for POST https://old.example/chat/completions (redirected to "
        f"{shown}; toolfold follows no redirect: point base_url= at the new address)"
    )
    assert "pw-1234" not in str(error)
    assert "sk-abcdef" not in str(error)
    assert "sk-proj" not in str(error)  # nor a start of the key


@pytest.mark.parametrize("status", [301, 307, 300, 305])
def test_a_redirect_a_users_client_raised_for_shows_its_location_masked(status: int) -> None:
    """A user's client that raises on the status (raise_for_status in an event hook):
    httpx's text of a 3xx quotes its location raw (password, query values, control
    characters, a newline, uncut, a key's start at any cut); the error names it as for
    any 3xx, masked (the key too, before the cut), escaped and cut, on one line."""
    start, shown = (
        "https://bob:hunter2pass@new.example/v1/\x1b[31m\n",
        "https://***@new.example/v1/\\x1b[31m",
    )
    pad = "a" * (_CUT_AT - len(shown))  # the key where the 500-character cut falls
    location = f"{start}{pad}{_KEY}{'b' * 3_000}?session=OTHERTOKEN"
    request = httpx.Request("POST", "https://old.example/v1/chat/completions")
    response = httpx.Response(status, headers={"location": location}, request=request)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        response.raise_for_status()
    url = "https://old.example/v1/chat/completions"
    error = transport_error("p", raised.value, url, secrets=(Secret(_KEY),))
    expected = status_error("p", status, "", response.headers, ErrorInfo(), url, (Secret(_KEY),))
    assert (type(error), str(error)) == (type(expected), str(expected))
    text = str(error)
    assert "new.example" in text
    for hidden in ("hunter2pass", "OTHERTOKEN", "\x1b", "\n", "sk-proj"):
        assert hidden not in text
    assert len(text) < 700


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (308, "a redirect with no location header; toolfold follows no redirect: point base_url= "
              "at the new address"),
        (300, "multiple choices with no location header; toolfold follows no redirect: point "
              "base_url= at the new address"),
        (305, "no location header; toolfold follows no redirect: point base_url= at the new "
              "address"),
        (304, "Not Modified: the answer to a conditional request, which toolfold does not make; "
              "a cache or proxy between it and the provider may have sent it"),
    ],
)  # fmt: skip
def test_a_redirect_without_a_location_says_so(status: int, said: str) -> None:
    """A 3xx with no location header still says toolfold follows none, and what to do;
    a 304 is no redirect, whatever its headers."""
    error = status_error("p", status, "", {}, ErrorInfo(), "u")
    assert str(error) == f"p returned HTTP {status} for POST u ({said})"
    with_location = status_error("p", 304, "", {"location": "/v2"}, ErrorInfo(), "u")
    assert "/v2" not in str(with_location)


def test_a_300_names_its_preferred_choice() -> None:
    """A 300 Multiple Choices with a location names it as the preferred choice."""
    error = status_error("p", 300, "", {"location": "/v2"}, ErrorInfo(), "https://h/v1")
    assert str(error) == (
        "p returned HTTP 300 for POST https://h/v1 (multiple choices, the preferred one at "
        "https://h/v2; toolfold follows no redirect: point base_url= at the new address)"
    )


def test_gemini_retry_info_and_daily_quota() -> None:
    """Gemini's RetryInfo gives retry_after; a per-day QuotaFailure is marked not retryable."""
    details: list[Any] = [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
        },
    ]
    body = json.dumps({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": details}})
    info = parse_error_body(429, body, {})
    assert info.retry_after == 37.0
    assert info.retryable is False
    per_minute = body.replace("PerDay", "PerMinute")
    assert parse_error_body(429, per_minute, {}).retryable is None


def test_a_per_day_quota_keeps_its_verdict_and_no_wait() -> None:
    """A per-day 429 says so on the error (retryable False, no retry_after): its retryDelay of 1 s invited a retry every second."""
    details: list[Any] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"},
    ]
    body = json.dumps({"error": {"code": 429, "message": "quota", "details": details}})
    info = parse_error_body(429, body, {})
    error = status_error("gemini", 429, body, {}, info, "https://h/v1")
    assert isinstance(error, RateLimitError)
    assert (error.retryable, error.retry_after) == (False, None)
    assert "asking again fails the same way" in str(error)
    assert gives_up(error)
    per_minute = body.replace("PerDay", "PerMinute")
    error = status_error("gemini", 429, per_minute, {}, parse_error_body(429, per_minute, {}), "u")
    assert (error.retryable, error.retry_after) == (None, 1.0)
    assert not gives_up(error)


@pytest.mark.parametrize("status", [500, 503, 529])
def test_a_server_error_keeps_its_retry_after(status: int) -> None:
    """A 5xx's retry-after is on the ServerError (as a 429's is): with retry=0 it was lost."""
    info = parse_error_body(status, "", {})
    error = status_error("p", status, "", {"retry-after": "300"}, info, "https://h/v1")
    assert isinstance(error, ServerError)
    assert error.retry_after == 300.0
    assert error.retryable is None


def test_x_should_retry_is_the_error_s_verdict() -> None:
    """x-should-retry is kept on the error, as the transport read it (false wins over the
    class; true does not lift a permanent one)."""
    info = parse_error_body(503, "", {})
    error = status_error("p", 503, "", {"x-should-retry": "false", "retry-after": "3"}, info, "u")
    assert (error.retryable, error.retry_after) == (False, None)
    assert gives_up(error)
    error = status_error("p", 400, "", {"x-should-retry": "true"}, info, "u")
    assert error.retryable is True
    # ...but true lifts no permanent class: under Temporal's default policy this 400 was
    # asked again without end
    assert gives_up(error)
    error = status_error("p", 503, "", {"x-should-retry": "true"}, info, "u")
    assert (error.retryable, gives_up(error)) == (True, False)


def recorded_errors() -> list[tuple[str, int, str]]:
    """Every recorded non-2xx response: (file, status, body text)."""
    import gzip

    found = []
    for path in sorted(FIXTURES.glob("*/*.yaml")):
        for interaction in yaml.safe_load(path.read_text()).get("interactions", []):
            response = interaction["response"]
            status = response["status"]["code"]
            if status < 400:
                continue
            if "parsed_body" in response:
                text = json.dumps(response["parsed_body"])
            else:
                raw = response["body"]["string"]
                if isinstance(raw, bytes):
                    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
                    raw = raw.decode()
                text = raw
            found.append((path.name, status, text))
    return found


def test_recorded_error_bodies_give_a_message() -> None:
    """Every recorded provider error body yields the provider's message and the right class."""
    errors = recorded_errors()
    assert len(errors) >= 5
    for name, status, text in errors:
        info = parse_error_body(status, text, {})
        assert info.message, name
        error = status_error("p", status, text, {}, info, "u")
        assert info.message in str(error)
        assert type(error) is not ProviderError or status not in (400, 401, 404, 429), name


def test_facade_exports_the_tree() -> None:
    """The error classes users catch are importable from toolfold."""
    for cls in (
        AuthenticationError,
        RateLimitError,
        StreamError,
        ProviderTimeoutError,
        ProviderConnectionError,
    ):
        assert getattr(toolfold, cls.__name__) is cls
        assert issubclass(cls, ProviderError)


def _chained(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


def test_only_a_parsers_own_error_is_a_malformed_answer() -> None:
    """aiohttp's ClientResponseError is a malformed answer only with its parser's error under
    it (a genuine status, from an injected session's raise_for_status, is not); a cut body
    (ClientPayloadError over TransferEncodingError) and httpcore's own disconnect are not."""
    info = aiohttp.RequestInfo(
        url=yarl.URL("http://h/v1"), method="POST", headers={}, real_url=None
    )
    parsed = http_exceptions.BadStatusLine("HTTP/1.1 2OO OK")
    refused = _chained(aiohttp.ClientResponseError(info, (), status=400, message="x"), parsed)
    assert malformed_answer(refused) == f"BadStatusLine: {' '.join(parsed.message.split())}"
    error = transport_error("p", refused, "http://h/v1")
    assert type(error) is ProviderConnectionError
    assert str(error).startswith("p at http://h/v1 sent a malformed HTTP answer: BadStatusLine")
    assert type(transport_error("p", refused, "u", streaming=True)) is StreamError

    genuine = aiohttp.ClientResponseError(info, (), status=400, message="Bad Request")
    assert malformed_answer(genuine) is None
    assert type(transport_error("p", genuine, "u")) is ProviderError

    cut = _chained(
        aiohttp.ClientPayloadError("not completed"), http_exceptions.TransferEncodingError("short")
    )
    assert malformed_answer(cut) is None
    assert type(transport_error("p", cut, "u")) is ProviderConnectionError

    request = httpx.Request("POST", "http://h/v1")
    lost = httpx.RemoteProtocolError(
        "Server disconnected without sending a response.", request=request
    )
    assert malformed_answer(lost) is None
    bad = _chained(
        httpx.RemoteProtocolError("illegal status line", request=request),
        h11.RemoteProtocolError("illegal status line"),
    )
    assert malformed_answer(bad) == "RemoteProtocolError: illegal status line"


def test_a_malformed_answer_the_caller_was_handling_does_not_make_the_next_one_malformed() -> None:
    """A call made inside ``except`` (retrying after a cut body, resuming ``err.state``) whose
    connection is lost carries the caught error as its ``__context__``: the walk stops at the
    first exception that is not the client's own, so the loss stays a loss (retried by the
    policy), not a malformed answer (never re-sent)."""
    request = httpx.Request("POST", "http://h/v1")
    caught = ProviderConnectionError("p at u cannot reach it", provider="p")
    caught.__cause__ = _chained(
        httpx.RemoteProtocolError("illegal chunk header", request=request),
        h11.RemoteProtocolError("illegal chunk header"),
    )
    lost = httpx.RemoteProtocolError(
        "Server disconnected without sending a response.", request=request
    )
    lost.__context__ = caught
    assert malformed_answer(lost) is None
    info = aiohttp.RequestInfo(
        url=yarl.URL("http://h/v1"), method="POST", headers={}, real_url=None
    )
    proxy = aiohttp.ClientHttpProxyError(info, (), status=407, message="Proxy Authentication")
    handled = ProviderConnectionError("p at u cannot reach it", provider="p")
    handled.__cause__ = _chained(
        aiohttp.ClientPayloadError("not completed"), http_exceptions.TransferEncodingError("short")
    )
    proxy.__context__ = handled
    assert malformed_answer(proxy) is None


_WINDOW_BODIES = {
    "openai:gpt-4o-mini": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "openai-responses:gpt-4o-mini": {
        "error": {
            "message": "Your input exceeds the context window of this model. Please adjust "
            "your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    },
    "anthropic:claude-sonnet-4-5": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    },
    "gemini:gemini-2.5-flash": {
        "error": {
            "code": 400,
            "message": "The input token count (1200000) exceeds the maximum number of tokens "
            "allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    },
    "ollama:llama3.1": {"error": "prompt too long; exceeded max context length by 100 tokens"},
}
# When max_tokens makes the overflow: the prompt alone fits, the prompt plus max_tokens not.
_WINDOW_BY_MAX_TOKENS = {
    "openai:gpt-4o-mini": {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, you "
            "requested 9000 tokens (100 in the messages, 8900 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
    "anthropic:claude-sonnet-4-5": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 198000 + 8192 > "
            "200000, decrease input length or `max_tokens` and try again",
        },
    },
}


@pytest.mark.parametrize("name", sorted(_WINDOW_BODIES))
def test_a_request_longer_than_the_context_window_is_one_error_class(
    http_server: Any, opened: list[Any], name: str
) -> None:
    """Each provider's context-window 400 is a ContextWindowExceededError (still a
    BadRequestError) whose message says to shorten the history: before, a plain
    BadRequestError with a code of each provider's own (or none)."""
    from scripted_http import Reply

    http_server.add(Reply(status=400, json=_WINDOW_BODIES[name]))
    suffix = "/v1" if name.startswith("openai") else ""
    model = toolfold.model(name, base_url=http_server.url + suffix, api_key="k" * 20, retry=0)
    opened.append(model)
    with pytest.raises(ContextWindowExceededError) as caught:
        toolfold.Agent(model).run("hi")
    assert isinstance(caught.value, BadRequestError)
    assert caught.value.status_code == 400
    assert "shorten the history" in str(caught.value)
    assert "lower max_tokens" in str(caught.value)
    assert caught.value.state is not None


# OpenAI-compatible servers and proxies, reached with the openai adapter and a base_url.
_COMPATIBLE_WINDOW_BODIES = {
    "OpenRouter": {
        "error": {
            "message": "This endpoint's maximum context length is 163840 tokens. However, you "
            "requested about 200000 tokens (190000 of text input, 10000 in the output). "
            'Please reduce the length of either one, or use the "middle-out" transform to '
            "compress your prompt automatically.",
            "code": 400,
        }
    },
    "LiteLLM proxy": {
        "error": {
            "message": "litellm.BadRequestError: OpenAIException - This model's maximum "
            "context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            "type": None,
            "param": None,
            "code": "400",
        }
    },
    "llama.cpp llama-server": {
        "error": {
            "code": 400,
            "message": "request (4476 tokens) exceeds the available context size (4096 "
            "tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 4476,
            "n_ctx": 4096,
        }
    },
}


@pytest.mark.parametrize("server", sorted(_COMPATIBLE_WINDOW_BODIES))
def test_an_openai_compatible_server_s_context_window_error_is_one_error_class(
    http_server: Any, opened: list[Any], server: str
) -> None:
    """OpenRouter's "This endpoint's maximum context length", a LiteLLM proxy's wrapped
    OpenAI message and llama-server's ``exceed_context_size_error`` type are each a
    ContextWindowExceededError: before, a plain BadRequestError (the wording was anchored
    to "this model's" at the message's start or after a sentence)."""
    from scripted_http import Reply

    http_server.add(Reply(status=400, json=_COMPATIBLE_WINDOW_BODIES[server]))
    model = toolfold.model(
        "openai:gpt-4o-mini", base_url=http_server.url + "/v1", api_key="k" * 20, retry=0
    )
    opened.append(model)
    with pytest.raises(ContextWindowExceededError) as caught:
        toolfold.Agent(model).run("hi")
    assert caught.value.status_code == 400
    assert "shorten the history" in str(caught.value)


@pytest.mark.parametrize("name", sorted(_WINDOW_BY_MAX_TOKENS))
def test_a_context_window_overflowed_by_max_tokens_says_to_lower_it(
    http_server: Any, opened: list[Any], name: str
) -> None:
    """A window the prompt plus max_tokens overflows is a ContextWindowExceededError whose
    advice names max_tokens: before, it said only to shorten the history (which may be
    100 tokens), and Anthropic's wording was a plain BadRequestError."""
    from scripted_http import Reply

    http_server.add(Reply(status=400, json=_WINDOW_BY_MAX_TOKENS[name]))
    suffix = "/v1" if name.startswith("openai") else ""
    model = toolfold.model(name, base_url=http_server.url + suffix, api_key="k" * 20, retry=0)
    opened.append(model)
    with pytest.raises(ContextWindowExceededError) as caught:
        toolfold.Agent(model).run("hi")
    assert "prompt plus the max_tokens" in str(caught.value)
    assert "lower max_tokens" in str(caught.value)


@pytest.mark.parametrize(
    "message",
    [
        "Invalid 'tools[0].name'",
        # Each mentions a prompt, a context or a maximum, but no overflow of the window:
        # before, the words matched anywhere in the message and made these window errors.
        "Invalid value for 'stop': the prompt is too long for a stop sequence",
        "Unsupported parameter: 'max_context_length' exceeds the context window setting",
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens",
        "The system prompt is too long: shorten it to 2048 characters",
        "'tools' exceeds the maximum context length of 128 tool definitions",
    ],
)
def test_another_bad_request_is_no_context_window_error(message: str) -> None:
    """A 400 that does not say the context window overflowed stays a plain BadRequestError."""
    body = json.dumps({"error": {"message": message, "code": "invalid_value"}})
    error = status_error("openai", 400, body, {}, parse_error_body(400, body, {}), "http://h/v1")
    assert type(error) is BadRequestError
