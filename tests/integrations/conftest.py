"""A local Ray for the integration tests: started once, loopback only, shut down at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# tests/conftest.py sets RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before anything imports Ray,
# so this cluster binds 127.0.0.1 only.


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A Ray cluster on this machine (2 CPUs, no dashboard); yields its GCS address."""
    import ray

    if not ray.is_initialized():  # docs/ray.md's block starts the same one when it runs first
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()
