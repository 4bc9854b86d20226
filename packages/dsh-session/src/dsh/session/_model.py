"""Session headers, events and locations: the wire models of a transcript."""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._errors import InvalidSessionIdError

FORMAT_VERSION = 1
MAX_ID_LENGTH = 128
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a safe session id, else raise naming what is wrong.

    Ids are 1 to 128 characters of ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a
    letter or digit: no separators, no ``.``/``..``, no control or non-ASCII characters. Checked
    before any path is built from an id.
    """
    if not isinstance(value, str):
        raise InvalidSessionIdError(f"session id must be a string, not {type(value).__name__}", session_id=value)
    if not value:
        raise InvalidSessionIdError("session id is empty", session_id=value)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidSessionIdError(
            f"session id is {len(value)} characters long; the limit is {MAX_ID_LENGTH}", session_id=value
        )
    if not _ID_RE.fullmatch(value):
        bad = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "._-"))), value[0])
        raise InvalidSessionIdError(
            f"session id {value!r} has a disallowed character {bad!r}; "
            "use ASCII letters, digits, '.', '_' and '-', starting with a letter or digit",
            session_id=value,
        )
    return value


def new_session_id() -> str:
    """A fresh random session id."""
    return str(uuid.uuid4())


class SessionLocation(BaseModel):
    """Where a backend keeps one session's dedicated log: ``kind`` names the representation."""

    model_config = ConfigDict(frozen=True)

    kind: str
    path: str

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not os.path.isabs(value):
            raise ValueError(f"location path {value!r} is not absolute")
        return value


class SessionHeader(BaseModel):
    """The identity of a session, stored first in its transcript."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())
    cwd: str
    parent_session: str | None = None
    origin: str | None = None
    delegation_depth: int = Field(default=0, ge=0)
    seed_length: int = Field(default=0, ge=0)
    version: int = FORMAT_VERSION

    @field_validator("id", "parent_session")
    @classmethod
    def _safe_id(cls, value: str | None) -> str | None:
        return None if value is None else validate_session_id(value)

    @field_validator("cwd")
    @classmethod
    def _absolute_cwd(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("cwd contains a NUL character")
        if not os.path.isabs(value):
            raise ValueError(f"cwd {value!r} is not absolute")
        return value


EVENT_TYPES = frozenset(
    {
        "turn/start",
        "turn/end",
        "message/user",
        "message/assistant",
        "model/request",
        "tool/call",
        "tool/result",
        "hook/result",
        "subagent/start",
        "subagent/end",
        "session/fork",
        "error",
    }
)


class SessionEvent(BaseModel):
    """One transcript event: a ``type`` from :data:`EVENT_TYPES` (or a plugin's own) and its data."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(min_length=1)
    at: float = Field(default_factory=time.time)
    data: dict[str, Any] = Field(default_factory=dict)


def storable(data: Any) -> Any:
    """``data`` with every string UTF-8 cannot encode replaced by an escaped, readable form.

    A lone surrogate (a byte that was not UTF-8 in a command line or environment, decoded with
    ``surrogateescape``, or an unpaired ``\\ud800`` from a model or hook) makes a JSON encoder
    refuse the whole flush; backends retry with this so the turn is kept, the odd character
    written as ``\\udce9``. Everything else is returned as it is.
    """
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return data.encode("utf-8", "backslashreplace").decode("utf-8")
        return data
    if isinstance(data, dict):
        return {storable(k): storable(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [storable(v) for v in data]
    return data
