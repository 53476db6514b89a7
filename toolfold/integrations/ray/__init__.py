"""Batch fan-out on Ray: many inputs of one agent or workflow, run on Ray async actors.

    import ray
    from toolfold.integrations.ray import run_batch

    ray.init()
    results = run_batch(agent, prompts, concurrency=64, num_actors=2,
                        checkpoint="batch.jsonl")

Results come back in input order, one `BatchResult` per input; an input that
raises gets an error result instead of failing the batch. With ``checkpoint``
each finished input's final state is appended to a JSON-lines file, and a rerun
with the same file skips the inputs that finished. Install with
``pip install 'toolfold[ray]'``.
"""

from toolfold._public import publish as _publish
from toolfold.integrations.ray._batch import BatchError, BatchResult, run_batch

__all__ = ["BatchError", "BatchResult", "run_batch"]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
