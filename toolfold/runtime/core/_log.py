"""`Log`: an immutable sequence with O(1) amortised append.

A run's conversation and event log grow by one item per event. Copying a tuple
on every event would make each event cost O(history); `Log` shares one buffer
between versions instead. A version is a view of the buffer's first ``n``
items; appending to the newest version extends the buffer in place (no older
version can see the new item, since each reads only its own prefix), and
appending to an older version (a fork) copies its prefix first.

The check-then-append is safe without a lock: after appending, a version
confirms its item sits at position ``n``; if another thread won the race the
item is elsewhere and the version copies instead. A stray item past every
view's end costs memory, never correctness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Generic, TypeVar, cast, overload

T = TypeVar("T")
A = TypeVar("A")
_new = object.__new__


class Log(Sequence[T], Generic[T]):
    """An immutable sequence that appends in O(1) amortised time.

    Compares equal to another `Log` with the same items; ``tuple(log)`` or
    `as_tuple` give a plain tuple (cached per version); `folded` a running
    fold over the items, resumed from where the version it was made from left it.
    """

    __slots__ = ("_fold", "_items", "_n", "_tuple")

    _items: list[T]
    _n: int
    _tuple: tuple[T, ...] | None
    # The last `folded` result: (its function, the items it covered, its value). A version
    # made by appending starts from its parent's: those items are its own first ones too.
    _fold: tuple[Callable[[Any, T], Any], int, Any] | None

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items = list(items)
        self._n = len(self._items)
        self._tuple = None
        self._fold = None

    @classmethod
    def _view(cls, items: list[T], n: int) -> Log[T]:
        log: Log[T] = cls.__new__(cls)
        log._items = items
        log._n = n
        log._tuple = None
        log._fold = None
        return log

    def append(self, item: T) -> Log[T]:
        """A new log with ``item`` at the end; this one is unchanged."""
        items, n = self._items, self._n
        if len(items) == n:
            items.append(item)
            if items[n] is item:
                copy = items
            else:
                copy = items[:n]
                copy.append(item)
        else:
            copy = items[:n]
            copy.append(item)
        # `_view` inlined: two runs of this per event.
        log: Log[T] = _new(Log)
        log._items = copy
        log._n = n + 1
        log._tuple = None
        log._fold = self._fold
        return log

    def extend(self, new: Iterable[T]) -> Log[T]:
        """A new log with ``new`` appended; this one is unchanged."""
        added = list(new)
        if not added:
            return self
        items, n = self._items, self._n
        if len(items) == n:
            items.extend(added)  # one step under the GIL: the items land together or not at n
            # Another log's extend may have landed there first: share the buffer
            # only when every item in place is one of these (checked in a loop, not a
            # generator: no function and frame of its own for every step of several calls).
            shared = len(items) >= n + len(added)
            if shared:
                for index, item in enumerate(added, n):
                    if items[index] is not item:
                        shared = False
                        break
            if shared:
                copy = items
            else:
                copy = items[:n]
                copy.extend(added)
        else:
            copy = items[:n]
            copy.extend(added)
        log: Log[T] = _new(Log)
        log._items = copy
        log._n = n + len(added)
        log._tuple = None
        log._fold = self._fold
        return log

    def prefix(self, n: int) -> Log[T]:
        """The first ``n`` items, sharing this log's buffer (O(1))."""
        if not 0 <= n <= self._n:
            raise IndexError(f"prefix length {n} outside 0..{self._n}")
        return Log._view(self._items, n)

    def folded(self, step: Callable[[A, T], A], start: A) -> A:
        """``functools.reduce(step, self, start)``, resumed where this version's parent left it.

        The result is kept on this version, and a version appended to it
        starts from it: calling this at every new version (as a run's stop
        conditions read its log at every step) folds each item once, not
        the whole log again. One ``step`` per log is cached (by identity);
        ``step`` must be pure, and ``start`` the same each call.
        """
        n, acc = 0, start
        cached = self._fold
        if cached is not None and cached[0] is step and cached[1] <= self._n:
            n, acc = cached[1], cached[2]
            if n == self._n:
                return cast("A", acc)
        items = self._items
        for index in range(n, self._n):
            acc = step(acc, items[index])
        self._fold = (step, self._n, acc)
        return acc

    def as_tuple(self) -> tuple[T, ...]:
        """The items as a tuple (built once per version)."""
        if self._tuple is None:
            # A slice, then a tuple of a list: a copy of known size, no iterator to step through.
            self._tuple = tuple(self._items[: self._n])
        return self._tuple

    @property
    def first(self) -> T | None:
        """The first item, None when empty (read for every model request: no bounds checks)."""
        return self._items[0] if self._n else None

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return self.as_tuple()[index]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("Log index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._n)

    def __reversed__(self) -> Iterator[T]:
        items = self._items
        return (items[i] for i in range(self._n - 1, -1, -1))

    def last(self) -> T | None:
        """The last item, or None when empty."""
        return self._items[self._n - 1] if self._n else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Log):
            return NotImplemented
        if self._n != other._n:
            return False
        if self._items is other._items:
            return True
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Log({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Log, (self.as_tuple(),))


def as_log(items: Iterable[T]) -> Log[T]:
    """``items`` as a `Log` (a `Log` is returned as is)."""
    return items if isinstance(items, Log) else Log(items)
