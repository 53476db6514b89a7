"""The one check of a TCP port number, shared by ``toolfold.mcp`` and ``toolfold.local``."""

from __future__ import annotations


def port_problem(port: object) -> str | None:
    """Why ``port`` is not a port to listen on, or None when it is one.

    A port is an ``int`` (not a ``bool``, a float or a string) from 0 to 65535;
    0 lets a free one be picked. The callers raise their own error with the text.
    """
    if isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535:
        return None
    return (
        f"port {port!r} is not a port: a port is a whole number from 0 to 65535 "
        "(0: a free one is picked)"
    )
