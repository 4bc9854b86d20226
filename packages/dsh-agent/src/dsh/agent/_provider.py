"""What every HTTP model provider says the same way: the key read at call time, and a fault as one line.

A provider's fault names the provider and its base URL and never the key (:func:`provider_error`
blanks it even where a server echoes it back); the SDKs' own error classes stay in the providers.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import ModelError

NO_KEY = "no-key"
"""What a provider sends when its ``api_key_env`` is empty (a local server that wants no key)."""


def provider_error(provider: str, base_url: str, what: str, *, key: str = "", status: int | None = None) -> ModelError:
    """``model provider PROVIDER at BASE_URL: WHAT`` as a :class:`ModelError`, with ``key`` blanked out."""
    message = f"model provider {provider} at {base_url}: {what}"
    if key and key != NO_KEY:
        message = message.replace(key, "***")
    return ModelError(message, provider=provider, base_url=base_url, status=status)


def read_key(provider: str, base_url: str, variable: str, env: Mapping[str, str]) -> str:
    """The API key in ``$variable``, read now (never stored); :data:`NO_KEY` when ``variable`` is empty."""
    if not variable:
        return NO_KEY
    key = env.get(variable, "").strip()
    if not key:
        raise provider_error(
            provider,
            base_url,
            f"no API key: ${variable} is not set (export it, or set api_key_env in the provider's config "
            "to the variable that holds it)",
        )
    return key


def status_reason(status: int, detail: str, *, retries: int, key_variable: str) -> str:
    """Why an HTTP answer of ``status`` failed the step (``detail`` is the server's message, or empty)."""
    said = f": {' '.join(detail.split())[:300]}" if detail.strip() else ""
    if status in (401, 403):
        where = f"${key_variable}" if key_variable else "the server's key (api_key_env is empty)"
        return f"the key was refused ({status}{said}); check {where}"
    if status == 429:
        return f"rate limited (429{said}), still after {retries} retries; wait and resume the session"
    if status >= 500:
        return f"server error ({status}{said}), still after {retries} retries"
    return f"the request was refused ({status}{said})"


def server_message(body: object) -> str:
    """The human message of an error body (``{"error": {"message": ...}}`` or ``{"message": ...}``), or empty."""
    if not isinstance(body, Mapping):
        return ""
    message = body.get("message")
    error = body.get("error")
    if not isinstance(message, str) and isinstance(error, Mapping):
        message = error.get("message")
    return message if isinstance(message, str) else ""
