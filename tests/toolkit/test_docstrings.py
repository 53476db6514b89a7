"""Docstrings in four styles become the same descriptions; mismatches warn or fail."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Annotated, Any

import pytest

from toolfold import (
    Field,
    ToolDefinitionError,
    ToolDefinitionWarning,
    UndocumentedParameterWarning,
    tool,
)
from toolfold.toolkit._docstrings import detect_style, parse_docstring


def google(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Uses the regional model, refreshed hourly.

    Args:
        city: The city to forecast.
        days: How many days ahead.

    Returns:
        The forecast as text.

    Raises:
        ValueError: The city is unknown.
    """
    return city


def numpy(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Uses the regional model, refreshed hourly.

    Parameters
    ----------
    city : str
        The city to forecast.
    days : int
        How many days ahead.

    Returns
    -------
    str
        The forecast as text.

    Raises
    ------
    ValueError
        The city is unknown.
    """
    return city


def rest(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Uses the regional model, refreshed hourly.

    :param city: The city to forecast.
    :param days: How many days ahead.
    :returns: The forecast as text.
    :raises ValueError: The city is unknown.
    """
    return city


def epydoc(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Uses the regional model, refreshed hourly.

    @param city: The city to forecast.
    @param days: How many days ahead.
    @return: The forecast as text.
    @raise ValueError: The city is unknown.
    """
    return city


EXPECTED_PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city to forecast."},
        "days": {"type": "integer", "description": "How many days ahead.", "default": 3},
    },
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("fn", "style"), [(google, "google"), (numpy, "numpy"), (rest, "rest"), (epydoc, "epydoc")]
)
def test_four_styles_give_the_same_tool(fn: Any, style: str) -> None:
    """Each style is detected, and gives the same description and parameter descriptions."""
    assert detect_style(fn.__doc__) == style
    for chosen in ("auto", style):
        made = tool(docstring_style=chosen)(fn)
        assert (
            made.description
            == "Forecast the weather.\n\nUses the regional model, refreshed hourly."
        )
        assert made.parameters == EXPECTED_PARAMETERS


def test_summary_only_docstring() -> None:
    """A docstring without sections is the description as written (dedented)."""

    @tool
    def ping() -> str:
        """Check the service.

        Answers "pong" when it is up.
        """
        return "pong"

    assert ping.description == 'Check the service.\n\nAnswers "pong" when it is up.'


def test_no_docstring_gives_empty_description() -> None:
    """A function without a docstring has an empty description and no warning."""

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert add.description == ""
    assert "description" not in add.parameters["properties"]["a"]


def test_description_option_wins_over_docstring() -> None:
    """description= replaces the docstring text but keeps parameter descriptions."""
    made = tool(description="Weather, please.")(google)
    assert made.description == "Weather, please."
    assert made.parameters == EXPECTED_PARAMETERS


def test_field_description_wins_over_docstring() -> None:
    """An Annotated description is more specific than the docstring's entry."""

    @tool
    def greet(name: Annotated[str, Field(description="Who to greet.")]) -> str:
        """Say hello.

        Args:
            name: Ignored in favour of the Field.
        """
        return name

    assert greet.parameters["properties"]["name"]["description"] == "Who to greet."


def test_documented_but_absent_parameter_warns() -> None:
    """A docstring entry for a parameter the function lacks warns, naming both."""
    with pytest.warns(ToolDefinitionWarning) as record:

        @tool
        def lookup(query: str) -> str:
            """Look up.

            Args:
                query: The text.
                qeury: A typo.
            """
            return query

    assert [str(w.message) for w in record] == [
        "test_documented_but_absent_parameter_warns.<locals>.lookup: the docstring documents"
        " parameter 'qeury', which test_documented_but_absent_parameter_warns.<locals>.lookup"
        " does not have"
    ]


def test_undocumented_parameter_warns() -> None:
    """A parameter left out of an Args section warns, naming the function and parameter."""
    with pytest.warns(ToolDefinitionWarning) as record:

        @tool
        def lookup(query: str, limit: int = 5) -> str:
            """Look up.

            Args:
                query: The text.
            """
            return query

    assert [str(w.message) for w in record] == [
        "test_undocumented_parameter_warns.<locals>.lookup: parameter 'limit' has no"
        " description; document it in the docstring (Args:) or with"
        " Annotated[..., Field(description=...)]"
    ]
    assert record[0].category is UndocumentedParameterWarning
    assert record[0].filename == __file__


def test_any_undocumented_parameter_warns_even_without_args_section() -> None:
    """A tool whose docstring documents no parameter warns for each one, with its own category."""
    with pytest.warns(UndocumentedParameterWarning) as record:

        @tool
        def lookup(query: str, limit: Annotated[int, "How many"] = 5) -> str:
            """Look up."""
            return query

    assert [str(w.message).split(";")[0] for w in record] == [
        "test_any_undocumented_parameter_warns_even_without_args_section.<locals>.lookup:"
        " parameter 'query' has no description"
    ]
    assert issubclass(UndocumentedParameterWarning, ToolDefinitionWarning)
    import toolfold
    import toolfold.toolkit

    assert toolfold.UndocumentedParameterWarning is toolfold.toolkit.UndocumentedParameterWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool
        def documented(query: str, limit: Annotated[int, Field(description="How many")] = 5) -> str:
            """Look up.

            Args:
                query: The text.
            """
            return query

        @tool
        def nothing() -> str:
            """No parameters, nothing to document."""
            return ""

        warnings.filterwarnings("ignore", category=UndocumentedParameterWarning)

        @tool
        def silenced(query: str) -> str:
            return query


def test_require_parameter_descriptions_makes_them_errors() -> None:
    """With require_parameter_descriptions=True, every gap is an error, all at once."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool(require_parameter_descriptions=True)
        def lookup(query: str, limit: int = 5) -> str:
            """Look up.

            Args:
                query: The text.
                qeury: A typo.
            """
            return query

    assert info.value.problems == (
        "parameter 'limit' has no description; document it in the docstring"
        " or use Annotated[..., Field(description=...)]",
        "the docstring documents parameter 'qeury', which"
        " test_require_parameter_descriptions_makes_them_errors.<locals>.lookup does not have;"
        " fix the name or remove the entry",
    )


def test_fully_documented_tool_passes_the_requirement() -> None:
    """require_parameter_descriptions accepts docstring and Field descriptions alike."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool(require_parameter_descriptions=True)
        def lookup(query: str, limit: Annotated[int, "At most this many."] = 5) -> str:
            """Look up.

            Args:
                query: The text.
            """
            return query

    assert lookup.parameters["properties"]["limit"]["description"] == "At most this many."


@dataclasses.dataclass
class Address:
    """Where to deliver.

    Attributes:
        street: Street and number.
        city: The city.
    """

    street: str
    city: str = dataclasses.field(default="Paris", metadata={"description": "City, from metadata."})


def test_nested_dataclass_fields_take_descriptions_from_the_class() -> None:
    """A nested dataclass gets its field descriptions from its Attributes section or metadata."""

    @tool
    def deliver(to: Address) -> str:
        """Deliver a parcel.

        Args:
            to: The destination.
        """
        return to.city

    assert deliver.parameters["properties"]["to"] == {
        "type": "object",
        "description": "The destination.",
        "properties": {
            "street": {"type": "string", "description": "Street and number."},
            "city": {"type": "string", "description": "City, from metadata.", "default": "Paris"},
        },
        "required": ["street"],
        "additionalProperties": False,
    }


def test_numpy_attributes_section() -> None:
    """A NumPy class docstring's Attributes section is read too."""
    parsed = parse_docstring(
        """A point.

        Attributes
        ----------
        x : float
            Metres east.
        """
    )
    assert parsed.description == "A point."
    assert parsed.attributes == {"x": "Metres east."}


def test_invalid_docstring_style_is_a_definition_error() -> None:
    """An unknown docstring_style is reported with the allowed values."""
    with pytest.raises(ToolDefinitionError) as info:
        tool(docstring_style="javadoc")(google)
    assert info.value.problems == (
        "docstring_style 'javadoc' is not one of auto, google, numpy, rest, epydoc",
    )


@pytest.mark.parametrize(
    "doc",
    [
        "Do.\n\nParameters\n----------\nx, y : int\n    The coordinate.\n",
        "Do.\n\nArgs:\n    x, y (int): The coordinate.\n",
    ],
)
def test_several_names_documented_at_once(doc: str) -> None:
    """'x, y : int' (NumPy) and 'x, y (int)' (Google) document both parameters."""
    assert parse_docstring(doc).params == {"x": "The coordinate.", "y": "The coordinate."}


@pytest.mark.parametrize(
    "doc",
    [
        "Do.\n\nArgs:\n    limit (int, optional): How many.\n    b (list[dict[str, int]]): B.\n",
        "Do.\n\nArgs:\n    limit (int, optional): How many.\n"
        "    b (list[dict[str, int]], optional): B.\n",
        "Do.\n\nParameters\n----------\nlimit : int, optional\n    How many.\n"
        "b : list[dict[str, int]]\n    B.\n",
    ],
)
def test_a_type_with_commas_documents_no_more_names(doc: str) -> None:
    """The commas of "(int, optional)" or of a type's arguments are not between names."""
    assert parse_docstring(doc).params == {"limit": "How many.", "b": "B."}


def test_an_optional_typed_parameter_meets_the_requirement() -> None:
    """`limit (int, optional):` documents limit alone: no phantom 'optional)' to refuse."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool(require_parameter_descriptions=True)
        def search(query: str, limit: int = 10) -> list[str]:
            """Search the archive.

            Args:
                query (str): The text to look for.
                limit (int, optional): How many results at most. Defaults to 10.
            """
            return [query] * limit

    assert search.parameters["properties"]["limit"]["description"] == (
        "How many results at most. Defaults to 10."
    )


def _keyword_only(query: str, *, limit: int = 10, exact: bool = False, lang: str = "en") -> str:
    """Search the archive.

    Args:
        query: The text to look for.

    Keyword Args:
        limit: How many results at most.

    Keyword Arguments:
        exact (bool): Match the text exactly.

    Other Parameters:
        lang: The language of the results.
    """
    return query


def test_google_keyword_and_other_parameter_sections_describe_parameters() -> None:
    """`Keyword Args:`, `Keyword Arguments:` and `Other Parameters:` describe parameters as
    `Args:` does, and none of them leaks into the tool description."""
    made = tool(_keyword_only)
    properties = made.parameters["properties"]
    assert {name: p.get("description") for name, p in properties.items()} == {
        "query": "The text to look for.",
        "limit": "How many results at most.",
        "exact": "Match the text exactly.",
        "lang": "The language of the results.",
    }
    assert made.description == "Search the archive."


def test_a_keyword_args_section_alone_describes_its_parameters() -> None:
    """A docstring whose only section is `Keyword Args:` documents those parameters
    (the section is not taken for part of the description)."""
    doc = "Do.\n\nKeyword Args:\n    limit: How many.\n"
    parsed = parse_docstring(doc)
    assert (parsed.description, parsed.params) == ("Do.", {"limit": "How many."})


def test_a_keyword_args_section_in_prose_keeps_the_args_entries() -> None:
    """A `Keyword Args:` section written as prose (no `name: text` entries) costs the
    `Args:` entries nothing: they are read as they were before such sections counted."""
    doc = (
        "Fetch a page.\n\n    Args:\n        url: The address.\n\n"
        "    Returns:\n        The body.\n\n"
        "    Keyword Args:\n        Passed on to requests.\n"
    )
    parsed = parse_docstring(doc)
    assert (parsed.description, parsed.params) == ("Fetch a page.", {"url": "The address."})


def test_numpy_other_parameters_section_describes_parameters() -> None:
    """NumPy's `Other Parameters` section documents parameters too."""
    doc = (
        "Do.\n\nParameters\n----------\nquery : str\n    The text.\n\n"
        "Other Parameters\n----------------\nlang : str\n    The language.\n"
    )
    assert parse_docstring(doc).params == {"query": "The text.", "lang": "The language."}


def test_keyword_sections_meet_the_description_requirement() -> None:
    """require_parameter_descriptions accepts parameters documented under `Keyword Args:`
    and `Other Parameters:`, with no warning either."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = tool(require_parameter_descriptions=True)(_keyword_only)
    assert made.parameters["required"] == ["query"]


def test_docstring_names_match_parameters_as_python_normalizes_them() -> None:
    """An Args: name written decomposed (NFD, as some editors save it) or with a ligature
    ('ﬁle') documents its parameter, as Python reads the identifier (NFKC), with no warning."""
    decomposed = "citta\u0300"
    source = (
        f"def meteo({decomposed}: str, \ufb01le: str = 'x') -> str:\n"
        '    """Weather.\n\n    Args:\n'
        f"        {decomposed}: The city.\n"
        "        \ufb01le: The file.\n"
        '    """\n'
        "    return 'sunny'\n"
    )
    space: dict[str, Any] = {}
    exec(source, space)  # (the function's parameters are NFKC, as in any module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = tool(require_parameter_descriptions=True)(space["meteo"])
    properties = made.parameters["properties"]
    assert properties["citt\u00e0"]["description"] == "The city."
    assert properties["file"]["description"] == "The file."


def test_a_documented_name_no_parameter_has_is_reported_once_as_written() -> None:
    """An Args: entry written decomposed ('città' in NFD) or with a ligature ('ﬁle') that
    no parameter has is one warning (one problem when descriptions are required), under
    the name the docstring writes: not a second one under its NFKC form."""
    from toolfold.toolkit._signature import function_schema

    decomposed = "citta\u0300"
    source = (
        "def meteo(lieu: str) -> str:\n"
        '    """Weather.\n\n    Args:\n'
        "        lieu: The place.\n"
        f"        {decomposed}: A parameter that was removed.\n"
        "        \ufb01le: Another one.\n"
        '    """\n'
        "    return lieu\n"
    )
    space: dict[str, Any] = {}
    exec(source, space)
    expected = [
        f"the docstring documents parameter {decomposed!r}, which meteo does not have",
        "the docstring documents parameter '\ufb01le', which meteo does not have",
    ]
    schema = function_schema(space["meteo"])
    assert schema.warnings == [f"meteo: {text}" for text in expected]
    with pytest.raises(ToolDefinitionError) as raised:
        function_schema(space["meteo"], require_parameter_descriptions=True)
    assert list(raised.value.problems) == [
        f"{text}; fix the name or remove the entry" for text in expected
    ]
    parsed = parse_docstring(space["meteo"].__doc__)
    assert list(parsed.params) == ["lieu", decomposed, "\ufb01le"]  # as written
    assert parsed.params.get("citt\u00e0") == "A parameter that was removed."  # found so
    assert parsed.params["file"] == "Another one."
    assert "file" in parsed.params
    assert parsed.params.get("nothing") is None
