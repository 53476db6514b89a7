"""The pure core: messages, state, events, effects, reducers, replay and serialization.

No module here performs I/O or reads a clock, the environment or randomness
(`tests/test_layers.py` checks it), so the core can be replayed deterministically
by any driver, a durable-execution engine's included. Users import from
`toolfold.runtime`.
"""
