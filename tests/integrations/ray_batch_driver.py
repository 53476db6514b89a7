"""A batch driver the crash tests start as a subprocess and kill: joins a running Ray cluster.

python ray_batch_driver.py KIND ADDRESS CHECKPOINT LOG GATE INPUTS

KIND is ``agent`` (`make_agent`) or ``workflow`` (`make_workflow`); inputs from
half of INPUTS on wait at GATE. Prints each finished input's index, a line as
soon as its checkpoint line is written, so the test knows when to kill it.
"""

from __future__ import annotations

import sys

import ray
from ray_agents import make_agent, make_workflow

from toolfold.integrations.ray import run_batch

if __name__ == "__main__":
    kind, address, checkpoint, log, gate, count = sys.argv[1:]
    ray.init(address=address, log_to_driver=False)
    make = make_workflow if kind == "workflow" else make_agent
    run_batch(
        make(log=log, gate=gate, gate_from=int(count) // 2),
        [str(n) for n in range(int(count))],
        concurrency=8,
        num_actors=2,
        checkpoint=checkpoint,
        progress=False,
        on_result=lambda result: print(result.index, flush=True),
    )
