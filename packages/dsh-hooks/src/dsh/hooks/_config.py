"""Hook configuration in the peers' own formats (Claude Code ``settings.json``, Codex ``hooks.json``)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dsh.core import PluginError, format_validation_error

Dialect = Literal["claude", "codex"]


class HookCommand(BaseModel):
    """One command hook."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["command"] = "command"
    command: str = Field(min_length=1)
    timeout: float | None = Field(default=None, gt=0)
    """Seconds; the dialect's default (60) when absent."""


class MatcherGroup(BaseModel):
    """Hooks that run when ``matcher`` matches (all when it is empty or ``*``)."""

    model_config = ConfigDict(extra="ignore")

    matcher: str | None = None
    hooks: list[HookCommand] = Field(default_factory=list)

    def matches(self, value: str | None) -> bool:
        """Whether this group applies to a tool name (or a SessionStart source)."""
        if not self.matcher or self.matcher == "*" or value is None:
            return True
        try:
            return re.fullmatch(self.matcher, value) is not None
        except re.error:
            return self.matcher == value


class HookTable(BaseModel):
    """Event name -> matcher groups, as under the ``hooks`` key of the peer's file."""

    model_config = ConfigDict(extra="ignore")

    hooks: dict[str, list[MatcherGroup]] = Field(default_factory=dict)


def load_hook_table(dialect: Dialect, source: Mapping[str, Any] | str | None, base: Path | None = None) -> HookTable:
    """Read a dialect's hooks inline (the file's object, or just its ``hooks`` object) or from a file path."""
    if source is None:
        return HookTable()
    where = f"{dialect} hooks"
    raw: Any = source
    if isinstance(source, str):
        path = Path(os.path.expanduser(source))
        if not path.is_absolute() and base is not None:
            path = base / path
        where = f"{dialect} hooks file {path}"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise PluginError(f"{where}: cannot read: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise PluginError(f"{where}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(raw, Mapping):
        raise PluginError(f"{where}: must be a JSON object")
    if "hooks" not in raw:
        raw = {"hooks": raw}
    try:
        return HookTable.model_validate(raw)
    except ValidationError as exc:
        raise PluginError(f"{where}: {format_validation_error(exc)}") from None
