"""Check the LLM's tool arguments against the tool's JSON schema before anything reaches the webhook.

A caller can steer the LLM, so its arguments are untrusted input: keys the schema does not declare are
dropped, types, `required`, `enum`, `maxLength`/`minLength`, `minimum`/`maximum`, `pattern` and
`maxItems` are enforced, and a string the schema leaves unbounded is still capped (`DEFAULT_MAX_LENGTH`).
The subset covers what agent files use (objects of scalars, arrays, nested objects); a bad argument is one
line for the LLM, naming the argument and the rule, so it can correct itself.
"""

from __future__ import annotations

import math
import re
from typing import Any

DEFAULT_MAX_LENGTH = 500  # characters, for strings whose schema sets no maxLength
DEFAULT_MAX_ITEMS = 50

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


class ToolArgumentError(ValueError):
    """The LLM's arguments do not fit the tool's schema; the message is one line meant for the LLM."""


def _type_ok(value: Any, name: str) -> bool:
    if name not in _TYPES:
        return True  # a type this subset does not know is left to the webhook
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, _TYPES[name])


def _check(value: Any, schema: dict[str, Any], where: str) -> Any:
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    if names and not any(_type_ok(value, n) for n in names):
        raise ToolArgumentError(f"argument {where} must be {' or '.join(names)}")
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        raise ToolArgumentError(f"argument {where} must be one of {allowed}")
    if isinstance(value, str):
        limit = int(schema.get("maxLength", DEFAULT_MAX_LENGTH))
        if len(value) > limit:
            raise ToolArgumentError(f"argument {where} is longer than {limit} characters")
        if len(value) < int(schema.get("minLength", 0)):
            raise ToolArgumentError(f"argument {where} is shorter than {schema['minLength']} characters")
        if "pattern" in schema and not re.search(str(schema["pattern"]), value):
            raise ToolArgumentError(f"argument {where} does not match the pattern {schema['pattern']}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolArgumentError(f"argument {where} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolArgumentError(f"argument {where} must be at most {schema['maximum']}")
    elif isinstance(value, list):
        limit = int(schema.get("maxItems", DEFAULT_MAX_ITEMS))
        if len(value) > limit:
            raise ToolArgumentError(f"argument {where} has more than {limit} items")
        items = schema.get("items")
        item_schema: dict[str, Any] = items if isinstance(items, dict) else {}
        return [_check(v, item_schema, f"{where}[{i}]") for i, v in enumerate(value)]
    elif isinstance(value, dict):
        return _object(value, schema, where)
    return value


def _object(value: dict[str, Any], schema: dict[str, Any], where: str) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties") or {}
    prefix = f"{where}." if where else ""
    missing = [r for r in schema.get("required", []) if value.get(r) is None]
    if missing:
        raise ToolArgumentError(f"missing required argument {prefix}{missing[0]}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in props:
            continue  # undeclared keys never reach the webhook
        if item is None and key not in schema.get("required", []):
            continue  # an optional argument the LLM left empty
        out[key] = _check(item, props[key] if isinstance(props[key], dict) else {}, f"{prefix}{key}")
    return out


def validate_arguments(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """The arguments the webhook may see (undeclared keys dropped); ToolArgumentError if they break a rule."""
    if not isinstance(args, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    return _object(args, schema, "")
