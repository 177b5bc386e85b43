"""What each port call does to the world outside, declared once, next to the method.

Every public method of a port Protocol carries `@port_call(Effect.…)`. Two wrappers derive
their behaviour from it and from nothing else: the call retries (`worker/call_retries.py`)
and fault injection (`worker/testing/faults.py`).

| effect       | tried again in place | an injected fault comes          |
|--------------|----------------------|----------------------------------|
| `READ`       | yes                  | before the call                  |
| `ACQUIRE`    | yes                  | before the call                  |
| `IDEMPOTENT` | yes                  | before, or after it took effect  |
| `ONCE`       | no                   | before, or after it took effect  |
| `RELEASE`    | no                   | never                            |

`opens` names the port a call hands out (a session, an upload): the wrappers wrap it by its
own declarations. A port method without a declaration makes both wrappers refuse the port
(`UndeclaredPortCall`), and `tests/worker/test_ports.py` checks every Protocol: a new method
is never retried, or spared a fault, by default.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__port_call__"


class Effect(enum.Enum):
    """What a port call changes, which decides whether it may be repeated."""

    READ = "read"  # changes nothing
    # Takes a lock or a staging slot that lapses by itself if the caller never uses it:
    # a repeat after a lost reply takes another, and the first one expires.
    ACQUIRE = "acquire"
    IDEMPOTENT = "idempotent"  # changes something; the same call again changes nothing more
    ONCE = "once"  # changes something; a repeat could do it twice, or a lost reply must show
    RELEASE = "release"  # lets go of a resource; nothing worth failing or repeating

    @property
    def repeatable(self) -> bool:
        """Whether a transient failure may be answered by making the same call again."""
        return self in (Effect.READ, Effect.ACQUIRE, Effect.IDEMPOTENT)

    @property
    def writes(self) -> bool:
        """Whether the call changes something, so a failure may come after it took effect."""
        return self in (Effect.IDEMPOTENT, Effect.ONCE)


class PortCall(msgspec.Struct, frozen=True):
    """A port method's declaration."""

    effect: Effect
    opens: type | None = None  # the port Protocol of what the call returns, if one


class UndeclaredPortCall(TypeError):
    """A port Protocol has a method without `@port_call`: nobody may guess its effect."""


def port_call(effect: Effect, *, opens: type | None = None) -> Callable[[F], F]:
    """Declare what a port method does (on the Protocol, once)."""

    def declare(method: F) -> F:
        vars(method)[_MARK] = PortCall(effect, opens)
        return method

    return declare


def declared_calls(*roles: type) -> Mapping[str, PortCall]:
    """The declarations of every public method of the port Protocols `roles` (and their bases).

    Raises UndeclaredPortCall naming the first method that has none.
    """
    calls: dict[str, PortCall] = {}
    for role in roles:
        for name, method in _methods(role):
            declaration = getattr(method, _MARK, None)
            if not isinstance(declaration, PortCall):
                raise UndeclaredPortCall(f"{role.__name__}.{name} declares no @port_call effect")
            calls[name] = declaration
    return calls


def _methods(role: type) -> list[tuple[str, Callable[..., Any]]]:
    """The public methods a Protocol (and the Protocols it extends) defines."""
    found: dict[str, Callable[..., Any]] = {}
    for cls in reversed(role.__mro__):
        if cls is object or not getattr(cls, "_is_protocol", False):
            continue
        for name, value in vars(cls).items():
            if not name.startswith("_") and callable(value):
                found[name] = value
    return list(found.items())
