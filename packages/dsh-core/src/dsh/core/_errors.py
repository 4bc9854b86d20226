"""Exceptions raised by the kernel."""

from __future__ import annotations


class DshError(Exception):
    """Base class of every error dsh raises on purpose; its message is one sentence."""


class ServiceConflictError(DshError):
    """A second provider tried to provide a service name that is already provided."""


class PluginError(DshError):
    """A plugin is malformed, its config is invalid, or its ``apply`` raised."""


class DiscoveryError(DshError):
    """An entry point is claimed twice, cannot be found, or failed to load."""


class DeploymentError(DshError):
    """A deployment file or structure is invalid; the message names the file, entry id and field."""


class BootError(DshError):
    """Composition ended with entries failed or pending; the message lists every one."""
