"""Settings read from the environment and a `.env` file, without a validation library.

`worker/settings.py` (the worker's) and `worker/testing/settings.py` (the harnesses') are
classes of `Setting`s. Creating one reads every variable `PREFIX + NAME` (any case) from the
process environment, else from `.env` in the working directory, else takes the default;
keyword arguments win over both. Each value is parsed and checked by its setting, and every
bad value is named in one `SettingsError`. The instances are frozen.

This module exists for start-up time: pydantic-settings and the pydantic models behind it
cost `export-worker run` ~0.15 s and ~10 MB before its first message (issue 10's 0.3 s
start-up goal), for a dozen scalars.

`.env` lines: `NAME=value` or `export NAME=value`, blank lines and `#` comments. A value is
taken as written (surrounding spaces and an unquoted ` # comment` dropped), or quoted: in
single quotes literally, in double quotes with the escapes `\\n`, `\\t`, `\\"` and `\\\\`.
No variable expansion, no value across lines (an unclosed quote is an error).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, NoReturn, Self, TypeVar, overload

T = TypeVar("T")
Parse = Callable[[object], T]

_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


class SettingsError(ValueError):
    """One or more settings have values their parsers refuse; each is named in the message."""


class Secret:
    """A string that never shows in a repr, a log line or an error message."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        """The secret itself: only for the moment a client is built."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class _Refused(ValueError):
    """What a parser raises: what the value should have been."""


def _refuse(expected: str) -> NoReturn:
    raise _Refused(expected)


# --------------------------------------------------------------------------------------
# Parsers: each takes a value from the environment (a str) or from code (already typed)
# --------------------------------------------------------------------------------------
def integer(*, ge: int | None = None, le: int | None = None) -> Parse[int]:
    """An int within the bounds given; from text in decimal."""
    bounds = " and ".join(
        f"{op} {limit}" for op, limit in ((">=", ge), ("<=", le)) if limit is not None
    )
    expected = f"an integer {bounds}".rstrip()

    def parse(value: object) -> int:
        if isinstance(value, str):
            text = value.strip()
            try:
                value = int(text)
            except ValueError:
                try:
                    whole = float(text)
                except ValueError:
                    _refuse(expected)
                if not whole.is_integer():
                    _refuse(expected)
                value = int(whole)
        if isinstance(value, bool) or not isinstance(value, int):
            _refuse(expected)
        if (ge is not None and value < ge) or (le is not None and value > le):
            _refuse(expected)
        return value

    return parse


def number(
    *, ge: float | None = None, gt: float | None = None, lt: float | None = None
) -> Parse[float]:
    """A float within the bounds given (never NaN); from text as Python reads floats."""
    bounds = " and ".join(
        f"{op} {limit:g}" for op, limit in ((">=", ge), (">", gt), ("<", lt)) if limit is not None
    )
    expected = f"a number {bounds}".rstrip()

    def parse(value: object) -> float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                _refuse(expected)
        if isinstance(value, bool) or not isinstance(value, int | float):
            _refuse(expected)
        value = float(value)
        outside = (
            (ge is not None and value < ge)
            or (gt is not None and value <= gt)
            or (lt is not None and value >= lt)
        )
        if math.isnan(value) or outside:
            _refuse(expected)
        return value

    return parse


def boolean(value: object) -> bool:
    """true/false, yes/no, on/off, 1/0, t/f, y/n (any case), or a bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().lower() in _FALSE:
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    _refuse("true or false (yes/no, on/off, 1/0)")


def text(value: object) -> str:
    """A string, as given."""
    if not isinstance(value, str):
        _refuse("text")
    return value


def path(value: object) -> Path:
    """A filesystem path."""
    if isinstance(value, Path):
        return value
    if isinstance(value, str):
        return Path(value)
    _refuse("a path")


def secret(value: object) -> Secret:
    """A secret string (a connection string, a key)."""
    if isinstance(value, Secret):
        return value
    if isinstance(value, str):
        return Secret(value)
    _refuse("text")


def one_of(*choices: str) -> Parse[str]:
    """One of `choices`, in any case."""
    expected = "one of " + ", ".join(choices)

    def parse(value: object) -> str:
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        _refuse(expected)

    return parse


def optional(parse: Parse[T]) -> Parse[T | None]:
    """`parse`, or None when given None (only code can: an empty variable is a value)."""

    def parse_optional(value: object) -> T | None:
        return None if value is None else parse(value)

    return parse_optional


# --------------------------------------------------------------------------------------
# The settings classes
# --------------------------------------------------------------------------------------
class Setting(Generic[T]):
    """One setting of an `EnvSettings` class: its default and its parser. Read on an
    instance it is the parsed value (held in the instance's own `__dict__`)."""

    def __init__(self, default: T, parse: Parse[T], *, hidden: bool = False) -> None:
        self.default = default
        self.parse = parse
        self.hidden = hidden  # a secret: a refused value is never quoted back
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> Setting[T]: ...
    @overload
    def __get__(self, instance: EnvSettings, owner: type) -> T: ...
    def __get__(self, instance: EnvSettings | None, owner: type) -> Setting[T] | T:
        if instance is None:
            return self
        # Only reached before __init__ stored the value (the instance dict wins after).
        raise AttributeError(self.name)


class EnvSettings:
    """Base of a settings class: its `Setting`s read from `PREFIX`ed variables."""

    PREFIX = "EXPORT_WORKER_"
    _settings: dict[str, Setting[Any]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        found: dict[str, Setting[Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Setting)})
        cls._settings = found

    def __init__(
        self,
        *,
        env_file: str | Path | None = ".env",
        environ: Mapping[str, str] | None = None,
        **given: object,
    ) -> None:
        self._known(given)
        found = _prefixed(read_dotenv(env_file) if env_file is not None else {}, self.PREFIX)
        found.update(_prefixed(os.environ if environ is None else environ, self.PREFIX))
        found.update(given)
        self._store(found)

    @classmethod
    def fields(cls) -> Mapping[str, Setting[Any]]:
        """Every setting of the class by name (its default and parser)."""
        return dict(cls._settings)

    def replace(self, **changes: object) -> Self:
        """A copy with `changes` (parsed and checked like the environment's values)."""
        self._known(changes)
        copy = object.__new__(type(self))
        copy._store({**self._values(), **changes})
        return copy

    @classmethod
    def _known(cls, names: Iterable[str]) -> None:
        """A name that is no setting is a programming error, not a value to ignore."""
        unknown = sorted(set(names) - set(cls._settings))
        if unknown:
            raise TypeError(f"{cls.__name__} has no setting {', '.join(unknown)}")

    def _store(self, found: Mapping[str, object]) -> None:
        problems = []
        for name, setting in self._settings.items():
            try:
                value = setting.parse(found[name]) if name in found else setting.default
            except _Refused as refused:
                shown = "" if setting.hidden else f", got {found[name]!r}"
                problems.append(f"{self.PREFIX}{name.upper()} must be {refused}{shown}")
                continue
            object.__setattr__(self, name, value)
        if problems:
            raise SettingsError("invalid settings: " + "; ".join(problems))

    def _values(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self._settings}

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is frozen: use replace()")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EnvSettings)
            and type(other) is type(self)
            and other._values() == self._values()
        )

    def __hash__(self) -> int:
        return hash(tuple(self._values().values()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values().items())
        return f"{type(self).__name__}({inner})"


def _prefixed(variables: Mapping[str, str], prefix: str) -> dict[str, object]:
    """The variables named `prefix + NAME` in any case, by lower-case NAME."""
    size = len(prefix)
    wanted = prefix.lower()
    return {k[size:].lower(): v for k, v in variables.items() if k[:size].lower() == wanted}


def read_dotenv(file: str | Path) -> dict[str, str]:
    """The variables a `.env` file sets (the module docstring's syntax); none if it is missing."""
    try:
        content = Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return dict(_dotenv_lines(content, str(file)))


def _dotenv_lines(content: str, where: str) -> Iterator[tuple[str, str]]:
    for number_, raw in enumerate(content.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, equals, value = line.partition("=")
        name = name.strip()
        if not equals or not name:
            raise SettingsError(f"{where}:{number_}: expected NAME=value")
        yield name, _dotenv_value(value.strip(), f"{where}:{number_}")


def _dotenv_value(value: str, where: str) -> str:
    if value[:1] in ("'", '"'):
        quote = value[0]
        end = value.find(quote, 1)
        while quote == '"' and end > 0 and _escaped(value, end):
            end = value.find(quote, end + 1)
        if end < 0:
            raise SettingsError(f"{where}: unclosed {quote} (values cannot span lines)")
        inner = value[1:end]
        return inner if quote == "'" else _unescape(inner)
    comment = value.find(" #")
    return (value[:comment] if comment >= 0 else value).rstrip()


def _escaped(value: str, at: int) -> bool:
    """Whether the character at `at` follows an odd number of backslashes."""
    slashes = len(value[:at]) - len(value[:at].rstrip("\\"))
    return slashes % 2 == 1


def _unescape(inner: str) -> str:
    out, chars = [], iter(inner)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(_ESCAPES.get(following, "\\" + following))
        else:
            out.append(char)
    return "".join(out)
