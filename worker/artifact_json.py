"""An artifact's JSON, parsed from its bytes: msgspec first, json.loads for what it refuses.

msgspec parses in C straight from the bytes, where json.loads first detects the encoding
and decodes them to a str (a second copy of the document, as large as the bytes). It
accepts a subset of what json.loads accepts and builds the same values from it: integers
exact at any size it takes (orjson would turn one past 64 bits into a float), floats
correctly rounded, a repeated key answered by its last value. What it refuses (NaN and
Infinity, numbers past a float's range, escaped lone surrogates, a byte order mark, UTF-16
or UTF-32, integers of more than 4,300 digits) goes to json.loads, which answers as it
always did: a value, or ValueError. Both raise RecursionError on a document nested past
the interpreter's limit (the caller's "nested too deeply").
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

_DECODE: Final = msgspec.json.Decoder().decode


def parse_artifact_json(data: bytes) -> Any:
    """The JSON value of `data`, as `json.loads(data)` gives it; ValueError when not JSON."""
    try:
        return _DECODE(data)
    except msgspec.DecodeError:
        return json.loads(data)
