"""adapters: provider codecs, stream parsers, the httpx transport, model strings."""

__all__: list[str] = []
