"""A Temporal payload converter that speaks toolfold's one cattrs converter.

Modelled on ``temporalio.contrib.pydantic``: the JSON converter of Temporal's
default composite is replaced by one that unstructures any value with
toolfold's converter (states, events, effects, messages...) and structures it
back by the type hint Temporal passes (workflow, activity, query and update
signatures).
"""

from __future__ import annotations

import json
from typing import Any

import temporalio.api.common.v1
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)

from toolfold.runtime.core._json_text import escape_lone_surrogates
from toolfold.runtime.core._serialize import structure, unstructure


class ToolfoldJSONPayloadConverter(EncodingPayloadConverter):
    """JSON payloads (``json/plain``) made and read with toolfold's cattrs converter."""

    @property
    def encoding(self) -> str:
        """See base class."""
        return "json/plain"

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        """``value`` as compact JSON (anything toolfold's converter unstructures).

        A lone surrogate (a tool's ``os.listdir()`` of a file name that is not
        UTF-8), which UTF-8 cannot encode, is written as a JSON escape, read back
        as it was: the activity's result is not lost. The rest of the text stays
        UTF-8, so the payload is the size `_within` counted.
        """
        plain = unstructure(value)
        data = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
        try:
            encoded = data.encode()
        except UnicodeEncodeError:  # only the lone surrogates escaped: the rest stays UTF-8
            encoded = escape_lone_surrogates(data).encode()
        return temporalio.api.common.v1.Payload(
            metadata={"encoding": self.encoding.encode()}, data=encoded
        )

    def from_payload(
        self, payload: temporalio.api.common.v1.Payload, type_hint: type | None = None
    ) -> Any:
        """The value of ``type_hint`` rebuilt from the payload (plain JSON data without one)."""
        data = json.loads(payload.data)
        if type_hint is None or type_hint is Any:
            return data
        return structure(data, type_hint)


class ToolfoldPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters with toolfold's JSON converter in place."""

    def __init__(self) -> None:
        json_converter = ToolfoldJSONPayloadConverter()
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


data_converter = DataConverter(payload_converter_class=ToolfoldPayloadConverter)
"""The data converter for clients and workers that run toolfold agents."""
