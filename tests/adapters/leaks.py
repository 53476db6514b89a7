"""Everything an error shows, for tests that a secret (an API key, a URL's password) is not in it."""

from __future__ import annotations

import traceback


def chain(error: BaseException) -> list[BaseException]:
    """``error`` and every exception under it (``__cause__`` and ``__context__``), once each."""
    found: list[BaseException] = []
    stack: list[BaseException | None] = [error]
    while stack:
        exc = stack.pop()
        if exc is None or any(exc is seen for seen in found):
            continue
        found.append(exc)
        stack += [exc.__cause__, exc.__context__]
    return found


def every_text(error: BaseException) -> str:
    """Everything an error chain shows: str, repr, args, attributes, held request headers, traceback."""
    pieces = ["".join(traceback.format_exception(type(error), error, error.__traceback__))]
    for exc in chain(error):
        pieces += [str(exc), repr(exc), repr(exc.args)]
        for value in vars(exc).values():
            pieces.append(repr(value))
            headers = getattr(value, "headers", None)
            if headers is not None:
                pieces.append(repr(dict(headers.items())))
        request = getattr(exc, "_request", None)
        if request is not None:
            pieces.append(repr(dict(request.headers.items())))
    return "\n".join(pieces)
