"""OpenTelemetry spans of dsh's work, on OpenTelemetry's own SDK, when the ``OTEL_*`` variables ask.

Installed, this distribution's ``otel`` plugin (a ``dsh.observers`` entry point) loads with every
agent runtime. It reads the standard variables (see :func:`settings`); only when they enable an
OTLP trace exporter does it import the SDK and register an observer on the loop's seam
(``dsh.agent.OBSERVERS``), which turns each ``invoke_agent`` turn, ``execute_tool`` call and
``chat`` model request into a span, with the ids dsh chose (a child's ``TRACEPARENT`` names its
call's span). Otherwise, or with ``OTEL_SDK_DISABLED=true``, nothing of OpenTelemetry is imported.
"""

from ._config import OtelSettings, SettingsError, settings
from ._plugin import plugin

__all__ = ["OtelSettings", "SettingsError", "plugin", "settings"]
