"""Import order between ``triton`` and TensorFlow.

PyPI's torch wheel for Linux x86_64 is the CUDA build; pip installs it with ``triton`` (Python 3.11
and 3.12 alike). Importing
``triton`` after TensorFlow crashes the process (a segmentation fault in native code), while
importing it before TensorFlow works. InTune imports TensorFlow for its pipeline and then torch's
optimizer for its agent, which imports ``triton`` through ``torch._dynamo``; so every trainwise
module that imports TensorFlow calls :func:`import_triton_before_tensorflow` first (through the
``ingestion`` package, and the test suite's ``conftest.py``).

Where ``triton`` is not installed (torch's CPU build, which ``requirements.lock`` pins, or a node
without the ``rl`` extra) the call is a no-op: nothing is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType

_FindSpec = Callable[[str], "ModuleSpec | None"]
_Import = Callable[[str], ModuleType]


def import_triton_before_tensorflow(
    find_spec: _FindSpec = importlib.util.find_spec, import_module: _Import = importlib.import_module
) -> bool:
    """Import ``triton`` if it is installed and TensorFlow is not imported yet.

    Returns whether it imported ``triton``. Once TensorFlow is loaded the import would crash,
    so it is left alone then. A ``triton`` that fails to import (a wheel built for another
    Python, say) is left to torch, which treats it as absent. ``find_spec`` and
    ``import_module`` are the standard library's unless a test passes its own.
    """
    if "tensorflow" in sys.modules or "triton" in sys.modules:
        return False
    if find_spec("triton") is None:
        return False
    try:
        import_module("triton")
    except ImportError:
        return False
    return True
