"""What an MCP server's agent-file entry must not hold: what may be a credential.

An agent file is text that gets shared, so `MCPServer.file_entry` refuses a
server holding what may be a credential. The functions here find it and name
it, and where it is, never its value: the refusal is an error message, shown
and logged.
"""

from __future__ import annotations

from toolfold.adapters._http._keys import url_userinfo


def url_held(url: str) -> list[str]:
    """What in ``url`` may be a credential, each named without its value (empty: nothing).

    Read as `mask_url_credentials` masks it: the ``user:password@``, the
    query values (named by their parameters; a piece without ``=`` is itself
    the value, ``?sk-...``, so it is only counted), and the fragment.
    """
    held = ["a user:password@"] if url_userinfo(url) is not None else []
    head, _, fragment = url.partition("#")
    pieces = [piece for piece in head.partition("?")[2].split("&") if piece]
    names = [piece.partition("=")[0] for piece in pieces if "=" in piece]
    bare = len(pieces) - len(names)
    if pieces:
        shown = [*names, f"{bare} without a name"] if bare else names
        held.append(f"query values ({', '.join(shown)})")
    if fragment:
        held.append("a fragment")
    return held
