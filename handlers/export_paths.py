"""Where things live: export ids, export blob paths, download names, artifact confinement."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from handlers.errors import PermanentError
from schemas.vocabulary import ExportFormat

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def export_id(conversation_id: str, turn_id: str, fmt: ExportFormat) -> str:
    """`exp_` + 20 hex digits of sha256(conversation, turn, format): the same turn, the same id."""
    digest = hashlib.sha256(f"{conversation_id}\n{turn_id}\n{fmt}".encode()).hexdigest()
    return f"exp_{digest[:20]}"


def export_blob_path(
    exports_container: str, conversation_id: str, turn_id: str, export: str, fmt: ExportFormat
) -> str:
    """`exports/{conversation_id}/{turn_id}/{export_id}.{ext}`."""
    return f"{exports_container}/{conversation_id}/{turn_id}/{export}.{fmt}"


def download_file_name(action: str | None, at: datetime, fmt: ExportFormat) -> str:
    """`{action or "export"}_{YYYYMMDD_HHMMSS}.{ext}`, safe to put in a header."""
    stem = _UNSAFE_NAME.sub("_", action or "").strip("._") or "export"
    return f"{stem[:80]}_{at.strftime('%Y%m%d_%H%M%S')}.{fmt}"


def confine_artifact(path: str, artifacts_container: str, conversation_id: str) -> str:
    """The path when it lies under `{artifacts}/{conversation_id}/`, else not_authorized."""
    prefix = f"{artifacts_container}/{conversation_id}/"
    segments = path.split("/")
    traversal = any(s in ("", ".", "..") for s in segments) or "\\" in path or "\x00" in path
    if traversal or not path.startswith(prefix) or len(path) == len(prefix):
        # Name the conversation, never echo more of the path than its container prefix.
        raise PermanentError(
            "not_authorized",
            f"artifact path outside {prefix} (container {segments[0][:64]!r})",
        )
    return path


def parse_timestamp(text: str) -> datetime | None:
    """An RFC 3339 timestamp, or None when it does not parse. RFC 3339 allows a lower-case
    `t` and `z`: the file name's stamp then comes from the event too, not the clock, and a
    redelivery names the file alike."""
    try:
        return datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        return None
