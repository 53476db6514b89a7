"""Load the recorded provider traffic in ``../shared/fixtures/provider-traffic``.

Follows the fixture README's rules: prefer ``parsed_body``; else take ``body``
(request) or ``body.string`` (response); bytes are gunzipped when they start
with ``1f 8b`` and decoded as UTF-8; a mapping is re-encoded as JSON.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
TRAFFIC = FIXTURES / "provider-traffic"
SPECS = FIXTURES / "specs"

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader


@attrs.frozen
class Exchange:
    """One recorded HTTP exchange.

    Attributes:
        method: The request method.
        uri: The request URI.
        request_text: The request body as text ("" when none).
        status: The response status code.
        response_headers: Response headers, names lower-cased, values joined by ", ".
        response_text: The response body as text (gunzipped when stored compressed).
    """

    method: str
    uri: str
    request_text: str
    status: int
    response_headers: Mapping[str, str]
    response_text: str

    @property
    def request_json(self) -> Any:
        """The request body parsed as JSON."""
        return json.loads(self.request_text)

    @property
    def response_json(self) -> Any:
        """The response body parsed as JSON."""
        return json.loads(self.response_text)

    @property
    def is_stream(self) -> bool:
        """The response is an SSE stream."""
        return "text/event-stream" in self.response_headers.get("content-type", "")


def body_text(value: Any) -> str:
    """A stored body as text, whatever dialect stored it."""
    if value is None:
        return ""
    if isinstance(value, Mapping) and set(value) == {"string"}:
        value = value["string"]
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    if isinstance(value, (Mapping, list)):
        return json.dumps(value)
    return str(value)


def _headers(raw: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, values in (raw or {}).items():
        out[str(name).lower()] = (
            ", ".join(str(v) for v in values) if isinstance(values, list) else str(values)
        )
    return out


def _side(side: Mapping[str, Any]) -> str:
    if "parsed_body" in side:
        return body_text(side["parsed_body"])
    return body_text(side.get("body"))


@functools.cache
def load(relative: str) -> tuple[Exchange, ...]:
    """The exchanges of ``provider-traffic/<relative>``, in recorded order."""
    data = yaml.load((TRAFFIC / relative).read_text(encoding="utf-8"), Loader=_Loader)
    exchanges = []
    for item in data["interactions"]:
        request, response = item["request"], item["response"]
        exchanges.append(
            Exchange(
                method=request.get("method", "POST"),
                uri=request["uri"],
                request_text=_side(request),
                status=int(response["status"]["code"]),
                response_headers=_headers(response.get("headers")),
                response_text=_side(response),
            )
        )
    return tuple(exchanges)


def folder(name: str) -> list[str]:
    """The cassettes of one provider-API folder, as ``folder/file.yaml`` names."""
    return sorted(f"{name}/{p.name}" for p in (TRAFFIC / name).glob("*.yaml"))
