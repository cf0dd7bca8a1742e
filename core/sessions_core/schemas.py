"""Pydantic models of a tool's JSON Schema (pure): the argument classes the frameworks' tools need.

One builder for every adapter. Objects with ``properties`` become nested models, arrays typed
lists, enums ``Literal`` types; an enum the tool checks itself (``Tool.advisory_enums``) is shown
in the JSON Schema but not enforced, so the tool answers with its own error message.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from .tools import Tool

__all__ = ["json_schema_model", "tool_args_model"]

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
_MODELS: OrderedDict[str, type[BaseModel]] = OrderedDict()
_MODELS_KEPT = 1024  # schemas change with block labels and loaded skills: keep the recent ones
_MODELS_LOCK = threading.Lock()


class _EnumHint:
    """Shows ``enum`` in the JSON Schema without enforcing it."""

    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler(core_schema)
        schema["enum"] = list(self.values)
        return schema

    def __repr__(self) -> str:
        return f"_EnumHint({self.values!r})"


def json_schema_model(
    name: str,
    schema: Mapping[str, Any],
    *,
    advisory_enums: frozenset[str] = frozenset(),
    exact_json_schema: bool = False,
) -> type[BaseModel]:
    """A pydantic model of the object schema ``schema``, named after ``name``.

    Required properties are required fields, the others optional (default ``None``); unknown
    arguments are ignored. With ``exact_json_schema`` the model's ``model_json_schema()`` is
    ``schema`` itself, titled ``name``, and unknown arguments are kept (what LlamaIndex's
    ``fn_schema`` needs to advertise the tool's schema word for word).
    """
    if not exact_json_schema:
        return _model(name, schema, advisory_enums, "ignore")
    exact = {"title": name, **copy.deepcopy(dict(schema))}

    class _Exact(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(exact)

    fields = _fields(name, schema, advisory_enums)
    return create_model(name, __base__=_Exact, **fields)


def tool_args_model(tool: Tool, *, exact_json_schema: bool = False) -> type[BaseModel]:
    """:func:`json_schema_model` of a core tool's parameters (the recent ones cached per name
    and schema)."""
    key = json.dumps(
        [tool.name, tool.parameters, sorted(tool.advisory_enums), exact_json_schema], sort_keys=True, default=str
    )
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None:
            _MODELS.move_to_end(key)
            return model
    name = tool.name if exact_json_schema else tool.name + "_args"
    model = json_schema_model(
        name, tool.parameters, advisory_enums=tool.advisory_enums, exact_json_schema=exact_json_schema
    )
    with _MODELS_LOCK:
        model = _MODELS.setdefault(key, model)
        while len(_MODELS) > _MODELS_KEPT:
            _MODELS.popitem(last=False)
        return model


def _class_name(name: str) -> str:
    return "".join(piece.capitalize() for piece in re.split(r"[^0-9A-Za-z]+", name) if piece) or "Args"


def _annotation(name: str, schema: Mapping[str, Any], advisory: bool) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        values = list(schema["enum"])
        if advisory and kind == "string":
            return Annotated[str, _EnumHint(values)]
        return Literal[tuple(values)]  # type: ignore[valid-type]
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return _model(name, schema, frozenset(), "ignore")
    if kind == "object":
        return dict[str, Any]
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(name + "Item", items, False)] if isinstance(items, Mapping) else list[Any]
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    return Any


def _fields(name: str, schema: Mapping[str, Any], advisory: frozenset[str]) -> dict[str, Any]:
    required = set(schema.get("required", ()))
    fields: dict[str, Any] = {}
    for prop, sub in schema.get("properties", {}).items():
        annotation = _annotation(name + _class_name(prop), sub, prop in advisory)
        description = sub.get("description")
        if prop in required:
            fields[prop] = (annotation, Field(..., description=description))
        else:
            fields[prop] = (Optional[annotation], Field(None, description=description))  # noqa: UP045
    return fields


def _model(name: str, schema: Mapping[str, Any], advisory: frozenset[str], extra: str) -> type[BaseModel]:
    fields = _fields(name, schema, advisory)
    return create_model(_class_name(name), __config__=ConfigDict(extra=extra), **fields)  # type: ignore[call-overload]
