"""Shared mechanics of the agents that drive a coding CLI (claude_code, codex, gemini, opencode, cursor).

Each CLI runs headless with the task's `work/` folder as its working directory and a fresh HOME
(`agent_home/`, beside `work/` in the task workspace: never evaluated, never shared between tasks).
The prompt goes in on stdin; a CLI that only takes it as an argument gets a short instruction to
read `AKA_PROMPT.md`, which is removed again afterwards. Its shell gets the platform's interpreter
and device variables (`aka.agents.agent_environment`). Standard output, the CLI's JSON event
stream, is read as it arrives (`aka.agents.cli_stream`): kept as `agent_transcript.jsonl`, its
model turns counted (`aka.agents.cli_turns`), the CLI ended at `max_iterations` when it has no
turn limit of its own, and normalized into an `AgentOutcome`; standard error goes to `agent.log`.
The timeout kills the CLI's whole process group (`aka.process`), and afterwards whatever still
carries the run's marker variable (tools in sessions of their own).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import shutil
import signal
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from aka.agents.agent_environment import agent_environment
from aka.agents.agent_sandbox import (
    AgentNetwork,
    SandboxUnavailableError,
    bwrap_prefix,
    guard_prefix,
    guarded,
    hidden_from_agent,
    network_namespace_works,
)
from aka.agents.cli_stream import EventStream
from aka.agents.cli_turns import JsonEvent, MarkEvent, TurnCounter
from aka.agents.egress import Destination, EgressGate, parse_destination
from aka.agents.registry import AgentContext, AgentSettings, load_agents, register_agent
from aka.evaluation.pids_limit import join_group, new_group, remove_group
from aka.evaluation.step_spec import own_gpu
from aka.process import CommandOutcome, StartedCommand
from aka.results.task_result import AgentOutcome
from aka.run.layout import AGENT_HOME_DIR
from aka.trees import remove_tree

logger = logging.getLogger(__name__)

AGENT_CLI_DIR_ENV = "AKA_AGENT_CLI_DIR"
RUN_MARKER_ENV = "AKA_AGENT_RUN_ID"
REPO_ROOT = Path(__file__).resolve().parents[3]
PROMPT_FILE_NAME = "AKA_PROMPT.md"
TRANSCRIPT_NAME = "agent_transcript.jsonl"
DEFAULT_TIMEOUT_SECONDS = 3600.0
LOCAL_ENDPOINT_KEY = "aka-local-endpoint"
MESSAGE_CHARS = 1000
AGENT_TASKS_MAX = 8192
"""Processes and threads an agent CLI and everything it starts may hold at once (its pids group,
`aka.evaluation.pids_limit`): a fork bomb in its shell stops there, not at the machine's pid_max."""
_REDIRECT_STDOUT = 'fd=$1; shift; exec "$@" >&"$fd" {fd}>&-'


class CliSetupError(Exception):
    """The run cannot start as configured (e.g. `api_key_env` names an unset variable)."""


class CliOptions(BaseModel):
    """`agent:` options shared by the CLI agents. `sandbox: bwrap` runs the CLI in bubblewrap.
    `network: gated` (default) gives the CLI a network namespace whose only way out is the egress
    gate (`aka.agents.egress`: model endpoints, `network_allow`, public addresses); `host` shares
    the machine's network (its services, a cluster's included, are then reachable)."""

    model_config = ConfigDict(extra="forbid")

    api_key_env: str | None = None
    sandbox: Literal["none", "bwrap"] = "none"
    network: Literal["gated", "host"] = "gated"
    network_allow: list[str] = []

    @field_validator("network_allow")
    @classmethod
    def _destinations(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                parse_destination(entry)
            except ValueError as exc:
                raise ValueError(f"network_allow: {exc}") from None
        return value


class EndpointOptions(CliOptions):
    """Options of CLIs that can talk to another endpoint (a proxy, vLLM, the scripted test server)."""

    base_url: str | None = None


@dataclass(frozen=True)
class CliPackage:
    """The CLI binary, the version this launcher was tested with, and how to install exactly that."""

    binary: str
    version: str
    install: str
    npm_spec: str | None = None


@dataclass(frozen=True)
class CliRequest:
    """One headless run: where it runs, what it is told, and the isolated environment it starts from."""

    workspace: Path
    home: Path
    transcript: Path
    log_path: Path
    prompt: str
    settings: AgentSettings
    base_url: str | None
    api_key_env: str | None
    binary: Path
    env: dict[str, str]
    sandbox: tuple[str, ...] = ()
    sandbox_env: Mapping[str, str] = field(default_factory=dict)
    remake_sandbox: Callable[[], tuple[str, ...]] | None = None  # a new `sandbox` when it failed to start

    def api_key(self) -> str | None:
        """The key named by `api_key_env`, if that option is set (the CLI's own variables pass through)."""
        if self.api_key_env is None:
            return None
        value = self.env.get(self.api_key_env)
        if not value:
            raise CliSetupError(f"agent option api_key_env names '{self.api_key_env}', which is not set")
        return value


@dataclass(frozen=True)
class CliCommand:
    argv: list[str]
    env: dict[str, str]
    stdin: bytes | None = None
    prompt_file: bool = False


@dataclass(frozen=True)
class RunSummary:
    """What the event stream says: how the run ended and what it cost (the turns are counted apart,
    by the spec's `marks`, the same way for every CLI)."""

    exit_reason: str
    message: str | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class CliAgentSpec:
    """Everything agent-specific: the package, its credential variables, how to start it, how to
    read its stream (`summarize`, and `marks` for the turns), and whether it enforces
    `max_iterations` itself (`own_turn_limit`); if not, the platform does."""

    name: str
    package: CliPackage
    key_vars: tuple[str, ...]
    endpoint_var: str | None
    command: Callable[[CliRequest], CliCommand]
    summarize: Callable[[list[JsonEvent], AgentSettings], RunSummary]
    marks: MarkEvent
    own_turn_limit: bool = False
    options_model: type[CliOptions] = EndpointOptions


_CLI_AGENTS: dict[str, CliAgentSpec] = {}


def cli_agent(spec: CliAgentSpec, module: str) -> CliAgentSpec:
    """Record `spec` (for `aka check-agents` and the installers) and register its launcher under
    `spec.name` with `spec.options_model`; `module` (the caller's `__name__`) holds its agent_config.yaml."""

    def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
        return run_cli_agent(spec, eval_config, workspace)

    launch_agent.__module__ = module
    register_agent(spec.name, options=spec.options_model)(launch_agent)
    _CLI_AGENTS[spec.name] = spec
    return spec


def cli_agents() -> dict[str, CliAgentSpec]:
    load_agents()
    return dict(_CLI_AGENTS)


def npm_specs() -> list[str]:
    """The pinned npm packages of all CLI agents, for `npm install --prefix .agent-clis`."""
    return sorted(s.package.npm_spec for s in cli_agents().values() if s.package.npm_spec)


def agent_cli_dir() -> Path:
    override = os.environ.get(AGENT_CLI_DIR_ENV)
    return Path(override).expanduser() if override else REPO_ROOT / ".agent-clis"


def find_binary(name: str) -> Path | None:
    """The project-local install (pinned) first, then PATH."""
    root = agent_cli_dir()
    for folder in (root / "node_modules" / ".bin", root):
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def isolated_env(home: Path, workspace: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with HOME, the XDG folders, TMPDIR and PWD moved
    to the run's own."""
    env = dict(os.environ if base is None else base)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        PWD=str(workspace),
        TMPDIR=str(home / "tmp"),
    )
    return env


def new_request(
    workspace: Path,
    log_path: Path,
    prompt: str,
    settings: AgentSettings,
    options: CliOptions,
    binary: Path,
    sandbox: tuple[str, ...] = (),
    base_env: Mapping[str, str] | None = None,
) -> CliRequest:
    """A request with a fresh, empty home beside `log_path`; the CLI's environment is `base_env`
    (default: this process's) with that home."""
    home = log_path.parent / AGENT_HOME_DIR
    remove_tree(home)
    (home / "tmp").mkdir(parents=True)
    return CliRequest(
        workspace=workspace,
        home=home,
        transcript=log_path.parent / TRANSCRIPT_NAME,
        log_path=log_path,
        prompt=prompt,
        settings=settings,
        base_url=getattr(options, "base_url", None),
        api_key_env=options.api_key_env,
        binary=binary,
        env=isolated_env(home, workspace, base_env),
        sandbox=sandbox,
    )


def not_installed(spec: CliAgentSpec) -> AgentOutcome:
    return AgentOutcome.ended(
        spec.name,
        "not_installed",
        None,
        message=f"'{spec.package.binary}' is neither in {agent_cli_dir()} nor on PATH; "
        f"install it with: {spec.package.install}",
    )


def run_cli_agent(spec: CliAgentSpec, context: AgentContext, workspace: Path) -> AgentOutcome:
    """What a CLI agent's `launch_agent` does: find the binary, run it once, summarize."""
    assert isinstance(context.options, CliOptions)
    binary = find_binary(spec.package.binary)
    if binary is None:
        return not_installed(spec)
    options = context.options
    keep = [options.api_key_env] if options.api_key_env else []
    base_env = agent_environment(context.task, context.device, workspace, keep)
    endpoints = model_endpoints(spec, options, base_env)
    bubblewrap = options.sandbox == "bwrap" or guarded()
    own_network = options.network == "gated" and bubblewrap and network_namespace_works()
    with EgressGate(endpoints, map(parse_destination, options.network_allow)) if own_network else _no_gate() as gate:
        network = AgentNetwork(gate.socket_path, tuple(e for e in endpoints if e.on_loopback)) if gate else None
        gpu = own_gpu(context.device, base_env)  # a parallel worker's agent sees only its own GPU's node
        try:
            sandbox = _sandbox(context, workspace, network, gpu)
        except SandboxUnavailableError as exc:
            return AgentOutcome.ended(spec.name, "not_configured", None, message=str(exc))
        request = new_request(
            workspace, context.log_path, context.prompt, context.settings, options, binary, sandbox, base_env
        )
        # by UUID: with one GPU's node, CUDA numbers that GPU 0, and the slot's index would name none
        sandbox_env = {**(network.environment() if network else {}), **({"CUDA_VISIBLE_DEVICES": gpu} if gpu else {})}
        remake = functools.partial(_sandbox, context, workspace, network, gpu)
        request = replace(request, sandbox_env=sandbox_env, remake_sandbox=remake)
        outcome = run_headless(spec, request)
        if gate and gate.refused:
            _log_refusals(context.log_path, gate.refused)
        return outcome


def model_endpoints(spec: CliAgentSpec, options: CliOptions, env: Mapping[str, str]) -> list[Destination]:
    """Where the CLI's model is: its `base_url` option and its endpoint variable (a malformed one is
    left to the CLI to report)."""
    urls = [getattr(options, "base_url", None), env.get(spec.endpoint_var) if spec.endpoint_var else None]
    found = []
    for url in filter(None, urls):
        try:
            found.append(parse_destination(url))
        except ValueError:
            continue
    return found


def _sandbox(context: AgentContext, workspace: Path, network: AgentNetwork | None, gpu: str | None) -> tuple[str, ...]:
    home = (context.log_path.parent / AGENT_HOME_DIR).resolve()
    assert isinstance(context.options, CliOptions)
    if context.options.sandbox == "bwrap":
        return bwrap_prefix(workspace.resolve(), home, hidden_from_agent(context), network, gpu)
    return guard_prefix(workspace.resolve(), home, network, gpu)


@contextlib.contextmanager
def _no_gate() -> Iterator[None]:
    yield None


def _log_refusals(log_path: Path, refused: list[str]) -> None:
    """What the gate refused, at the end of the agent's log (a CLI's own error rarely says)."""
    lines = [f"aka egress gate refused: {why}" for why in dict.fromkeys(refused)]
    with log_path.open("a", encoding="utf-8") as log:
        log.write("\n".join(lines[:50]) + "\n")
    logger.info("the agent's network gate refused %d connection(s); see %s", len(refused), log_path)


def run_headless(spec: CliAgentSpec, request: CliRequest) -> AgentOutcome:
    timeout = request.settings.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
    try:
        command = spec.command(request)
    except CliSetupError as exc:
        return AgentOutcome.ended(spec.name, "not_configured", None, message=str(exc))
    prompt_path = request.workspace / PROMPT_FILE_NAME
    if command.prompt_file:
        prompt_path.write_text(request.prompt, encoding="utf-8")
    turn_limit = None if spec.own_turn_limit else request.settings.max_iterations
    try:
        for starts_left in reversed(range(SANDBOX_STARTS)):
            stream = EventStream(request.transcript, TurnCounter(spec.marks), turn_limit)
            result, events = _launch(request, command, stream, timeout)
            if not starts_left or request.remake_sandbox is None or not _sandbox_never_started(result, events):
                break
            with request.log_path.open("a", encoding="utf-8") as log:
                log.write("(the sandbox failed to start, a path it masks or hides likely gone since: started again)\n")
            request = replace(request, sandbox=request.remake_sandbox())
    finally:
        if command.prompt_file:
            prompt_path.unlink(missing_ok=True)
    summary = spec.summarize(events, request.settings)
    return _outcome(spec.name, summary, stream, result, request)


SANDBOX_STARTS = 3
"""Starts of an agent whose sandbox fails to start before it gives up (`_sandbox_never_started`)."""


def _sandbox_never_started(result: CommandOutcome, events: list[JsonEvent]) -> bool:
    """Whether bubblewrap failed to set the sandbox up, so the CLI never ran: its own error is all
    it printed. A socket masked by the guard (`agent_sandbox._masked_sockets`) or a folder it hides
    (a Ray session's) that is gone by the time bubblewrap starts fails it so: it cannot make the
    target on the read-only root."""
    return result.exit_code == 1 and not events and result.output_tail.lstrip().startswith("bwrap: Can't")


def _launch(
    request: CliRequest, command: CliCommand, stream: EventStream, timeout: float
) -> tuple[CommandOutcome, list[JsonEvent]]:
    """One start of the CLI in its sandbox, its events read into `stream`; everything it started
    is killed at the end (its process group, its control group, processes carrying its marker)."""
    marker = uuid.uuid4().hex
    group = new_group(AGENT_TASKS_MAX)
    try:
        argv = ["/bin/bash", "-c", _REDIRECT_STDOUT, "aka-agent", str(stream.write_fd), *request.sandbox, *command.argv]
        try:
            started = StartedCommand(
                argv,
                request.workspace,
                {**command.env, **request.sandbox_env, RUN_MARKER_ENV: marker},
                request.log_path,
                command.stdin is not None,
                pass_fds=(stream.write_fd,),
                preexec=functools.partial(join_group, str(group)) if group else None,
            )
        except BaseException:
            stream.abandon()
            raise
        stream.watch(started.proc.pid)
        try:
            result = started.finish(command.stdin, timeout)
        finally:
            kill_escaped(marker)
            events = stream.close()
    finally:
        if group is not None:
            remove_group(group)  # and whatever of the agent's still runs in it
    return result, events


def kill_escaped(marker: str) -> list[int]:
    """Kill what the run left outside its process group: tools that a CLI starts in a session of
    their own (gemini's and opencode's shells do) survive the group kill. They are recognized by
    the run's marker variable, which they inherit. Two passes (a process may start one while the
    first is killed); each process is counted once."""
    needle = f"{RUN_MARKER_ENV}={marker}".encode()
    killed: set[int] = set()
    for _ in range(2):
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and needle in (proc / "environ").read_bytes().split(b"\0"):
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed.add(int(proc.name))
            except OSError:
                continue
    if killed:
        logger.warning("killed %d agent process(es) that outlived the CLI: %s", len(killed), sorted(killed))
    return sorted(killed)


def _outcome(
    name: str, summary: RunSummary, stream: EventStream, result: CommandOutcome, request: CliRequest
) -> AgentOutcome:
    """The one outcome rule (`AgentOutcome.ended`) on what the stream and the exit say."""
    reason, message = summary.exit_reason, summary.message
    timeout = request.settings.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
    if stream.stopped_at_limit:
        reason, message = (
            "max_iterations",
            (f"stopped by the platform after {stream.counter.turns} model turns (max_iterations={stream.turn_limit})"),
        )
    elif result.timed_out:
        reason, message = "timeout", f"killed after {timeout:g} s (timeout_seconds)"
    elif reason == "finished" and result.exit_code != 0:
        reason, message = "error", result.describe()
    elif reason == "error":
        message = f"{message}; {result.describe()}" if message else result.describe()
    return AgentOutcome.ended(
        name,
        reason,
        stream.counter.turns,
        message=clip(message),
        wall_seconds=round(result.seconds, 3),
        tool_calls=summary.tool_calls,
        input_tokens=summary.input_tokens,
        output_tokens=summary.output_tokens,
        cost_usd=summary.cost_usd,
        transcript=str(request.transcript),
    )


MAX_COUNT = 2**40  # tokens or calls a CLI reports: more is no count (a red team's 1e30 broke the Parquet export)


def number(value: object) -> int:
    """A count a CLI reports (tokens, calls): a whole number from 0 to `MAX_COUNT`, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if not math.isfinite(value) or not 0 <= value <= MAX_COUNT:
        return 0
    return int(value)


def dollars(value: object) -> float | None:
    """A cost in dollars a CLI reports: finite and not negative, else unknown (None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value < 1e9 else None


def clip(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."
