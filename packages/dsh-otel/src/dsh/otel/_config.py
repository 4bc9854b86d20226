"""Which standard ``OTEL_*`` variables turn the exporter on, read without importing OpenTelemetry."""

from collections.abc import Mapping
from typing import NamedTuple

from dsh.core import DshError

SUPPORTED_PROTOCOL = "http/protobuf"


class SettingsError(DshError):
    """An ``OTEL_*`` variable asks for something dsh-otel cannot do; the message names it and the fix."""


class OtelSettings(NamedTuple):
    """What the environment asks of dsh-otel: whether to export, and over which protocol."""

    enabled: bool
    why: str
    """Why it is on or off, as ``dsh plugins`` and the docs say it."""
    endpoint: str = ""
    """Where spans go when enabled (the variable's value, else the SDK's default)."""


def _first(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def settings(environ: Mapping[str, str]) -> OtelSettings:
    """Read the standard variables: on when ``OTEL_TRACES_EXPORTER`` names ``otlp`` or an OTLP
    endpoint is set, unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.

    Unlike the SDK's own default (``otlp`` to ``localhost:4318`` when nothing is set), an unset
    environment means off: installing the distribution alone never makes every ``dsh exec`` try a
    collector that is not there. A protocol other than ``http/protobuf`` raises :class:`SettingsError`.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return OtelSettings(False, "OTEL_SDK_DISABLED=true")
    exporters = [e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    endpoint = _first(environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporters and "otlp" not in exporters:
        return OtelSettings(False, f"OTEL_TRACES_EXPORTER={','.join(exporters)} names no otlp exporter")
    if not exporters and endpoint is None:
        return OtelSettings(False, "neither OTEL_TRACES_EXPORTER=otlp nor an OTLP endpoint is set")
    protocol = _first(environ, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol is not None and protocol[1] != SUPPORTED_PROTOCOL:
        name, value = protocol
        raise SettingsError(
            f"{name}={value} is not supported by dsh-otel; set it to {SUPPORTED_PROTOCOL} (OTLP over HTTP), "
            "or unset OTEL_TRACES_EXPORTER to export nothing"
        )
    where = endpoint[1] if endpoint is not None else "http://localhost:4318 (the SDK's default)"
    return OtelSettings(True, f"exporting spans over OTLP/HTTP to {where}", where)
