"""The counts of the reliability suite's generated runs: property tests, fuzz families, soak.

    .venv/bin/python bench/bench_counts.py [--only property,fuzz,soak]

Runs the tests themselves (pytest in a subprocess, the suite's own budgets
and seeds) and prints what they report, so the figures are those of the
definitions CI runs, not a copy of them:

- property: every Hypothesis test under ``tests/``, with Hypothesis's own
  statistics (examples passed, and why it stopped), and the reducer's state
  machine (``tests/runtime/test_reduce_stateful.py``): its examples and the
  events it fed ``reduce``, accepted and refused;
- fuzz: the inputs of each family of ``tests/adapters/test_fuzz_public_api.py``
  and what they gave;
- soak: the runs per backend of ``tests/adapters/test_soak.py`` and the faults
  drawn (rounds of 1,000 concurrent runs a backend; ``bench_soak.py`` prints each round).

The soak takes a few minutes on a loaded 2-core machine; ``--only`` picks parts.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PARTS = ("property", "fuzz", "soak")


def pytest_output(*args: str) -> str:
    """Run pytest (``-s``: the tests' own prints) from the project root; its output."""
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"pytest failed: {' '.join(args)}")
    return done.stdout


def printed(output: str, pattern: str) -> list[str]:
    """The lines the tests printed that match ``pattern`` (pytest's progress dots stripped)."""
    return [m.group(0) for line in output.splitlines() if (m := re.search(pattern, line))]


def property_files() -> list[str]:
    """The test files that use Hypothesis."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in TESTS.rglob("test_*.py")
        if re.search(r"^from hypothesis|^import hypothesis", path.read_text(), re.MULTILINE)
    )


def properties() -> None:
    output = pytest_output("--hypothesis-show-statistics", *property_files())
    print("property tests: examples passed (Hypothesis statistics), and why each stopped")
    test = passed = None
    rows = []
    for line in output.splitlines():
        if line.startswith("tests/") and line.endswith(":"):
            test, passed = line[:-1], None
        elif m := re.search(r"(\d+) passing, (\d+) failing, and (\d+) invalid", line):
            passed = int(m.group(1)) if passed is None else passed + int(m.group(1))
        elif (m := re.search(r"Stopped because (.*)", line)) and test is not None:
            rows.append((test, passed or 0, m.group(1)))
            test = None
    for name, count, why in rows:
        print(f"  {count:6d}  {name}  ({why})")
    total = sum(count for _, count, _ in rows)
    print(f"  {total:6d}  examples in {len(rows)} property tests")
    for line in printed(output, r"reduce state machine: .*"):
        print(f"  {line}")


def fuzz() -> None:
    output = pytest_output("tests/adapters/test_fuzz_public_api.py")
    print("fuzz families (tests/adapters/test_fuzz_public_api.py): inputs -> outcomes")
    lines = printed(output, r"[\w-]+: \d+ inputs -> \{.*\}")
    for line in lines:
        print(f"  {line}")
    counts = [int(m.group(1)) for line in lines if (m := re.search(r": (\d+) inputs", line))]
    print(f"  {sum(counts)} inputs in {len(lines)} families")


def soak() -> None:
    output = pytest_output("tests/adapters/test_soak.py")
    print("soak (tests/adapters/test_soak.py): concurrent faulty runs per backend")
    for line in printed(output, r"soak \w+: .*"):
        print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS), help="parts: property,fuzz,soak")
    only = parser.parse_args().only.split(",")
    for part, run in (("property", properties), ("fuzz", fuzz), ("soak", soak)):
        if part in only:
            run()
            print(flush=True)


if __name__ == "__main__":
    main()
