"""Claims-based security on the `$cbs` node: `put-token` with a Service Bus SAS token.

Follows the protocol guide ("Claims-based authorization"): the request's application
properties carry `operation` = `put-token`, `type`, `name` (the audience) and
`expiration`; the body is the token; the reply carries `status-code` and
`status-description`. The token is checked the way Service Bus checks a SAS token: the
`skn` names the configured key, `sig` is the HMAC-SHA256 of the URL-encoded resource and
the expiry under that key, and the expiry is in the future. A token authorizes its
audience's entity and everything under it (sub-queues, management node, subscriptions).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, quote_plus

from proton import Message

from .management import response
from .namespace import entity_path

SAS_PREFIX = "SharedAccessSignature "
OK, BAD_REQUEST, UNAUTHORIZED = 200, 400, 401


@dataclass(frozen=True)
class SharedAccessKey:
    """The namespace's one shared access rule: its name and key."""

    name: str
    key: str


def _signature_valid(token: str, key: SharedAccessKey) -> bool:
    if not token.startswith(SAS_PREFIX):
        return False
    fields = {k: v[0] for k, v in parse_qs(token[len(SAS_PREFIX) :]).items()}
    resource, signature, expiry = fields.get("sr"), fields.get("sig"), fields.get("se")
    if not resource or not signature or not expiry or fields.get("skn") != key.name:
        return False
    signed = f"{quote_plus(resource)}\n{expiry}".encode()
    expected = base64.b64encode(hmac.new(key.key.encode(), signed, hashlib.sha256).digest())
    # Expiry is the client's wall clock, not the broker's (possibly manual) message clock.
    return hmac.compare_digest(expected, signature.encode()) and int(expiry) > time.time()


def put_token(request: Message, key: SharedAccessKey) -> tuple[Message, str | None]:
    """The reply to a CBS request and the entity path it authorizes (None when refused)."""
    properties = request.properties or {}

    def reply(status: int, description: str) -> Message:
        return response(
            request,
            status,
            description,
            status_key="status-code",
            description_key="status-description",
        )

    if properties.get("operation") != "put-token":
        return reply(BAD_REQUEST, "only put-token is supported"), None
    audience = properties.get("name")
    if not isinstance(request.body, str) or not audience:
        return reply(BAD_REQUEST, "put-token needs a token body and a name"), None
    if not _signature_valid(request.body, key):
        return reply(UNAUTHORIZED, "the token is not valid for this namespace"), None
    return reply(OK, "OK"), entity_path(str(audience))


def authorizes(granted: set[str], path: str) -> bool:
    """Whether tokens put for `granted` paths cover an entity path (case-insensitively)."""
    lowered = path.lower()
    return any(
        scope == "" or lowered == scope.lower() or lowered.startswith(scope.lower() + "/")
        for scope in granted
    )
