"""JSON Schema (draft 2020-12) generated from the frozen dataclasses a file is built from, by the same
rules as the shape check of core/schema.py: a field is required when it has no default and cannot be
null; ``int`` is an integer (never true or false), ``float`` a number, a tuple or list an array, a dict
an object of its values. Each dataclass becomes one ``$defs`` entry described by its docstring, so the
published schema cannot drift from the model without a test noticing.

Every object the tool builds from a dataclass refuses keys the model does not have
(``additionalProperties: false``), so a misspelled key is an error; a field added to the model is added to
the schema by the same change. A byte count (a field ``*_bytes``) is at least 0. A field that may be null
is ``anyOf`` its type and null, never a union ``type`` list, which Ajv's strict mode refuses. ``$id`` is
absolute (``urn:bisect-smem:report:v1``), as draft 2020-12 wants and as validators that resolve references
against it (fastjsonschema) need.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Byte fields that are differences, not counts: a fit's total less the limit is negative when bytes are to spare.
SIGNED_BYTES = frozenset({"over_bytes"})
_PLAIN = {int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"},
          bool: {"type": "boolean"}, type(None): {"type": "null"}}


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


class _Generator:
    """Walks the types once, collecting every dataclass under ``$defs``; ``fields`` maps
    ``Class.field`` to extra keywords (an ``enum``, a ``const``) merged into that field's schema."""

    def __init__(self, fields: Mapping[str, Mapping[str, Any]]) -> None:
        self.fields = fields
        self.defs: dict[str, dict[str, Any]] = {}

    def of(self, tp: Any) -> dict[str, Any]:
        """The schema of one annotation."""
        if tp is Any:
            return {}
        if dataclasses.is_dataclass(tp):
            return self.ref(tp)
        if isinstance(tp, type) and issubclass(tp, enum.StrEnum):
            # Any string: a reader maps a value it does not know to the enum's fallback member.
            return {"type": "string"}
        if _is_union(tp):
            return self._union(typing.get_args(tp))
        if tp in _PLAIN:
            return dict(_PLAIN[tp])
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (tuple, list):
            if origin is list or (len(args) == 2 and args[1] is Ellipsis):
                return {"type": "array", "items": self.of(args[0])}
            return {"type": "array", "prefixItems": [self.of(a) for a in args], "minItems": len(args),
                    "maxItems": len(args)}
        if origin is dict:
            return {"type": "object", "additionalProperties": self.of(args[1])}
        raise TypeError(f"no JSON Schema for the annotation {tp!r}")

    def _union(self, args: tuple[Any, ...]) -> dict[str, Any]:
        options = [self.of(a) for a in args]
        # An int is a number too: "integer or number" is just "number".
        if {"type": "number"} in options and {"type": "integer"} in options:
            options.remove({"type": "integer"})
        return options[0] if len(options) == 1 else {"anyOf": options}

    def ref(self, cls: type) -> dict[str, Any]:
        """A reference to ``cls``'s definition, generating it on first use."""
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placed first, so that a recursive type finds its own name
            self.defs[name] = self.definition(cls)
        return {"$ref": f"#/$defs/{name}"}

    def definition(self, cls: type) -> dict[str, Any]:
        """``cls`` as an object schema: its fields, which are required, and its docstring."""
        hints = typing.get_type_hints(cls)
        properties, required = {}, []
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            schema = self.of(tp)
            if f.name.endswith("_bytes") and f.name not in SIGNED_BYTES:
                schema = at_least_zero(schema)
            schema = merged(schema, self.fields.get(f"{cls.__name__}.{f.name}", {}))
            properties[f.name] = schema
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            nullable = tp is Any or (_is_union(tp) and type(None) in typing.get_args(tp))
            if not has_default and not nullable:
                required.append(f.name)
        out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            out["required"] = required
        doc = inspect.getdoc(cls)
        if doc and not doc.startswith(f"{cls.__name__}("):  # a dataclass without a docstring gets its signature
            out["description"] = " ".join(doc.split())
        return out


_NUMERIC = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})


def merged(schema: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with the keywords of ``extra``; bounds on a number go onto every number it admits (the
    numeric branches of an anyOf, since Ajv's strict mode refuses ``minimum`` beside a branch that is null,
    and the items of an array of numbers)."""
    numeric = {k: v for k, v in extra.items() if k in _NUMERIC}
    rest = {k: v for k, v in extra.items() if k not in _NUMERIC}
    if not numeric:
        return {**schema, **rest}
    return {**(_bounded(schema, numeric) or {**schema, **numeric}), **rest}


def _bounded(schema: dict[str, Any], numeric: Mapping[str, Any]) -> dict[str, Any] | None:
    """``schema`` with ``numeric`` on each number it admits, or None where it admits none."""
    if schema.get("type") in ("integer", "number"):
        return {**schema, **numeric}
    if "anyOf" in schema:
        branches = [_bounded(s, numeric) for s in schema["anyOf"]]
        if all(b is None for b in branches):
            return None
        return {**schema, "anyOf": [b or s for b, s in zip(branches, schema["anyOf"], strict=True)]}
    if schema.get("type") == "array" and "items" in schema:
        items = _bounded(schema["items"], numeric)
        return None if items is None else {**schema, "items": items}
    if schema.get("type") == "array" and "prefixItems" in schema:
        parts = [_bounded(s, numeric) for s in schema["prefixItems"]]
        if all(p is None for p in parts):
            return None
        return {**schema, "prefixItems": [p or s for p, s in zip(parts, schema["prefixItems"], strict=True)]}
    return None


def at_least_zero(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``minimum: 0`` on every integer it admits (the branches of an anyOf, an array's items)."""
    if schema.get("type") == "integer":
        return {**schema, "minimum": 0}
    if "anyOf" in schema:
        return {**schema, "anyOf": [at_least_zero(s) for s in schema["anyOf"]]}
    if schema.get("type") == "array" and "items" in schema:
        return {**schema, "items": at_least_zero(schema["items"])}
    if schema.get("type") == "array" and "prefixItems" in schema:
        return {**schema, "prefixItems": [at_least_zero(s) for s in schema["prefixItems"]]}
    return schema


def without_type_lists(schema: Any) -> Any:
    """``schema`` with every union ``type`` list (``["integer", "null"]``, written by hand beside the
    generated parts) as an ``anyOf`` of one type each, which Ajv's strict mode takes; the keywords of a
    type go into its own branch."""
    if isinstance(schema, list):
        return [without_type_lists(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: without_type_lists(v) for k, v in schema.items()}
    if isinstance(out.get("type"), list):
        types, shared = out.pop("type"), {k: out.pop(k) for k in ("description", "title") if k in out}
        return {**shared, "anyOf": [{"type": t, **(out if t != "null" else {})} for t in types]}
    return out


def absolute_id(name: str) -> str:
    """The absolute ``$id`` of the schema of files marked ``name`` (``bisect_smem/report/v1`` ->
    ``urn:bisect-smem:report:v1``): a URN names the document without claiming a host that serves it."""
    if ":" in name:
        return name
    project, *rest = name.split("/")
    return ":".join(["urn", project.replace("_", "-"), *rest])


def generate(root: type, schema_id: str, title: str, fields: Mapping[str, Mapping[str, Any]] | None = None,
             required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The schema document of files built from dataclass ``root``: its definition at the top, every
    nested dataclass under ``$defs``. ``fields`` adds keywords to named fields (``{"Verdict.verdict":
    {"enum": [...]}}``); ``required`` names top-level fields required beyond the model's own (``schema``)."""
    gen = _Generator(fields or {})
    top = gen.definition(root)
    if required:
        top["required"] = [*top.get("required", []), *(r for r in required if r not in top.get("required", []))]
    defs = {name: gen.defs[name] for name in sorted(gen.defs)}
    return {"$schema": DRAFT, "$id": absolute_id(schema_id), "title": title, **top,
            **({"$defs": defs} if defs else {})}


def document(schema_id: str, title: str, description: str, properties: Mapping[str, Any],
             required: tuple[str, ...], fields: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A schema document whose top level is not one dataclass (a baseline: schema, provenance, device).
    Each value of ``properties`` is an annotation (generated, dataclasses under ``$defs``) or a ready
    schema (a dict)."""
    gen = _Generator(fields or {})
    props = {name: dict(value) if isinstance(value, Mapping) else gen.of(value) for name, value in properties.items()}
    defs = {name: gen.defs[name] for name in sorted(gen.defs)}
    return without_type_lists({"$schema": DRAFT, "$id": absolute_id(schema_id), "title": title,
                               "description": description, "type": "object", "properties": props,
                               "required": list(required), "additionalProperties": False,
                               **({"$defs": defs} if defs else {})})


def definition_of(cls: type, fields: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """One dataclass's object schema on its own (nested dataclasses must not occur), to adapt by hand."""
    gen = _Generator(fields or {})
    out = gen.definition(cls)
    if gen.defs:
        raise TypeError(f"{cls.__name__} nests dataclasses ({', '.join(sorted(gen.defs))}); use document()")
    return out
