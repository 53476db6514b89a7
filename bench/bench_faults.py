"""The fault matrix as tables: fault x mode x backend -> outcome, transport faults and tool faults.

    .venv/bin/python bench/bench_faults.py

Runs every cell of ``tests/adapters/fault_matrix.py`` (the transport faults,
which ``tests/adapters/test_fault_matrix.py`` asserts) and of
``tests/adapters/tool_fault_matrix.py`` (the tool faults, which
``tests/adapters/test_tool_fault_matrix.py`` asserts) against the fault server
in its own process, and prints what each cell gave. A transport cell: the
error class, whether the error's state resumed to the right answer with the
tool run once, and how many of the run's requests the server read. A tool
cell: whether the model read an error result and the run answered, or the
cancellation reached the caller and its state resumed. A cell that breaks the
documented promise is marked ``FAIL``; ``-`` is a cell that does not exist (a
blocking call is not cancelled, only a stream has a middle).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # (child_processes, which fault_matrix imports)
sys.path.insert(0, str(ROOT / "tests" / "adapters"))

from backends import OWNED  # noqa: E402
from fault_matrix import FAULTS, MODES, fault_server, run_cell  # noqa: E402
from tool_fault_matrix import FAULTS as TOOL_FAULTS  # noqa: E402
from tool_fault_matrix import run_tool_cell, tool_cells  # noqa: E402

COLUMNS = [(b, m) for b in OWNED for m in MODES if not (b == "aiohttp" and m == "blocking")]


def table(
    faults: tuple[str, ...],
    exists: Callable[[str, str, str], bool],
    cell: Callable[[str, str, str], tuple[bool, str]],
    width: int,
) -> tuple[int, int]:
    """Print one table; returns (cells, cells not as documented)."""
    print("fault".ljust(18) + "".join(f"{b}/{m}".ljust(width) + " " for b, m in COLUMNS))
    cells = failures = 0
    for fault in faults:
        texts = []
        for backend, mode in COLUMNS:
            if not exists(backend, fault, mode):
                texts.append("-".ljust(width) + " ")
                continue
            ok, text = cell(backend, fault, mode)
            cells += 1
            failures += not ok
            texts.append((text if ok else f"FAIL {text}").ljust(width) + " ")
        print(fault.ljust(18) + "".join(texts), flush=True)
    return cells, failures


def main() -> None:
    with fault_server() as url:

        def transport(backend: str, fault: str, mode: str) -> tuple[bool, str]:
            outcome = run_cell(url, backend, fault, mode)
            return outcome.ok(fault, mode), outcome.cell()

        def tool(backend: str, fault: str, mode: str) -> tuple[bool, str]:
            outcome = run_tool_cell(url, backend, fault, mode)
            return outcome.ok(fault), outcome.cell()

        print("transport faults (tests/adapters/test_fault_matrix.py)")
        cells, failures = table(FAULTS, lambda *_: True, transport, 32)
        print(f"{cells} cells, {failures} not as documented")
        print(
            "resumed = err.state resumed to 'The sum is 5.' with the tool run once; "
            "n read = the run's requests the server read (retries off); ConnectionError, "
            "TimeoutError, Malformed... = ProviderConnectionError, ProviderTimeoutError, "
            "MalformedResponseError\n"
        )
        print("tool faults (tests/adapters/test_tool_fault_matrix.py)")
        existing = set(tool_cells())
        cells, failures = table(TOOL_FAULTS, lambda *cell: cell in existing, tool, 27)
        print(f"{cells} cells, {failures} not as documented")
        print(
            "answered = the run answered 'The sum is 5.' after the model read the error result; "
            "cancelled, resumed = the CancelledError carried a state that resumed to it"
        )


if __name__ == "__main__":
    main()
