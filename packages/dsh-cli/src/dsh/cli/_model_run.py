"""``dsh run`` with a model provider: prompts in, the assistant's text out, one stderr line per tool call.

The provider is ``--model NAME`` (with the deployment's config for it when the deployment names the
same provider), else the deployment's ``model``. The prompt is ``--prompt``, else standard input
when it is not a terminal, else one prompt per turn read from the terminal until end of file.
A provider's fault is one ``dsh:`` line; the turn is recorded as failed and the session stays
resumable (``--session ID``). Ctrl-C interrupts the running turn as it does ``dsh exec`` (the
command's group killed, the turn recorded interrupted); from a terminal the run then goes on to the
next prompt, as a shell does, and Ctrl-C at the prompt discards the line (Ctrl-D ends the run).
Any other ending signal (``SIGTERM``, ``SIGHUP``) ends the run, interactive or not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsh.agent import Agent, ModelError, ToolCall, load_model
from dsh.bash import Interrupted, Interrupts
from dsh.bash_env import outer_claim
from dsh.harness import notice_line
from dsh.loader import ModelChoice, Runtime
from dsh.session import SESSIONS, Session, ToolResult

from ._errors import UsageError
from ._exec import location_json
from ._open import open_runtime
from ._output import print_json, say

if TYPE_CHECKING:
    from dsh.agent import TurnResult
    from dsh.hooks import Notice
    from dsh.session.trace import TraceContext


class _Reporting(Agent):
    """An agent that says each tool call on stderr as it ends: ``bash: COMMAND (exit N)``."""

    async def call_tool(
        self, call: ToolCall, turn_id: str | None = None, *, trace: TraceContext | None = None
    ) -> ToolResult:
        result = await super().call_tool(call, turn_id, trace=trace)
        print(f"{call.name}: {_call_text(call)} ({_status(result)})", file=sys.stderr, flush=True)
        return result


def _call_text(call: ToolCall) -> str:
    command = call.arguments.get("command")
    text = command if isinstance(command, str) else " ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    return " ".join(text.split())[:200]


def _status(result: ToolResult) -> str:
    code = result.data.get("exit_code") if isinstance(result.data, dict) else None
    if isinstance(code, int):
        return f"exit {code}"
    return "error: " + " ".join(result.output.split())[:200] if result.is_error else "ok"


def choose_model(runtime: Runtime, flag: str | None) -> ModelChoice | None:
    """``--model NAME`` (with the deployment's config when it names the same provider), else the deployment's."""
    configured = runtime.deployment.model
    if flag is None:
        return configured
    if configured is not None and configured.provider == flag:
        return configured
    return ModelChoice(provider=flag)


def _interactive(args: argparse.Namespace) -> bool:
    return args.prompt is None and sys.stdin is not None and sys.stdin.isatty()


def _prompts(args: argparse.Namespace) -> Any:
    """The prompts of the run: ``--prompt``, else standard input whole, else (a terminal) line by line.

    A closed standard input gives none, as an empty one does. Text that is not UTF-8 (a byte of
    ``--prompt`` the locale could not decode, standard input the stream's encoding cannot read) is a
    :class:`UsageError` naming where it came from, before any of it reaches a provider.
    """
    if args.prompt is not None:
        yield _checked(args.prompt, "--prompt")
        return
    if sys.stdin is None:
        return
    if not sys.stdin.isatty():
        text = _checked(_read(sys.stdin.read), "standard input")
        if text.strip():
            yield text
        return
    while True:
        try:
            with Interrupts.prompting():  # the read blocks the event loop: a signal must break it here
                line = _checked(_read(_prompted_line), "standard input")
        except EOFError:
            print(file=sys.stderr)
            return
        except Interrupted as exc:
            if exc.reason != "SIGINT":
                raise
            Interrupts.rearm()  # Ctrl-C at the prompt discards the line, as a shell's does
            print(file=sys.stderr, flush=True)
            continue
        if line.strip():
            yield line


def _prompted_line() -> str:
    """One line from the terminal after ``> ``: on the terminal through ``input`` (line editing) when
    stdout is the terminal too, else on stderr, so stdout holds the answers alone."""
    if sys.stdout is not None and sys.stdout.isatty():
        return input("> ")
    sys.stderr.write("> ")
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.removesuffix("\n")


def _read(read: Callable[[], str]) -> str:
    """What ``read`` read from standard input, or a :class:`UsageError` when its encoding cannot read it."""
    try:
        text = read()
    except UnicodeDecodeError as exc:
        encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
        raise UsageError(
            f"the prompt on standard input is not {encoding} text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); send it in that encoding, or give it with --prompt",
            option="--prompt",
        ) from None
    return text


def _checked(text: str, where: str) -> str:
    """``text``, or a :class:`UsageError` when UTF-8 cannot hold it (a byte the locale could not decode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        byte = f"byte {ord(bad) - 0xDC00:#04x}" if 0xDC80 <= ord(bad) <= 0xDCFF else f"U+{ord(bad):04X}"
        raise UsageError(
            f"the prompt from {where} is not UTF-8 text ({byte} at character {exc.start})",
            option="--prompt",
            value=None if where != "--prompt" else text,
        ) from None
    return text


async def _turn(agent: Agent, prompt: str, interactive: bool) -> TurnResult | None:
    """One turn; from a terminal, Ctrl-C interrupts only it (None), and the run goes on."""
    if not interactive:
        return await agent.run_turn(prompt)
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(agent.run_turn(prompt))
    caught: list[str] = []

    def cancel(reason: str) -> None:
        caught.append(reason)
        loop.call_soon_threadsafe(task.cancel, reason)

    active = Interrupts.active()
    with active.cancelling(cancel) if active is not None else contextlib.nullcontext():
        try:
            return await task
        except asyncio.CancelledError:
            if not caught or caught[0] != "SIGINT":
                raise Interrupted(caught[0] if caught else "cancelled") from None
    Interrupts.rearm()
    print(
        "dsh: turn interrupted (SIGINT), recorded as such; the session goes on (Ctrl-D ends it)",
        file=sys.stderr,
        flush=True,
    )
    return None


async def model_run(args: argparse.Namespace) -> int:
    """Real turns with a provider; exit 0, or 1 when a turn failed (each failure one ``dsh:`` line)."""
    with open_runtime(choice=args.choice) as runtime:
        model = load_model(runtime, choose_model(runtime, args.model))
        store = runtime.ctx.require(SESSIONS)
        session: Session = (
            store.resume(args.session, lock=True)
            if args.session
            else store.create(None, lock=True, **outer_claim(os.environ))
        )
        source = "resume" if args.session else "startup"

        def notify(notice: Notice) -> None:
            print(notice_line(notice), file=sys.stderr)

        print(f"dsh: session {session.id}", file=sys.stderr, flush=True)
        try:
            agent = _Reporting(runtime.ctx, session, model, notify=notify, max_steps=args.max_steps)
            stopped = await agent.start(source)
        except BaseException:
            session.release()
            raise
        turns: list[dict[str, Any]] = []
        failed = False
        interactive = _interactive(args)
        for prompt in [] if stopped is not None else _prompts(args):
            try:
                result = await _turn(agent, prompt, interactive)
            except ModelError as exc:
                failed = True
                print(f"dsh: {exc}", file=sys.stderr, flush=True)
                turns.append({"prompt": prompt, "error": str(exc), "failed": str(exc), "text": "", "tool_calls": []})
                continue
            if result is None:
                turns.append({"prompt": prompt, "error": None, "interrupted": "SIGINT", "text": "", "tool_calls": []})
                continue
            if result.failed is not None:
                failed = True
                print(f"dsh: turn {result.turn_id} failed: {result.failed}", file=sys.stderr, flush=True)
            turns.append(
                {
                    "turn_id": result.turn_id,
                    "prompt": prompt,
                    "text": result.text,
                    "blocked": result.blocked,
                    "stopped": result.stopped,
                    "error": result.failed,
                    "failed": result.failed,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "name": c.name,
                            "arguments": c.arguments,
                            "output": r.output,
                            "is_error": r.is_error,
                        }
                        for c, r in result.tool_results
                    ],
                }
            )
            if not args.json and result.text:
                say(result.text)
            if result.stopped is not None:
                break
        await agent.end()
        session.release()
        if args.json:
            print_json(
                {
                    "session_id": session.id,
                    "location": location_json(session),
                    "model": model.name,
                    "turns": turns,
                    "stopped": stopped,
                }
            )
        return 1 if failed else 0
