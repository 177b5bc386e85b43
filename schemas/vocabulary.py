"""The closed sets of names the turn record, the events and the metrics share
(docs/contract/turn-record.md): plain literals, importable without the models."""

from __future__ import annotations

from typing import Literal

Decision = Literal[
    "published",
    "clarification",
    "clarification_limit",
    "no_request",
    "no_rows",
    "derived_output_without_table",
    "unsupported_format",
    "too_large",
    "conversation_deleted",
]
ExportFormat = Literal["csv", "json", "xml", "xlsx"]
RequestFormat = Literal["csv", "json", "xml", "xlsx", "pdf", "docx", "md"]
RowSource = Literal["assistant_table", "action_rows", "prior_turn"]
# The rule of docs/contract/decision.md step 7 that decided where a published turn's rows came from.
SelectionRule = Literal[
    "assistant_table",
    "excerpt_replaced",
    "single_group",
    "dominant",
    "combined",
    "reach_back_named",
    "reach_back_newest",
    "reach_back_any",
]

EXPORT_FORMATS: tuple[ExportFormat, ...] = ("csv", "json", "xml", "xlsx")
UNSUPPORTED_FORMATS: tuple[RequestFormat, ...] = ("pdf", "docx", "md")
