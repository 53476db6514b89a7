"""Tool results with images or files, for every adapter: one walk over the parts.

A result's `ToolResultPart.parts` hold text, images and files in order. Each
adapter says how it writes text and how it writes one image or file; this
module walks the parts, and keeps two rules the same everywhere:

- a file whose type is text (``text/*``, JSON, XML...) goes as text, headed by
  its name and type, since every model reads text;
- an image of a type vision models do not read (SVG, TIFF...: anything
  outside `IMAGE_TYPES`), or an image or file the provider refuses
  (`ModelConfigError` from the adapter's encoder: an unsupported type, a URL
  where only inline data goes) goes as its one-line description instead of
  failing the request: a tool's output is not the caller's mistake, and the
  model still learns it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    describe_media,
)

#: The image types every provider's vision input takes.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-yaml")


#: File name extensions by media type, for `default_filename`.
_EXTENSIONS = {
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/csv": ".csv",
    "text/markdown": ".md",
    "text/html": ".html",
    "application/json": ".json",
    "application/xml": ".xml",
    "text/xml": ".xml",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/msword": ".doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
}


def default_filename(media_type: str) -> str:
    """The name an inline file without one is sent with: ``file`` and the media
    type's extension (``file.pdf``); ``file`` for a type not known here.

    OpenAI's Chat Completions and Responses APIs refuse inline ``file_data``
    without a ``filename`` (their spec marks it optional).
    """
    kind = media_type.split(";")[0].strip().lower()
    return "file" + _EXTENSIONS.get(kind, "")


def file_text(part: FilePart) -> str | None:
    """A text file's content headed by its name and type, or None for other files."""
    if part.data is None:
        return None
    kind = part.media_type.split(";")[0].strip().lower()
    if not (kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml"))):
        return None
    try:
        text = part.data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    name = f" {part.filename}" if part.filename else ""
    return f"[file{name}: {part.media_type}]\n{text}"


def result_items(
    result: ToolResultPart,
    text: Callable[[str], Any],
    media: Callable[[ImagePart | FilePart], Any],
) -> list[Any]:
    """The result's parts in a provider's format, in order (empty text left out)."""
    return media_items(result.parts, text, media)


def media_items(
    parts: Iterable[Part],
    text: Callable[[str], Any],
    media: Callable[[ImagePart | FilePart], Any],
) -> list[Any]:
    """Text, images and files in a provider's format, in order, by the module's rules.

    A result's parts, or those a tool message holds beside its results (sent
    the same way: a history is no more the caller's mistake than a tool's
    output). Empty text, and parts that are no text, image or file (a
    reasoning part), are left out.
    """
    items: list[Any] = []
    for part in parts:
        if isinstance(part, (ImagePart, FilePart)):
            inline = file_text(part) if isinstance(part, FilePart) else None
            if inline is not None:
                items.append(text(inline))
                continue
            if isinstance(part, ImagePart) and part.media_type not in IMAGE_TYPES:
                items.append(text(describe_media(part)))
                continue
            try:
                items.append(media(part))
            except ModelConfigError:
                items.append(text(describe_media(part)))
        elif isinstance(part, TextPart) and part.text:
            items.append(text(part.text))
    return items


def joins_run(message: Message) -> bool:
    """Whether ``message``, no tool message, joins the run of tool messages before it.

    For Chat Completions and Ollama, whose tool message holds one result: a
    user message holding results (a history in Anthropic's format) is sent as
    its results' tool messages, its other parts going with the run's
    (`beside_items`) in the user message after the run, as a tool message's
    do. So no user message comes between two tool messages, whichever of the
    run's messages holds results only.
    """
    return message.role == "user" and any(
        isinstance(part, ToolResultPart) for part in message.parts
    )


def beside_items(
    parts: Iterable[Part],
    has_results: bool,
    text: Callable[[str], Any],
    media: Callable[[ImagePart | FilePart], Any],
    role: str = "tool",
) -> list[Any]:
    """A tool message's parts beside its results, in a provider's format, in order.

    What Chat Completions and Ollama, whose tool message holds one result's
    text, send in a user message after the run of tool messages; a user
    message holding results (``role="user"``, a history in Anthropic's
    format) sends its other parts the same way. Text parts
    in a row are joined with nothing between, as a user message's text is on
    both; images and files go by `media_items`' rules (described, never
    failing the request, where the provider cannot take them).

    Raises:
        ModelConfigError: A part is a tool call, which belongs in an
            assistant message.
    """
    items: list[Any] = []
    pending: list[str] = []
    for part in parts:
        if isinstance(part, ToolCallPart):
            where = (
                "sits beside tool results"
                if has_results
                else f"is in a {role} message with no results"
            )
            raise ModelConfigError(
                f"a {role} message cannot carry a tool call: call {part.id!r} ({part.name}) "
                f"{where}; a call belongs in an assistant message"
            )
        if isinstance(part, TextPart):
            pending.append(part.text)
        elif isinstance(part, (ImagePart, FilePart)):
            if "".join(pending):
                items.append(text("".join(pending)))
            pending = []
            items.extend(media_items((part,), text, media))
    if "".join(pending):
        items.append(text("".join(pending)))
    return items


def media_of(result: ToolResultPart) -> list[ImagePart | FilePart]:
    """The images (of `IMAGE_TYPES`) and non-text files of a result.

    What a text-only tool message cannot hold; the rest of the result is in
    `text_of`.
    """
    return [
        part
        for part in result.parts
        if (isinstance(part, ImagePart) and part.media_type in IMAGE_TYPES)
        or (isinstance(part, FilePart) and file_text(part) is None)
    ]


def text_of(result: ToolResultPart) -> str:
    """The result as text: text files inline, images and other files described.

    What a provider whose tool message takes only text sends as its content.
    """
    if not result.parts:
        return result.content
    return "\n".join(result_items(result, lambda t: t, describe_media))
