"""JSON Schema files generated from the models; `python -m schemas.generate` rewrites them."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from schemas.events import ExportPublished, TurnCompleted
from schemas.model import Model
from schemas.records import TurnRecord

HERE = Path(__file__).resolve().parent

SCHEMA_FILES: dict[str, type[Model]] = {
    "turn_completed.v1.schema.json": TurnCompleted,
    "export_published.v1.schema.json": ExportPublished,
    "turn_record.schema.json": TurnRecord,
}


def render(model: type[Model]) -> str:
    """The JSON Schema text of a model, as shipped."""
    _, components = msgspec.json.schema_components([model], ref_template="#/$defs/{name}")
    # The model itself at the root; the structs it holds under $defs.
    schema: dict[str, object] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **components.pop(model.__name__),
    }
    if components:
        schema["$defs"] = components
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Rewrite every shipped schema file from its model."""
    for name, model in SCHEMA_FILES.items():
        (HERE / name).write_text(render(model), encoding="utf-8")


if __name__ == "__main__":
    main()
