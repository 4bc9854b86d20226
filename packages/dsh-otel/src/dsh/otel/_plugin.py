"""The ``otel`` plugin: registers the exporting observer when the environment enables it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dsh.agent import OBSERVERS
from dsh.core import Context, Plugin

from ._config import settings

if TYPE_CHECKING:
    from dsh.core import Disposer


def _apply(ctx: Context, config: None) -> None:
    chosen = settings(os.environ)
    if not chosen.enabled:
        return  # nothing of OpenTelemetry is imported
    from ._observer import SpanExporterObserver  # the SDK, only now

    observer = SpanExporterObserver.from_environment(chosen.endpoint)
    observers = ctx.require(OBSERVERS)

    def flush_on_unload() -> Disposer:
        return observer.shutdown  # flushes every ended span (an interrupted run's too) before unloading

    ctx.effect(flush_on_unload, label="otel exporter")
    observers.register(observer)


plugin = Plugin(name="otel", apply=_apply, inject=(OBSERVERS,))
"""The ``otel`` entry point of the ``dsh.observers`` group."""
