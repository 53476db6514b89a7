"""A local Ray for the integration tests: started once, loopback only, shut down at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Ray reads this when it is imported: off, a local cluster binds 127.0.0.1 instead of
# the machine's address (as on macOS), so the tests touch no network but loopback.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A Ray cluster on this machine (2 CPUs, no dashboard); yields its GCS address."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()
