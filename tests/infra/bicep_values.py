"""Values of a Bicep template as deployed with its parameters' defaults, computed from the
pycep-parser tree: enough of Bicep's expressions for the tests to read what the template
sets (literals, parameters, variables, interpolation, string(), concat(), items(), max()
and min() and + of integers, for-expressions, property access). A value that only exists
once resources do (an endpoint, a principal id) is `UNKNOWN`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pycep import BicepParser

UNKNOWN = object()
_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


class Template:
    """One parsed template and its parameters' defaults."""

    def __init__(self, text: str) -> None:
        self.tree: dict[str, Any] = BicepParser().parse(text=text)
        self.parameters: dict[str, Any] = self.tree["parameters"]
        self.variables: dict[str, Any] = self.tree["variables"]
        self.resources: dict[str, Any] = self.tree["resources"]

    @classmethod
    def read(cls, path: Path) -> Template:
        """The template in `path`."""
        return cls(path.read_text(encoding="utf-8"))

    def variable(self, name: str) -> Any:
        """A variable's value."""
        return self.value(self.variables[name]["value"])

    def resource(self, name: str) -> Any:
        """A resource's body (`name`, `properties`, ...), evaluated."""
        return self.value(self.resources[name]["config"])

    def value(self, node: Any, scope: dict[str, Any] | None = None) -> Any:
        """The value of one expression node."""
        scope = scope or {}
        if isinstance(node, str):
            return self._name_or_text(node, scope)
        if isinstance(node, list):
            return [self.value(item, scope) for item in node]
        if not isinstance(node, dict):
            return node
        if "function" in node:
            return self._call(node["function"], scope)
        if "operator" in node:
            return self._operator(node["operator"], scope)
        if "loop_type" in node:
            return self._loop(node, scope)
        return {key: self.value(item, scope) for key, item in node.items()}

    # ----------------------------------------------------------------------------------
    def _name_or_text(self, node: str, scope: dict[str, Any]) -> Any:
        # pycep gives identifiers and string literals alike: a name in scope is a reference.
        if node in scope:
            return scope[node]
        if node in self.parameters:
            return self.value(self.parameters[node].get("default", UNKNOWN), scope)
        if node in self.variables:
            return self.value(self.variables[node]["value"], scope)
        if node in self.resources:
            return UNKNOWN
        if "${" in node:
            parts = [self._path(expr, scope) for expr in _INTERPOLATION.findall(node)]
            if any(part is UNKNOWN for part in parts):
                return UNKNOWN
            texts = iter(_text(part) for part in parts)
            return _INTERPOLATION.sub(lambda _: next(texts), node)
        return node

    def _path(self, expression: str, scope: dict[str, Any]) -> Any:
        first, *rest = expression.strip().split(".")
        current = self._name_or_text(first, scope)
        for name in rest:
            if not isinstance(current, dict):
                return UNKNOWN
            current = current.get(name, UNKNOWN)
        return current

    def _call(self, function: dict[str, Any], scope: dict[str, Any]) -> Any:
        args = [self.value(arg, scope) for arg in function["parameters"].values()]
        if any(arg is UNKNOWN for arg in args):
            return UNKNOWN
        kind = function["type"]
        if kind == "string":
            return _text(args[0])
        if kind == "concat":
            return [item for arg in args for item in arg]
        if kind == "items":
            return [{"key": k, "value": v} for k, v in sorted(args[0].items())]
        if kind in ("max", "min") and all(type(arg) is int for arg in args):
            return max(args) if kind == "max" else min(args)
        return UNKNOWN

    def _operator(self, operator: dict[str, Any], scope: dict[str, Any]) -> Any:
        if operator["type"] == "add":
            left = self.value(operator["operands"]["operand_1"], scope)
            right = self.value(operator["operands"]["operand_2"], scope)
            return left + right if type(left) is int and type(right) is int else UNKNOWN
        # `a.b.c` comes right-nested: accessor(a, accessor(b, c)).
        if operator["type"] != "property_accessor":
            return UNKNOWN
        current = self.value(operator["operands"]["operand_1"], scope)
        member = operator["operands"]["operand_2"]
        while isinstance(current, dict):
            if isinstance(member, str):
                return current.get(member, UNKNOWN)
            inner = member.get("operator", {})
            if inner.get("type") != "property_accessor":
                return UNKNOWN
            current = current.get(inner["operands"]["operand_1"], UNKNOWN)
            member = inner["operands"]["operand_2"]
        return UNKNOWN

    def _loop(self, node: dict[str, Any], scope: dict[str, Any]) -> Any:
        detail = node["loop_type"]["detail"]
        items = self.value(detail["array_name"], scope)
        if items is UNKNOWN:
            return UNKNOWN
        return [self.value(node["config"], {**scope, detail["item_name"]: item}) for item in items]


def _text(value: Any) -> str:
    """Bicep's string(): booleans in lowercase."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
