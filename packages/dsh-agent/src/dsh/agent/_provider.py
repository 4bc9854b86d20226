"""What every HTTP model provider says the same way: the key read at call time, and a fault as one line.

A provider's fault names the provider and its base URL and never the key: :func:`blank_key` is the
one place a key is blanked, and it runs on the server's text before anything cuts it
(:func:`status_reason`) and on the whole sentence (:func:`provider_error`), so neither the key nor
a prefix of it (:data:`KEY_PREFIX` characters or more) reaches stderr, the transcript or a hook,
even where a server echoes the key back whole, cut, or half masked. The SDKs' own error classes
stay in the providers.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import ModelError

NO_KEY = "no-key"
"""What a provider sends when its ``api_key_env`` is empty (a local server that wants no key)."""


KEY_PREFIX = 6
"""The shortest run of a key's first characters that is blanked wherever it appears."""

DETAIL_CHARS = 300
"""How much of a server's own message a fault quotes (after the key is blanked)."""


def blank_key(text: str, key: str) -> str:
    """``text`` with ``key``, and every run of its first :data:`KEY_PREFIX` or more characters, as ``***``.

    A prefix matters as much as the whole key: a message cut in the middle of the key (by the
    server, or by anything before this) still gives its first characters away.
    """
    if not key or key == NO_KEY:
        return text
    text = text.replace(key, "***")
    if len(key) < KEY_PREFIX:
        return text
    start = KEY_PREFIX
    head = key[:start]
    found = text.find(head)
    while found != -1:
        end = found + start
        while end - found < len(key) and end < len(text) and text[end] == key[end - found]:
            end += 1
        text = f"{text[:found]}***{text[end:]}"
        found = text.find(head, found + 3)
    return text


def provider_error(provider: str, base_url: str, what: str, *, key: str = "", status: int | None = None) -> ModelError:
    """``model provider PROVIDER at BASE_URL: WHAT`` as a :class:`ModelError`, with ``key`` blanked out."""
    message = blank_key(f"model provider {provider} at {base_url}: {what}", key)
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


def status_reason(status: int, detail: str, *, key: str, retries: int, key_variable: str) -> str:
    """Why an HTTP answer of ``status`` failed the step (``detail`` is the server's message, or empty).

    The server's message is blanked of ``key`` before it is cut to :data:`DETAIL_CHARS`.
    """
    detail = " ".join(blank_key(detail, key).split())
    said = f": {detail[:DETAIL_CHARS]}" if detail else ""
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
