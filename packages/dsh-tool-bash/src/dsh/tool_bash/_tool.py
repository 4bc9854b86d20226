"""Model-facing shell tools: a foreground/background shell call plus companions to read and stop tasks."""

import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from dsh.bash import (
    DSH_ENV_PREFIX,
    SHELL_EXECUTOR,
    BashExecRequest,
    ExecResult,
    Executor,
    LocalExecutor,
    Shell,
    driven_blocking,
)
from dsh.bash_env import BASH_ENV, CollectionError
from dsh.core import Context, DshError, FieldError, Plugin
from dsh.session import TOOLS, ToolExecution, ToolResult, ToolSpec

from ._errors import ArgumentError

if TYPE_CHECKING:
    from dsh.bash.aio import BackgroundProcess

BASH_DESCRIPTION = (
    "Run a command in a fresh, non-interactive bash shell and return its output and exit code. "
    "The working directory defaults to the session's; `workdir` overrides it. Set `run_in_background` "
    "for long-running commands and read them later with the companion output tool. "
    f"The harness describes the current session and environment through managed ${DSH_ENV_PREFIX}* "
    f"environment variables, set anew for every call; inspect them (for example `env | grep ^{DSH_ENV_PREFIX}`) "
    "when you need facts about the current harness."
)


class _ShellToolConfig(NamedTuple):
    default_timeout: float = 120.0
    """Seconds a foreground call may run when the model gives no timeout."""
    max_timeout: float = 600.0


class ShellToolConfig(_ShellToolConfig):
    """Config of a shell tool plugin; a checked record (``_replace`` and ``_make`` skip the checks)."""

    __slots__ = ()

    def __new__(cls, default_timeout: float = 120.0, max_timeout: float = 600.0) -> "ShellToolConfig":
        for name, value in (("default_timeout", default_timeout), ("max_timeout", max_timeout)):
            if not value > 0:
                raise FieldError(name, "must be greater than 0")
        return super().__new__(cls, default_timeout, max_timeout)


class TaskTable:
    """Background tasks started by one shell tool, by task id.

    A plain slotted class: mutable state, not a record (dsh's record rule, root README).
    """

    __slots__ = ("tasks",)

    def __init__(self, tasks: "dict[str, BackgroundProcess] | None" = None) -> None:
        self.tasks: dict[str, BackgroundProcess] = {} if tasks is None else tasks

    def __repr__(self) -> str:
        return f"TaskTable(tasks={self.tasks!r})"

    def kill_all(self) -> None:
        """Stop every task's process group at once (used when the tool unloads)."""
        for task in self.tasks.values():
            if task.exit_code is None:
                task.kill()
        self.tasks.clear()


def _format(result: ExecResult) -> str:
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        parts.append("[timed out: the process group was killed]")
    parts.append(f"[exit code: {result.exit_code}]")
    return "\n".join(parts)


def _number(arguments: Mapping[str, Any], key: str) -> float | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ArgumentError(f"argument '{key}' must be a positive number of seconds, not {value!r}", argument=key)
    return float(value)


class ShellTool:
    """The ``bash`` (or ``pwsh``) tool.

    Every call collects a fresh ``DSH_*`` snapshot for its own execution and builds the
    request from named arguments only: model-supplied ``env`` or ``stdin`` never reach the child.
    """

    def __init__(
        self, ctx: Context, *, name: str, shell: Shell, description: str, config: ShellToolConfig, tasks: TaskTable
    ) -> None:
        self._ctx = ctx
        self.shell = shell
        self.config = config
        self.tasks = tasks
        self._fallback: LocalExecutor | None = None
        self.spec = ToolSpec(
            name=name,
            description=description,
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command to run."},
                    "description": {"type": "string", "description": "A few words on what the command does."},
                    "timeout": {
                        "type": "number",
                        "description": f"Seconds before the command is killed (max {config.max_timeout:g}).",
                    },
                    "workdir": {"type": "string", "description": "Directory to run in."},
                    "run_in_background": {"type": "boolean", "description": "Start and return a task id at once."},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        )

    def executor(self) -> Executor:
        """The deployment's executor, or a default local one."""
        executor = self._ctx.get(SHELL_EXECUTOR)
        if executor is not None:
            return executor
        if self._fallback is None:
            self._fallback = LocalExecutor()
        return self._fallback

    @property
    def can_run_sync(self) -> bool:
        """True when a foreground call runs to its end without an event loop (the executor has ``run_sync``)."""
        return callable(getattr(self.executor(), "run_sync", None))

    def request(
        self, arguments: Mapping[str, Any], execution: ToolExecution, dsh_env: Mapping[str, str] | None = None
    ) -> BashExecRequest:
        """Build the request for a call: named arguments plus a fresh snapshot for ``execution``.

        ``dsh_env`` is that snapshot when the caller already collected it (without blocking its loop).
        """
        for flag, kind in (("run_in_background", bool), ("description", str)):
            if flag in arguments and not isinstance(arguments[flag], kind):  # else "yes" ran in the foreground
                raise ArgumentError(
                    f"argument '{flag}' must be a {'boolean' if kind is bool else 'string'}, not {arguments[flag]!r}",
                    argument=flag,
                    tool=self.spec.name,
                )
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ArgumentError(
                "argument 'command' must be a non-blank string", argument="command", tool=self.spec.name
            )
        timeout = _number(arguments, "timeout") or self.config.default_timeout
        timeout = min(timeout, self.config.max_timeout)
        workdir = arguments.get("workdir")
        if workdir is not None and not isinstance(workdir, str):
            raise ArgumentError("argument 'workdir' must be a string", argument="workdir", tool=self.spec.name)
        session = execution.session
        base = session.cwd if session is not None else os.getcwd()
        cwd = os.path.normpath(os.path.join(base, workdir)) if workdir else (session.cwd if session else None)
        if dsh_env is None:
            dsh_env = self._ctx.require(BASH_ENV).collect(execution)
        return BashExecRequest(
            command=command,
            cwd=cwd,
            timeout=timeout,
            env=dict(execution.env),
            dsh_env=dsh_env,
            shell=self.shell,
            ambient=execution.ambient,
            workspace=session.cwd if session is not None else None,
        )

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        """Run the command in the foreground, or start it in the background.

        Under an event loop the call awaits (other calls go on). Driven without one
        (:func:`dsh.bash.driven_blocking`: a one-shot ``dsh exec``) it blocks, through the
        executor's ``run_sync``, and the coroutine never suspends.
        """
        try:
            registry = self._ctx.require(BASH_ENV)
            blocking = driven_blocking()
            snapshot = registry.collect(execution) if blocking else await registry.collect_async(execution)
            request = self.request(arguments, execution, snapshot)
            executor = self.executor()
            # Optional contributors that failed for this call (their keys are absent): recorded with it.
            warned = {"warnings": list(snapshot.warnings)} if snapshot.warnings else {}
            if arguments.get("run_in_background") is True:
                if blocking:
                    raise DshError(f"{self.spec.name}: a background task needs a running event loop")
                task = await executor.start(request)
                self.tasks.tasks[task.id] = task
                return ToolResult(
                    f"started background task {task.id}; read it with {self.spec.name}_output",
                    data={"task_id": task.id, **warned},
                )
            if blocking:
                run_sync = getattr(executor, "run_sync", None)
                if not callable(run_sync):
                    raise DshError(f"the shell executor {type(executor).__name__} cannot run without an event loop")
                result: ExecResult = run_sync(request)
            else:
                result = await executor.run(request)
        except (CollectionError, DshError) as exc:
            return ToolResult(str(exc), is_error=True, data={"error": str(exc)})
        data = result.as_data() | warned
        return ToolResult(_format(result), is_error=result.exit_code != 0, data=data, value=result)


class _TaskTool:
    def __init__(self, name: str, description: str, tasks: TaskTable, stop: bool) -> None:
        self.tasks = tasks
        self.stop = stop
        self.spec = ToolSpec(
            name=name,
            description=description,
            parameters={
                "type": "object",
                "properties": {"task_id": {"type": "string"}},
                "required": ["task_id"],
                "additionalProperties": False,
            },
        )

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        task_id = arguments.get("task_id")
        task = self.tasks.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            known = ", ".join(sorted(self.tasks.tasks)) or "none"
            return ToolResult(f"no background task {task_id!r}; known tasks: {known}", is_error=True)
        code: int | None
        if self.stop:
            code = await task.stop()
        else:
            code = task.exit_code
        out, err = task.read()
        status = "running" if code is None else f"exited with code {code}"
        text = "\n".join(p for p in (out.rstrip("\n"), ("[stderr]\n" + err.rstrip("\n")) if err else "") if p)
        data = {"task_id": task.id, "exit_code": code, "stdout": out, "stderr": err}
        # Both cut to their last max_output characters, as a foreground call's; the spills hold it all.
        for stream in ("stdout_spill", "stderr_spill"):
            if (spill := getattr(task, stream, None)) is not None:
                data[stream] = spill
        return ToolResult(f"{text}\n[{task.id} {status}]".lstrip("\n"), data=data)


def install_shell_tools(
    ctx: Context, *, name: str, shell: Shell, description: str, config: ShellToolConfig
) -> ShellTool:
    """Register a shell tool and its ``<name>_output`` and ``<name>_stop`` companions on ``ctx``'s fiber."""
    tools = ctx.require(TOOLS)
    tasks = TaskTable()
    tool = ShellTool(ctx, name=name, shell=shell, description=description, config=config, tasks=tasks)
    tools.register(tool)
    tools.register(
        _TaskTool(f"{name}_output", f"Read new output and the status of a background {name} task.", tasks, stop=False)
    )
    tools.register(
        _TaskTool(f"{name}_stop", f"Stop a background {name} task (its whole process group).", tasks, stop=True)
    )
    ctx.effect(lambda: tasks.kill_all, label=f"{name} background tasks")
    return tool


def _apply(ctx: Context, config: ShellToolConfig) -> None:
    install_shell_tools(ctx, name="bash", shell="bash", description=BASH_DESCRIPTION, config=config)


plugin = Plugin(name="tool-bash", apply=_apply, Config=ShellToolConfig, inject=(BASH_ENV, TOOLS))
"""The ``tool-bash`` entry of the ``dsh.plugins`` group."""
