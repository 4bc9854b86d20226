"""The ``openai`` provider: Chat Completions with tool calling through the official ``openai`` SDK."""

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from dsh.agent import MODEL, ModelError, ModelStep, ToolCall, provider_error, read_key, server_message, status_reason
from dsh.core import Context, FieldError, Plugin
from dsh.session import EMPTY_MAPPING, Session, ToolSpec, drop_nulls, openai_tool

from ._messages import chat_messages

if TYPE_CHECKING:
    import openai

PROVIDER = "openai"
DEFAULT_MODEL = "gpt-5-mini"
"""The model when neither the config's ``model`` nor ``$OPENAI_MODEL`` names one."""
DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The SDK's own default, used when neither the config's ``base_url`` nor ``$OPENAI_BASE_URL`` is set."""


class _OpenAIConfig(NamedTuple):
    model: str = ""
    """The model id (``deepseek-chat``, ``gpt-5-mini``, ``qwen3:8b``); empty: ``$OPENAI_MODEL``, else gpt-5-mini."""
    base_url: str = ""
    """The API's base URL (``https://api.deepseek.com``); empty: ``$OPENAI_BASE_URL``, else OpenAI's."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the key, read at every request; empty: send no key (a local server)."""
    system: str = ""
    """A system message sent first in every request."""
    stream: bool = False
    """Stream the answer (server-sent events) instead of one JSON reply; the step is the same."""
    strict: bool = False
    """Send tool schemas in strict mode (made strict first: see the README)."""
    parallel_tool_calls: bool | None = None
    """Sent when set; unset leaves the server's default (parallel calls allowed where supported)."""
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = 120.0
    """Seconds to wait for one HTTP answer."""
    max_retries: int = 2
    """Retries of a 408, 409, 429 or 5xx answer or a lost connection (the SDK's, honouring ``retry-after``)."""
    extra_body: Mapping[str, Any] = EMPTY_MAPPING
    """More request fields, sent as they are (a server's own options)."""


class OpenAIConfig(_OpenAIConfig):
    """The ``openai`` provider's config (every field optional; unknown fields are refused).

    A checked record: its values are checked as it is built (``_replace`` and ``_make`` skip the checks).
    """

    __slots__ = ()

    def __new__(
        cls,
        model: str = "",
        base_url: str = "",
        api_key_env: str = "OPENAI_API_KEY",
        system: str = "",
        stream: bool = False,
        strict: bool = False,
        parallel_tool_calls: bool | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        extra_body: Mapping[str, Any] = EMPTY_MAPPING,
    ) -> "OpenAIConfig":
        if timeout <= 0:
            raise FieldError("timeout", "must be a positive number of seconds")
        if max_retries < 0:
            raise FieldError("max_retries", "must be 0 or more")
        return super().__new__(
            cls,
            model,
            base_url,
            api_key_env,
            system,
            stream,
            strict,
            parallel_tool_calls,
            temperature,
            max_tokens,
            timeout,
            max_retries,
            extra_body,
        )


class OpenAIModel:
    """A :class:`dsh.agent.Model` on an OpenAI-compatible Chat Completions endpoint.

    Each step sends the whole conversation (:func:`~dsh.models.openai.chat_messages` of the
    session's history) with the offered tools, reading the key from the environment then; it
    keeps no state between steps, so a resumed session continues exactly.
    """

    def __init__(self, config: OpenAIConfig, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._env = env
        self.name = config.model or self._environ().get("OPENAI_MODEL", "").strip() or DEFAULT_MODEL

    def _environ(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    @property
    def base_url(self) -> str:
        """Where requests go: the config's ``base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's."""
        url = self.config.base_url or self._environ().get("OPENAI_BASE_URL", "").strip() or DEFAULT_BASE_URL
        return url.rstrip("/")

    def begin_turn(self, prompt: str) -> None:
        """Nothing to do: every step is built from the session's history."""

    def subagent(self, agent_type: str) -> "OpenAIModel":
        """A subagent runs on the same endpoint and model (its session is its own)."""
        return self

    def body(self, session: Session, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """The request body of the next step (what the SDK sends, less its own defaults)."""
        config = self.config
        body: dict[str, Any] = {
            "model": self.name,
            "messages": chat_messages(session.history, system=config.system),
        }
        if tools:
            body["tools"] = [openai_tool(spec, strict=config.strict) for spec in tools]
            if config.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = config.parallel_tool_calls
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if config.max_tokens is not None:
            body["max_tokens"] = config.max_tokens
        return body

    def _key(self) -> str:
        return read_key(PROVIDER, self.base_url, self.config.api_key_env, self._environ())

    async def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
        """One Chat Completions request; a provider fault is one :class:`~dsh.agent.ModelError` line."""
        import openai  # here, not at the top: loading the provider must not cost a command the SDK

        key = self._key()
        body = self.body(session, tools)
        schemas = {s.name: dict(s.parameters) for s in tools}
        client = openai.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=self.config.timeout, max_retries=self.config.max_retries
        )
        try:
            async with client:
                if self.config.stream:
                    return await self._streamed(client, body, schemas)
                reply = await client.chat.completions.create(**body, extra_body=self.config.extra_body or None)
                return self._answer(reply, schemas)
        except openai.APIError as exc:
            raise self._fault(exc, key) from None

    def _answer(self, reply: Any, schemas: dict[str, dict[str, Any]]) -> ModelStep:
        if not reply.choices:
            raise self._unreadable("a reply with no choices")
        message = reply.choices[0].message
        calls = [
            self._call(c.id, c.function.name, c.function.arguments, schemas)
            for c in message.tool_calls or ()
            if c.type == "function"
        ]
        reasoning = (message.model_extra or {}).get("reasoning_content")
        return ModelStep(
            text=message.content or "",
            tool_calls=calls,
            reasoning=reasoning if isinstance(reasoning, str) else "",
            usage=usage_figures(reply.usage),
        )

    async def _streamed(self, client: "openai.AsyncOpenAI", body: dict[str, Any], schemas: dict[str, Any]) -> ModelStep:
        text: list[str] = []
        reasoning: list[str] = []
        slots: dict[int, dict[str, str]] = {}
        usage = None
        stream = await client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}, extra_body=self.config.extra_body or None
        )
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                thought = (delta.model_extra or {}).get("reasoning_content")
                if isinstance(thought, str):
                    reasoning.append(thought)
                for part in delta.tool_calls or ():
                    slot = slots.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = part.id or slot["id"]
                    if part.function is not None:
                        if part.function.name and part.function.name != slot["name"]:
                            slot["name"] += part.function.name
                        slot["arguments"] += part.function.arguments or ""
        calls = [self._call(s["id"] or None, s["name"], s["arguments"], schemas) for _, s in sorted(slots.items())]
        return ModelStep(text="".join(text), tool_calls=calls, reasoning="".join(reasoning), usage=usage_figures(usage))

    def _call(self, call_id: str | None, name: str, raw: str, schemas: dict[str, dict[str, Any]]) -> ToolCall:
        """A tool call as the model gave it; arguments that are not a JSON object become the call's error."""
        name = name or "<unnamed>"
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            return ToolCall(
                id=call_id,
                name=name,
                error=f"the arguments of this {name} call are not valid JSON ({exc}): {raw[:200]!r}; "
                "call it again with a JSON object",
            )
        if not isinstance(arguments, dict):
            return ToolCall(
                id=call_id,
                name=name,
                error=f"the arguments of this {name} call are a JSON {type(arguments).__name__}, not an object; "
                "call it again with a JSON object",
            )
        if self.config.strict and name in schemas:
            arguments = drop_nulls(arguments, schemas[name])
        return ToolCall(id=call_id, name=name, arguments=arguments)

    def _unreadable(self, what: str) -> ModelError:
        return provider_error(PROVIDER, self.base_url, f"the server answered {what}")

    def _fault(self, exc: "openai.APIError", key: str) -> ModelError:
        """One sentence naming the provider and base URL, never the key."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            what = f"no answer within {self.config.timeout:g} s (raise `timeout` in the provider's config)"
        elif isinstance(exc, openai.APIConnectionError):
            what = f"cannot connect: {exc.__cause__ or exc}"
        elif isinstance(exc, openai.APIStatusError):
            what = status_reason(
                exc.status_code,
                server_message(exc.body),
                key=key,
                retries=self.config.max_retries,
                key_variable=self.config.api_key_env,
            )
            return provider_error(PROVIDER, self.base_url, what, key=key, status=exc.status_code)
        else:
            what = f"{type(exc).__name__}: {exc}"
        return provider_error(PROVIDER, self.base_url, what, key=key)


def usage_figures(usage: Any) -> dict[str, int]:
    """A reply's usage as dsh records it: ``input_tokens``, ``output_tokens``, ``total_tokens`` and extras.

    Extras where the server reports them: ``cached_tokens``, ``reasoning_tokens``, and DeepSeek's
    ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``.
    """
    if usage is None:
        return {}
    figures = {
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    prompt = usage.prompt_tokens_details
    if prompt is not None and prompt.cached_tokens:
        figures["cached_tokens"] = prompt.cached_tokens
    completion = usage.completion_tokens_details
    if completion is not None and completion.reasoning_tokens:
        figures["reasoning_tokens"] = completion.reasoning_tokens
    for name, value in (usage.model_extra or {}).items():
        if isinstance(value, int) and not isinstance(value, bool):
            figures[name] = value
    return {k: int(v) for k, v in figures.items() if isinstance(v, int)}


def _apply(ctx: Context, config: OpenAIConfig) -> None:
    ctx.provide(MODEL, OpenAIModel(config))


plugin = Plugin(name="openai", apply=_apply, Config=OpenAIConfig)
"""The ``openai`` entry of the ``dsh.models`` group."""
