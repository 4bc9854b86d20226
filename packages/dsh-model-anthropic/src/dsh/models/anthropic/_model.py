"""The ``anthropic`` provider: the Messages API with ``tool_use``/``tool_result`` through the official SDK."""

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from dsh.agent import MODEL, ModelError, ModelStep, ToolCall, provider_error, read_key, server_message, status_reason
from dsh.core import Context, FieldError, Plugin
from dsh.session import EMPTY_MAPPING, Session, ToolSpec

from ._messages import messages, tool_definitions

if TYPE_CHECKING:
    import anthropic

PROVIDER = "anthropic"
DEFAULT_MODEL = "claude-sonnet-4-5"
"""The model when neither the config's ``model`` nor ``$ANTHROPIC_MODEL`` names one."""
DEFAULT_BASE_URL = "https://api.anthropic.com"
"""The SDK's own default, used when neither the config's ``base_url`` nor ``$ANTHROPIC_BASE_URL`` is set."""


class _AnthropicConfig(NamedTuple):
    model: str = ""
    """The model id; empty: ``$ANTHROPIC_MODEL``, else claude-sonnet-4-5."""
    base_url: str = ""
    """The API's base URL; empty: ``$ANTHROPIC_BASE_URL``, else Anthropic's."""
    api_key_env: str = "ANTHROPIC_API_KEY"
    """The environment variable holding the key, read at every request; empty: send no key."""
    system: str = ""
    """The request's system prompt."""
    max_tokens: int = 4096
    """The most tokens one answer may have (the API requires a bound)."""
    temperature: float | None = None
    stream: bool = False
    """Stream the answer (server-sent events) instead of one JSON reply; the step is the same."""
    timeout: float = 120.0
    """Seconds to wait for one HTTP answer."""
    max_retries: int = 2
    """Retries of a 408, 409, 429 or 5xx answer or a lost connection (the SDK's, honouring ``retry-after``)."""
    extra_body: Mapping[str, Any] = EMPTY_MAPPING
    """More request fields, sent as they are."""


class AnthropicConfig(_AnthropicConfig):
    """The ``anthropic`` provider's config (every field optional; unknown fields are refused).

    A checked record: its values are checked as it is built (``_replace`` and ``_make`` skip the checks).
    """

    __slots__ = ()

    def __new__(
        cls,
        model: str = "",
        base_url: str = "",
        api_key_env: str = "ANTHROPIC_API_KEY",
        system: str = "",
        max_tokens: int = 4096,
        temperature: float | None = None,
        stream: bool = False,
        timeout: float = 120.0,
        max_retries: int = 2,
        extra_body: Mapping[str, Any] = EMPTY_MAPPING,
    ) -> "AnthropicConfig":
        if timeout <= 0:
            raise FieldError("timeout", "must be a positive number of seconds")
        if max_retries < 0:
            raise FieldError("max_retries", "must be 0 or more")
        if max_tokens < 1:
            raise FieldError("max_tokens", "must be at least 1")
        return super().__new__(
            cls, model, base_url, api_key_env, system, max_tokens, temperature, stream, timeout, max_retries, extra_body
        )


class AnthropicModel:
    """A :class:`dsh.agent.Model` on Anthropic's Messages API.

    Each step sends the whole conversation (:func:`~dsh.models.anthropic.messages` of the
    session's history) with the offered tools, reading the key from the environment then.
    """

    def __init__(self, config: AnthropicConfig, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._env = env
        self.name = config.model or self._environ().get("ANTHROPIC_MODEL", "").strip() or DEFAULT_MODEL

    def _environ(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    @property
    def base_url(self) -> str:
        """Where requests go: the config's ``base_url``, else ``$ANTHROPIC_BASE_URL``, else Anthropic's."""
        url = self.config.base_url or self._environ().get("ANTHROPIC_BASE_URL", "").strip() or DEFAULT_BASE_URL
        return url.rstrip("/")

    def begin_turn(self, prompt: str) -> None:
        """Nothing to do: every step is built from the session's history."""

    def subagent(self, agent_type: str) -> "AnthropicModel":
        """A subagent runs on the same endpoint and model (its session is its own)."""
        return self

    def body(self, session: Session, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """The request body of the next step."""
        config = self.config
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": config.max_tokens,
            "messages": messages(session.history),
        }
        if config.system:
            body["system"] = config.system
        if tools:
            body["tools"] = tool_definitions(tools)
        if config.temperature is not None:
            body["temperature"] = config.temperature
        return body

    async def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
        """One Messages request; a provider fault is one :class:`~dsh.agent.ModelError` line."""
        import anthropic  # here, not at the top: loading the provider must not cost a command the SDK

        key = read_key(PROVIDER, self.base_url, self.config.api_key_env, self._environ())
        body = self.body(session, tools)
        client = anthropic.AsyncAnthropic(
            api_key=key, base_url=self.base_url, timeout=self.config.timeout, max_retries=self.config.max_retries
        )
        extra = self.config.extra_body or None
        try:
            async with client:
                if self.config.stream:
                    async with client.messages.stream(**body, extra_body=extra) as stream:
                        reply: Any = await stream.get_final_message()
                else:
                    reply = await client.messages.create(**body, extra_body=extra)
        except anthropic.APIError as exc:
            raise self._fault(exc, key) from None
        return self._answer(reply)

    def _answer(self, reply: Any) -> ModelStep:
        text: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for block in reply.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "thinking":
                thinking.append(block.thinking)
            elif block.type == "tool_use":
                arguments = block.input
                if isinstance(arguments, dict):
                    calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
                else:
                    calls.append(
                        ToolCall(
                            id=block.id,
                            name=block.name,
                            error=f"the input of this {block.name} call is a JSON {type(arguments).__name__}, "
                            "not an object; call it again with a JSON object",
                        )
                    )
        return ModelStep(
            text="".join(text), tool_calls=calls, reasoning="".join(thinking), usage=usage_figures(reply.usage)
        )

    def _fault(self, exc: "anthropic.APIError", key: str) -> ModelError:
        """One sentence naming the provider and base URL, never the key."""
        import anthropic

        if isinstance(exc, anthropic.APITimeoutError):
            what = f"no answer within {self.config.timeout:g} s (raise `timeout` in the provider's config)"
        elif isinstance(exc, anthropic.APIConnectionError):
            what = f"cannot connect: {exc.__cause__ or exc}"
        elif isinstance(exc, anthropic.APIStatusError):
            what = status_reason(
                exc.status_code,
                server_message(exc.body),
                key=key,
                retries=self.config.max_retries,
                key_variable=self.config.api_key_env,
            )
            return provider_error(PROVIDER, self.base_url, what, key=key, status=exc.status_code)
        else:
            what = f"the server answered something the SDK cannot read ({type(exc).__name__}: {exc})"
        return provider_error(PROVIDER, self.base_url, what, key=key)


def usage_figures(usage: Any) -> dict[str, int]:
    """A reply's usage as dsh records it: ``input_tokens``, ``output_tokens`` and the cache figures when non-zero."""
    if usage is None:
        return {}
    figures: dict[str, int] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        value = getattr(usage, name, None)
        if isinstance(value, int) and value:
            figures[name] = value
    return figures


def _apply(ctx: Context, config: AnthropicConfig) -> None:
    ctx.provide(MODEL, AnthropicModel(config))


plugin = Plugin(name="anthropic", apply=_apply, Config=AnthropicConfig)
"""The ``anthropic`` entry of the ``dsh.models`` group."""
