"""The JSON edge's one name: ``JsonObject``, a JSON object as Python holds it.

Values travel through the library typed (frozen dataclasses, pydantic models, TypedDicts that
name their keys); they become a JSON object only at the edge: a ``to_dict``/``as_dict``/
``to_json`` that goes on to :func:`core.results.write_json`, its ``from_dict`` twin reading a
stored one back, a CLI handler's result, a boto3 response, a YAML document. ``JsonObject``
names exactly those, so the edge is visible: ``tests/test_code_shape.py`` counts its uses
apart from the plain untyped dicts (the values that still travel), each under
its own ceiling, and refuses any other alias of an untyped dict.
"""

from __future__ import annotations

from typing import Any

#: A JSON object at the edge (see the module's docstring); never a value that travels.
JsonObject = dict[str, Any]
