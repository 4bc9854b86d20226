"""Errors the kernel raises. Each carries its subject as attributes, beside a one-sentence message.

DshError                          every error dsh raises on purpose (loaders and packages subclass it)
├── FieldError                    .field, .reason: a config value out of range (also a ``ValueError``)
└── PluginError                   .plugin: malformed plugin, invalid config, or a raising ``apply``
    ├── ServiceConflictError      .service, .provider: the service is already provided by another plugin
    └── RegistrationConflictError .kind, .key, .owner: the key is taken in a service's registry

Exception (builtin)
└── EscapedError                  .original: a ``BaseException`` third-party code raised, made an ordinary failure
                                  (dsh-loader's containment raises it; :func:`describe` names the original)

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
    """A config field's value is out of range; raised by a checked record's ``__new__`` as it is built.

    A checked NamedTuple ``Config`` raises it in ``__new__`` (a dataclass one in ``__post_init__``).
    It is a ``ValueError`` so that pydantic, validating a config, reports it as an error of the
    record (pydantic places it at the record, not the field); the loader reads ``.field`` to name the
    field: the message of an invalid config then reads ``field 'config.<field>' <reason>``.
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


class EscapedError(Exception):
    """A ``BaseException`` that third-party code raised, caught and turned into an ordinary failure.

    Not a ``DshError`` (see above): it reports a bug in the code that raised, not input dsh refused.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe(original))
        self.original = original
        """The exception the third-party code raised."""


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (of the original one for an :class:`EscapedError`); never raises.

    An exception whose ``str()`` raises (a buggy ``__str__`` in third-party code) is described as
    ``Type (its message could not be read: InnerType: inner message)``.
    """
    try:
        if isinstance(exc, EscapedError):
            exc = exc.original
        name = type.__getattribute__(type(exc), "__name__")
    except BaseException:  # an absurd type (a raising __class__ or metaclass __name__)
        return "<an exception whose type cannot be read>"
    try:
        text = str(exc)
    except BaseException as error:
        return f"{name} (its message could not be read: {_unreadable(error)})"
    return f"{name}: {text}" if text else name


def _unreadable(error: BaseException) -> str:
    """``Type: message`` of the error a ``__str__`` raised, or only its type if that one cannot be read either."""
    try:
        text = str(error)
    except BaseException:
        text = ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
