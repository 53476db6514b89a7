"""Large payloads by reference: a local-file driver for Temporal's external storage.

Temporal keeps every payload (a tool's result, the state a model request
carries) in the workflow's history, at most 2 MB each. Temporal's external
storage (``DataConverter(external_storage=ExternalStorage(drivers=[...]))``)
puts the payloads over a threshold in a blob store and keeps a reference in
the history instead; ``temporalio.contrib`` has drivers for S3 and Google
Cloud Storage. `FileStorageDriver` is the same for a directory every worker
and client can read: a shared volume, or one machine in development and tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

_KEY = re.compile(r"[0-9a-f]{64}")


class FileStorageDriver(StorageDriver):
    """Keeps Temporal payloads as files in ``directory``, one per distinct payload.

    A payload is stored under the SHA-256 of its bytes, so storing it again
    (an activity retried, a workflow replayed) writes nothing new. Nothing is
    ever deleted: clean the directory by age when no run can still need it.

    Example:
        >>> storage = ExternalStorage(drivers=[FileStorageDriver("/mnt/shared/payloads")])
        >>> client = await Client.connect(address, plugins=[ToolfoldPlugin(agents, external_storage=storage)])

    Args:
        directory: Where the files go (created if missing).
        driver_name: The name references carry; a reader needs a driver of
            the same name.
    """

    def __init__(
        self, directory: str | os.PathLike[str], driver_name: str = "toolfold.file"
    ) -> None:
        self._directory = Path(directory)
        self._name = driver_name

    def name(self) -> str:
        """The name stored in references."""
        return self._name

    def type(self) -> str:
        """The driver's kind."""
        return "toolfold.file"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """Write each payload to its file; their claims."""
        return await asyncio.to_thread(self._store, payloads)

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """Read each claimed payload back."""
        return await asyncio.to_thread(self._retrieve, claims)

    def _store(self, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        self._directory.mkdir(parents=True, exist_ok=True)
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            key = hashlib.sha256(data).hexdigest()
            path = self._directory / key
            if not path.exists():
                partial = path.with_name(f"{key}.{os.getpid()}.partial")
                partial.write_bytes(data)
                partial.replace(path)  # atomic: a reader never sees half a payload
            claims.append(StorageDriverClaim({"key": key}))
        return claims

    def _retrieve(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        found = []
        for claim in claims:
            key = claim.claim_data.get("key", "")
            if not _KEY.fullmatch(key):  # a reference names a file of this directory only
                raise ValueError(f"not a payload reference of a FileStorageDriver: {key!r}")
            path = self._directory / key
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"payload {key} is not in {self._directory}: every worker and client "
                    "needs the same directory"
                ) from None
            found.append(Payload.FromString(data))
        return found
