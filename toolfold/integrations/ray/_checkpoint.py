"""The checkpoint file: one JSON line per finished input, after a header line.

    {"toolfold_batch": 1, "batch_id": "9f2c...", "inputs": 500}
    {"index": 3, "input": "5d41...", "state": {...RunState.to_json()...}}
    {"index": 7, "input": "0cc1...", "error": {"type": ..., "message": ..., ...}}

Only the driver writes, one whole line at a time, flushed: a driver killed at
any point leaves every finished line readable, and at worst one cut-off last
line, which the next run drops. A later line for an index replaces an earlier
one (an error retried by a rerun).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from toolfold._errors import UsageError
from toolfold._flock import try_lock
from toolfold.runtime import Message, converter
from toolfold.runtime._task import plain_data

FORMAT = 1


def input_digest(prompt: Any) -> str:
    """A short fingerprint of one input, to tell a checkpoint of other inputs apart.

    Text, a `Message`, messages, or (a workflow's input) any plain data.
    """
    if isinstance(prompt, str):
        text = prompt
    elif isinstance(prompt, Message):
        text = _json(converter.unstructure(prompt, Message))
    elif isinstance(prompt, list | tuple) and all(isinstance(m, Message) for m in prompt):
        text = _json([converter.unstructure(m, Message) for m in prompt])
    else:
        text = "data:" + _json(plain_data(prompt))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=str)


class Checkpoint:
    """An open checkpoint file: the lines found in it, and an appender for new ones."""

    def __init__(self, path: Path, batch_id: str, found: dict[int, Mapping[str, Any]]) -> None:
        self.path = path
        self.batch_id = batch_id
        self.found = found
        self._file: IO[str] | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], digests: list[str]) -> Checkpoint:
        """Lock ``path`` (created if missing) and read it for these inputs, ready to append.

        The file stays locked (an exclusive ``flock``) until `close`: a second
        `run_batch` on the same file, in another process or thread, would run
        every input again (each paid for twice) and append its own lines. On
        NFS or CIFS (``flock`` emulated with POSIX locks, held per process)
        another thread of the same process is not kept out.

        Raises:
            UsageError: The file is in use by another `run_batch`, is not a
                checkpoint, or was written for other inputs.
        """
        path = Path(path)
        handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            if try_lock(handle) == "held":  # ("no lock": a file system without locks)
                raise UsageError(
                    f"checkpoint {path} is in use by another run_batch (its driver holds "
                    "the file's lock until the batch ends): wait for it to end, or pass "
                    "another checkpoint path"
                )
            checkpoint = cls._read(path, handle, digests)
        except BaseException:
            os.close(handle)
            raise
        checkpoint._file = os.fdopen(handle, "a", encoding="utf-8")
        if os.fstat(handle).st_size == 0:  # a new file: its header first
            header = {"toolfold_batch": FORMAT, "batch_id": checkpoint.batch_id}
            checkpoint._write({**header, "inputs": len(digests)})
        return checkpoint

    @classmethod
    def _read(cls, path: Path, handle: int, digests: list[str]) -> Checkpoint:
        """The checkpoint of the file open (and locked) at ``handle``; a cut-off last line dropped."""
        raw = _read_all(handle)
        if not raw:
            return cls(path, uuid.uuid4().hex, {})
        complete = raw[: raw.rfind(b"\n") + 1]  # a line cut off by a crash is dropped
        lines = complete.decode("utf-8").splitlines()
        header = _parse(path, 1, lines[0]) if lines else {}
        if header.get("toolfold_batch") != FORMAT or not isinstance(header.get("batch_id"), str):
            raise UsageError(
                f"{path} is not a toolfold batch checkpoint (its first line is no header)"
            )
        if header.get("inputs") != len(digests):
            raise UsageError(
                f"checkpoint {path} was written for {header.get('inputs')} inputs, this batch has "
                f"{len(digests)}; pass a new checkpoint path or delete the file"
            )
        found: dict[int, Mapping[str, Any]] = {}
        for number, line in enumerate(lines[1:], start=2):
            record = _parse(path, number, line)
            index = record.get("index")
            if not isinstance(index, int) or not 0 <= index < len(digests):
                raise UsageError(f"{path}, line {number}: no valid input index")
            if record.get("input") != digests[index]:
                raise UsageError(
                    f"checkpoint {path} was written for other inputs: input {index} differs "
                    "from the one it recorded; pass a new checkpoint path or delete the file"
                )
            found[index] = record
        if len(complete) != len(raw):
            os.ftruncate(handle, len(complete))
        return cls(path, header["batch_id"], found)

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one finished input's line."""
        self._write(record)

    def append_state(self, index: int, digest: str, state_json: str) -> None:
        """Add the line of an input that finished, its state given as JSON text (kept as is)."""
        self._line(f'{{"index":{index},"input":{json.dumps(digest)},"state":{state_json}}}')

    def _write(self, record: Mapping[str, Any]) -> None:
        self._line(json.dumps(record, separators=(",", ":")))

    def _line(self, text: str) -> None:
        assert self._file is not None
        self._file.write(text + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def _read_all(handle: int) -> bytes:
    """The whole file open at ``handle``, read from its start."""
    os.lseek(handle, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(handle, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise UsageError(f"{path}, line {number} is not JSON: {exc}") from exc
    if not isinstance(record, dict):
        raise UsageError(f"{path}, line {number} is not a JSON object")
    return record
