"""The loop's observer seam: who is told when a turn, a tool call or a model request starts and ends.

An observer is told about spans whose ids the loop chose (:mod:`dsh.session.trace`): the id a
tool call's child gets as ``TRACEPARENT`` is the id of the span an observer reports for it. An
observer only watches (it cannot change a call), runs inline, and one that raises is logged once
per call and never fails the call. Observers are registered on the ``agent_observers`` service,
each as an effect of its plugin's fiber, so unloading the plugin removes it; installed ones are
found through the ``dsh.observers`` entry-point group (each a plugin, loaded in its own fiber).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from dsh.core import Context, Disposer, Plugin, Service, ServiceKey

if TYPE_CHECKING:
    from dsh.session.trace import TraceContext

OBSERVER_GROUP = "dsh.observers"
"""Entry points of this group name a plugin that registers an :class:`Observer` (``dsh-otel``'s)."""


class Span:
    """One observed unit of work: ``kind`` is ``turn``, ``tool`` or ``model``; ``name`` the
    OpenTelemetry GenAI span name (``invoke_agent``, ``execute_tool bash``, ``chat``).

    ``context.span_id`` is this span's id and ``parent_id`` its parent's (None for a new trace's
    first span); ``attributes`` are GenAI semantic-convention attributes, completed at the end
    (exit status, error). Times are ``time.time_ns()``.
    """

    __slots__ = ("attributes", "context", "end_ns", "error", "kind", "name", "parent_id", "start_ns")

    def __init__(
        self, kind: str, name: str, context: TraceContext, parent_id: str | None, attributes: dict[str, Any]
    ) -> None:
        self.kind = kind
        self.name = name
        self.context = context
        self.parent_id = parent_id
        self.attributes = attributes
        self.start_ns = time.time_ns()
        self.end_ns: int | None = None
        self.error: str | None = None
        """Why the work failed (an error, an interruption); None when it succeeded."""


class Observer(Protocol):
    """Told when a span starts and when it ends (both on the thread running the loop)."""

    def started(self, span: Span) -> None:
        """``span`` has begun."""
        ...

    def ended(self, span: Span) -> None:
        """``span`` has ended: ``end_ns``, ``error`` and the final attributes are set."""
        ...


class Observers(Service):
    """The ``agent_observers`` service: the observers the loop tells about its spans."""

    def __init__(self) -> None:
        self._observers: tuple[Observer, ...] = ()
        self._holder = self

    def register(self, observer: Observer) -> Disposer:
        """Add ``observer``, as an effect of the calling plugin's fiber (unloading it removes it)."""
        holder = self._holder

        def setup() -> Disposer:
            holder._observers = (*holder._observers, observer)

            def remove() -> None:
                holder._observers = tuple(o for o in holder._observers if o is not observer)

            return remove

        return self.effect(setup, label="agent observer")

    @property
    def active(self) -> tuple[Observer, ...]:
        """The registered observers, in registration order."""
        return self._holder._observers

    def start(self, span: Span) -> None:
        """Tell every observer ``span`` started."""
        for observer in self._holder._observers:
            _tell(observer, "started", span)

    def end(self, span: Span, error: str | None = None, **attributes: Any) -> None:
        """Close ``span`` (its end time, ``error``, more attributes) and tell every observer."""
        span.end_ns = time.time_ns()
        span.error = error
        span.attributes.update(attributes)
        for observer in self._holder._observers:
            _tell(observer, "ended", span)


def _tell(observer: Observer, method: str, span: Span) -> None:
    try:
        getattr(observer, method)(span)
    except Exception as exc:  # an observer watches; its fault never fails the work it watches
        from dsh.paths.log import logger

        kind = type(observer)
        logger("dsh.agent").warning(
            "observer %s.%s failed in %s() on span %s: %s: %s",
            kind.__module__,
            kind.__qualname__,
            method,
            span.name,
            type(exc).__name__,
            exc,
        )


OBSERVERS: ServiceKey[Observers] = ServiceKey("agent_observers")
"""The observer registry service."""


def _entry_plugin(item: Any) -> Plugin:
    loaded = item.load()
    if not isinstance(loaded, Plugin):
        raise TypeError(f"entry point {item.name} of {OBSERVER_GROUP} names {type(loaded).__name__}, not a plugin")
    return loaded


def _apply_observers(ctx: Context, config: None) -> None:
    from dsh.loader import follow_group

    ctx.provide(OBSERVERS, Observers())
    follow_group(ctx, OBSERVER_GROUP, _entry_plugin, label="observers")


observers_plugin = Plugin(name="agent-observers", apply=_apply_observers)
"""Provides ``agent_observers`` and loads every installed ``dsh.observers`` plugin in its own fiber."""
