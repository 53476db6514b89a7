"""A stand-in for numpy's integers, shared by the adapters' tests (numpy is not installed)."""

from __future__ import annotations

import numbers


class Int64:
    """Stands in for numpy.int64: an integral number that is no int subclass."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value

    def __int__(self) -> int:
        return self.value

    def __float__(self) -> float:
        return float(self.value)


numbers.Integral.register(Int64)
