"""The public surface of toolfold is pinned."""

import toolfold


def test_all_is_sorted_and_importable() -> None:
    """Every name in __all__ exists on the package."""
    for name in toolfold.__all__:
        assert hasattr(toolfold, name), name
