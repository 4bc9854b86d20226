"""Reading hook configuration in the peers' own formats (each dialect says what its files may hold).

Loading never fails on what a peer accepts: a handler type dsh cannot run, a field dsh does not
know, an unknown event or an invalid matcher is a warning naming the file, the event and the thing
at fault, and the other hooks still load. Only a file that cannot be read or is not a JSON object
fails the plugin.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh.paths import UntrustedPathError, check_trusted, read_trusted_text

from ._dialect import HookDialect, dialect_of
from ._errors import HookConfigError
from ._table import Dialect, HookCommand, HookTable, MatcherGroup, invalid_matcher, matcher_typo


def read_hook_file(path: Path, where: str, what: str = "hooks file") -> Any:
    """The parsed JSON of a hook configuration file (the one place such files are read).

    Never from a file, or a folder, that another user owns or can write (as OpenSSH's StrictModes):
    that would run their commands with our credentials.
    """
    try:
        check_trusted(path.parent, what.replace("file", "folder"))  # its own folder private, not only safe
    except UntrustedPathError as exc:
        raise HookConfigError(str(exc), source=where, path=str(path)) from None
    except OSError:
        pass  # a missing file or folder is reported by the read below
    try:
        text = read_trusted_text(path, what)  # checked on the descriptor it is read from
    except UntrustedPathError as exc:
        raise HookConfigError(str(exc), source=where, path=str(path)) from None
    except OSError as exc:
        raise HookConfigError(f"{where}: cannot read: {exc.strerror or exc}", source=where, path=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookConfigError(
            f"{where}: invalid JSON at line {exc.lineno}: {exc.msg}", source=where, path=str(path)
        ) from None


def load_hook_table(
    dialect: Dialect, source: Mapping[str, Any] | str | None, base: Path | None = None, *, label: str | None = None
) -> HookTable:
    """Read a dialect's hooks inline (the file's object, or just its ``hooks`` object) or from a file path.

    ``label`` names the table in warnings and errors (default: the dialect and the file, or ``inline``).
    """
    if source is None:
        return HookTable(dialect)
    where = label or f"{dialect} hooks (inline)"
    raw: Any = source
    file: str | None = None
    if isinstance(source, str):
        path = Path(os.path.expanduser(source))
        if not path.is_absolute() and base is not None:
            path = base / path
        where = label or f"{dialect} hooks file {path}"
        file = str(path)
        raw = read_hook_file(path, where, f"{dialect} hooks file")
    if not isinstance(raw, Mapping):
        raise HookConfigError(f"{where}: must be a JSON object", source=where, path=file)
    if "hooks" not in raw and any(key in dialect_of(dialect).events for key in raw):
        raw = {"hooks": raw}  # just the hooks object; otherwise a settings file without hooks
    return _parse_table(dialect, raw, where, file)


def _parse_table(dialect: Dialect, raw: Mapping[str, Any], where: str, file: str | None) -> HookTable:
    warnings: list[str] = []
    peer = dialect_of(dialect)
    disabled = peer.disabled(raw)
    hooks = raw.get("hooks", {})
    if not isinstance(hooks, Mapping):
        raise HookConfigError(
            f"{where}: 'hooks' must be an object of event names, not {type(hooks).__name__}",
            source=where,
            path=file,
        )
    events: dict[str, tuple[MatcherGroup, ...]] = {}
    for event, groups in hooks.items():
        if event not in peer.events:
            warnings.append(f"{where}: event '{event}' is not a {peer.peer} hook event; its hooks never run")
            continue
        if not isinstance(groups, list):
            warnings.append(f"{where}: event '{event}': expected a list of matcher groups; skipped")
            continue
        parsed = [g for g in (_parse_group(peer, event, item, where, warnings) for item in groups) if g is not None]
        events[event] = tuple(parsed)
    return HookTable(dialect, events, where, disabled, tuple(warnings), () if file is None else (file,))


def _parse_group(peer: HookDialect, event: str, item: Any, where: str, warnings: list[str]) -> MatcherGroup | None:
    if not isinstance(item, Mapping):
        warnings.append(f"{where}: event '{event}': a matcher group must be an object; skipped")
        return None
    unknown = sorted(set(item) - peer.group_fields)
    if unknown:
        warnings.append(f"{where}: event '{event}': unknown matcher group field(s) {', '.join(unknown)}; ignored")
    matcher = item.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        warnings.append(f"{where}: event '{event}': matcher must be a string, not {matcher!r}; group skipped")
        return None
    if matcher is not None:
        error = invalid_matcher(peer.name, matcher)
        if error is not None:
            warnings.append(f"{where}: event '{event}': invalid matcher {matcher!r} ({error}); it never matches")
        elif event in peer.tool_events and (guess := matcher_typo(peer.name, matcher, peer.known_tools, event)):
            warnings.append(
                f"{where}: event '{event}': matcher {matcher!r} misspells a tool name (matchers are "
                f"case-sensitive), so its hooks never run for that tool; did you mean {guess!r}?"
            )
    handlers = item.get("hooks", [])
    if not isinstance(handlers, list):
        warnings.append(f"{where}: event '{event}': 'hooks' must be a list; group skipped")
        return None
    commands = [c for c in (_parse_handler(peer, event, h, where, warnings) for h in handlers) if c is not None]
    return MatcherGroup(matcher, tuple(commands), peer.name)


def _parse_handler(peer: HookDialect, event: str, raw: Any, where: str, warnings: list[str]) -> HookCommand | None:
    if not isinstance(raw, Mapping):
        warnings.append(f"{where}: event '{event}': a hook must be an object; skipped")
        return None
    kind = raw.get("type", "command")
    if kind != "command":
        if kind in peer.handler_types:
            warnings.append(f"{where}: event '{event}': skipping a hook of type '{kind}' (dsh runs command hooks only)")
        else:
            warnings.append(f"{where}: event '{event}': skipping a hook of unknown type {kind!r}")
        return None
    unknown = sorted(set(raw) - peer.command_fields)
    if unknown:
        warnings.append(f"{where}: event '{event}': unknown hook field(s) {', '.join(unknown)}; ignored")

    def bad(what: str) -> None:
        warnings.append(f"{where}: event '{event}': {what}; hook skipped")

    command = raw.get("command")
    if not isinstance(command, str) or not command.strip():
        bad("'command' must be a non-blank string")
        return None
    timeout_raw = next((raw[name] for name in peer.timeout_fields if name in raw), None)
    timeout = peer.default_timeout
    if timeout_raw is not None:
        if (
            isinstance(timeout_raw, bool)
            or not isinstance(timeout_raw, int | float)
            or not math.isfinite(timeout_raw)
            or timeout_raw <= 0
        ):
            unit = "seconds" if peer.timeout_unit == 1.0 else "milliseconds" if peer.timeout_unit == 0.001 else "units"
            bad(f"'timeout' must be a positive number of {unit}, not {timeout_raw!r}")
            return None
        timeout = float(max(timeout_raw * peer.timeout_unit, peer.min_timeout))
    run_async = any(raw.get(name) is True for name in peer.async_fields)
    extras = peer.command_extras(raw, bad)
    if extras is None:
        return None
    return HookCommand(command, timeout=timeout, run_async=run_async, source=where, **extras)
