"""What a tool does with a model's arguments and its own results, no model needed.

Arguments are decoded, validated (every problem at once, with its JSON path) and
turned into the declared Python types; results become compact JSON.

Run: python examples/arguments.py
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from decimal import Decimal

from toolfold import ToolArgumentError, tool


class Category(enum.Enum):
    BOOKS = "books"
    GAMES = "games"
    MUSIC = "music"


@dataclasses.dataclass
class Filters:
    """Which products to keep.

    Attributes:
        category: The shelf to look on.
        max_price: The most to pay, in euros.
    """

    category: Category
    max_price: Decimal | None = None


@dataclasses.dataclass
class Product:
    id: uuid.UUID
    name: str
    price: Decimal
    added: datetime.date


@tool
def search(query: str, filters: Filters, since: datetime.datetime | None = None) -> list[Product]:
    """Search the shop.

    Args:
        query: Words to look for.
        filters: Which products to keep.
        since: Only products added after this moment.
    """
    return [
        Product(
            uuid.UUID(int=1),
            f"{query} ({filters.category.value})",
            Decimal("12.50"),
            since.date() if since else datetime.date(2024, 1, 1),
        )
    ]


def main() -> None:
    # A good call: the function receives a Filters, a Category member, a Decimal, a datetime.
    arguments = search.validate_arguments(
        '{"query": "chess", "filters": {"category": "games", "max_price": "20.00"},'
        ' "since": "2024-05-01T09:30:00Z"}'
    )
    print("structured:", arguments)
    result = search.invoke(arguments)
    print("result for the model:", search.format_result(result))

    # A bad call: every problem at once, each with its path.
    try:
        search.validate_arguments(
            {"filters": {"category": "toys", "max_price": "cheap"}, "since": "yesterday"}
        )
    except ToolArgumentError as exc:
        print()
        print(exc.message_for_model)

    # Malformed JSON: where it broke.
    try:
        search.validate_arguments('{"query": "chess" "filters": {}}')
    except ToolArgumentError as exc:
        print()
        print(exc.message_for_model)


if __name__ == "__main__":
    main()
