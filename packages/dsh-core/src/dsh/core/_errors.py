"""Errors the kernel raises. Each carries its subject as attributes, beside a one-sentence message.

DshError                          every error dsh raises on purpose (loaders and packages subclass it)
├── FieldError                    .field, .reason: a config value out of range (also a ``ValueError``)
└── PluginError                   .plugin: malformed plugin, invalid config, or a raising ``apply``
    ├── ServiceConflictError      .service, .provider: the service is already provided by another plugin
    └── RegistrationConflictError .kind, .key, .owner: the key is taken in a service's registry

Exception (builtin)
└── EscapedError (``_contain``)   .original: a ``BaseException`` third-party code raised, made an ordinary failure

``EscapedError`` is deliberately not a ``DshError``: a ``DshError`` says dsh refused something and
names what to fix, and callers catch it to print one line (``dsh`` exits 1 with no traceback). An
escaped ``SystemExit`` or ``GeneratorExit`` from a plugin or hook is a bug in that code: it must
travel as any other unexpected exception does, with its traceback and the original at hand.
"""

from __future__ import annotations


class DshError(Exception):
    """Base class of every error dsh raises on purpose; its message is one sentence."""


class PluginError(DshError):
    """A plugin is malformed, its config is invalid, or its ``apply`` raised."""

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin
        """Label of the plugin at fault, when known."""


class ServiceConflictError(PluginError):
    """A plugin tried to provide a service name that another plugin already provides."""

    def __init__(self, message: str, *, plugin: str, service: str, provider: str) -> None:
        super().__init__(message, plugin=plugin)
        self.service = service
        """The contested service name."""
        self.provider = provider
        """Label of the plugin that provides it already."""


class FieldError(DshError, ValueError):
    """A config field's value is out of range; raised by a dataclass ``Config``'s ``__post_init__``.

    It is a ``ValueError`` so that pydantic, validating a config, reports it as that field's error:
    the message of an invalid config then reads ``field 'config.<field>' <reason>``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"field '{field}' {reason}")
        self.field = field
        """The field at fault (its name in the config, as a user writes it)."""
        self.reason = reason
        """What is wrong, in plain words (``must be greater than 0``)."""


class RegistrationConflictError(PluginError):
    """A plugin registered a key (a tool name, a skill source) that another registration holds."""

    def __init__(self, message: str, *, plugin: str | None, kind: str, key: str, owner: str | None) -> None:
        super().__init__(message, plugin=plugin)
        self.kind = kind
        """What the registry holds (``tool``, ``skill source``)."""
        self.key = key
        """The contested key."""
        self.owner = owner
        """Label of the plugin that holds the key (None: the host registered it)."""
