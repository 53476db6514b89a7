"""A batch driver the crash test starts as a subprocess and kills: joins a running Ray cluster.

python ray_batch_driver.py ADDRESS CHECKPOINT LOG GATE INPUTS
"""

from __future__ import annotations

import sys

import ray
from ray_agents import make_agent

from toolfold.integrations.ray import run_batch

if __name__ == "__main__":
    address, checkpoint, log, gate, count = sys.argv[1:]
    ray.init(address=address, log_to_driver=False)
    inputs = [str(n) for n in range(int(count))]
    run_batch(
        make_agent(log=log, gate=gate, gate_from=int(count) // 2),
        inputs,
        concurrency=8,
        num_actors=2,
        checkpoint=checkpoint,
        progress=False,
    )
