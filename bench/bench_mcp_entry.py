"""How long the agent-file credential checks take on long crafted values.

    .venv/bin/python bench/bench_mcp_entry.py

An MCP server entry's arguments, environment and URL are read by regular
expressions (``toolfold/mcp/_entry.py``) before an agent file is written. A
pattern with an ambiguous repeat takes time quadratic in a crafted value's
length (a Slack-like path of 20k characters once took 7-36 s). Each row
times the three checks (``path_tokens``, ``args_held``, ``env_held``) on one
crafted value at 5k, 10k and 20k characters: linear checks take about twice
as long each time the length doubles, quadratic ones four times.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from toolfold.mcp._entry import args_held, env_held, path_tokens

CRAFTED: dict[str, Callable[[int], str]] = {
    "Slack-like path": lambda n: "https://h/services/T0/B" + "0" * n + "/" + "a" * n + "!",
    "Slack-like team id": lambda n: "https://h/services/T" + "0" * n + "x",
    "runs of eyJ": lambda n: "https://h/" + "eyJ" * n,
    "user:password": lambda n: "a" * n + ":" + "b" * n,
    "dotted word": lambda n: "a." * n,
    "key glued to -k": lambda n: "-k" + "Ab1" * n,
}


def checked(value: str) -> float:
    """Seconds for the three checks of ``value`` (best of 3)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        path_tokens(value)
        args_held([value])
        env_held({"X": value})
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    sizes = (5_000, 10_000, 20_000)
    print(f"{'value':22s}" + "".join(f"{n:>12,d}" for n in sizes) + "   last / first")
    for name, make in CRAFTED.items():
        times = [checked(make(n)) for n in sizes]
        row = "".join(f"{t * 1e3:10.1f}ms" for t in times)
        print(f"{name:22s}{row}   {times[-1] / times[0]:5.1f}x (linear: 4x)")


if __name__ == "__main__":
    main()
