"""The fault matrix as a table: fault x mode x backend -> outcome.

    .venv/bin/python bench/bench_faults.py

Runs every cell of ``tests/adapters/fault_matrix.py`` (the reliability suite's
fault matrix, which ``tests/adapters/test_fault_matrix.py`` asserts) against
the fault server in its own process, and prints what each cell gave: the
error class, and whether the error's state resumed to the right answer with
the tool run once. A cell that breaks that promise is marked ``FAIL``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "adapters"))

from backends import OWNED  # noqa: E402
from fault_matrix import FAULTS, MODES, fault_server, run_cell  # noqa: E402


def main() -> None:
    columns = [(b, m) for b in OWNED for m in MODES if not (b == "aiohttp" and m == "blocking")]
    width = 26
    print("fault".ljust(16) + "".join(f"{b}/{m}".ljust(width) for b, m in columns))
    failures = 0
    with fault_server() as url:
        for fault in FAULTS:
            cells = []
            for backend, mode in columns:
                outcome = run_cell(url, backend, fault, mode)
                ok = outcome.ok(fault, mode)
                failures += not ok
                cells.append((outcome.cell() if ok else f"FAIL {outcome.cell()}").ljust(width))
            print(fault.ljust(16) + "".join(cells))
    print(f"\n{len(FAULTS) * len(columns)} cells, {failures} not as documented")
    print("resumed = err.state resumed to 'The sum is 5.' with the tool run once; retries off")


if __name__ == "__main__":
    main()
