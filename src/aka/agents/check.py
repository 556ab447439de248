"""`aka check-agents`: is each agent ready to run here?

For a CLI agent: where its binary is, its version against the pinned one, which credentials or
endpoint it would use, and with `--live` a one-turn call through the same launcher code a run
uses. Agents that are not CLIs (noop, replay, ...) are always ready.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.table import Table

from aka.agents.cli_runner import (
    CliAgentSpec,
    CliOptions,
    agent_cli_dir,
    cli_agents,
    find_binary,
    isolated_env,
    new_request,
    run_headless,
)
from aka.agents.registry import AgentSettings, agent_names, get_agent
from aka.config.run_config import AgentFileConfig, load_run_config
from aka.errors import ConfigError

LIVE_PROMPT = "This is a connectivity check. Reply with the single word READY and do nothing else."
LIVE_TIMEOUT_SECONDS = 180.0
VERSION_PATTERN = re.compile(r"\d+(?:\.\d+)+(?:-[0-9A-Za-z.]+)?")


@dataclass(frozen=True)
class AgentCheck:
    name: str
    ready: bool
    binary: str = "built-in"
    version: str = "-"
    credentials: str = "-"
    live: str = "-"


def installed_version(binary: Path) -> str | None:
    """`<binary> --version`, run with a throw-away home so that it leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="aka-version-") as home:
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                                 env=isolated_env(Path(home), Path(home)), cwd=home, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
    match = VERSION_PATTERN.search(out.stdout + out.stderr)
    return match.group(0) if match else None


def describe_credentials(spec: CliAgentSpec, options: CliOptions, env: Mapping[str, str]) -> str | None:
    """What the CLI would authenticate or connect with; None when nothing is configured."""
    found: list[str] = []
    base_url = getattr(options, "base_url", None)
    if base_url:
        found.append(f"endpoint {base_url} (option base_url)")
    elif spec.endpoint_var and env.get(spec.endpoint_var):
        found.append(f"endpoint {env[spec.endpoint_var]} ({spec.endpoint_var})")
    if options.api_key_env:
        state = "set" if env.get(options.api_key_env) else "NOT SET"
        found.append(f"key in {options.api_key_env} ({state})")
        if not env.get(options.api_key_env):
            return None
    found += [f"{name} set" for name in spec.key_vars if env.get(name)]
    return "; ".join(found) or None


def _agent_settings(name: str) -> AgentSettings:
    path = get_agent(name).config_path
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) if path else None
    config = AgentFileConfig.model_validate(raw or {})
    return AgentSettings(config.model, config.effort, config.max_iterations, config.timeout_seconds)


def _live(spec: CliAgentSpec, binary: Path, settings: AgentSettings, options: CliOptions) -> str:
    settings = AgentSettings(settings.model, settings.effort, 2, LIVE_TIMEOUT_SECONDS)
    with tempfile.TemporaryDirectory(prefix="aka-check-") as scratch:
        work = Path(scratch) / "work"
        work.mkdir()
        request = new_request(work, Path(scratch) / "agent.log", LIVE_PROMPT, settings, options, binary)
        outcome = run_headless(spec, request)
    detail = f"{outcome.exit_reason}, {outcome.wall_seconds:.0f} s"
    return f"ok ({detail})" if outcome.ok else f"FAILED ({detail}): {outcome.message}"


def check_agent(name: str, live: bool, settings: AgentSettings | None = None,
                options: CliOptions | None = None) -> AgentCheck:
    spec = cli_agents().get(name)
    if spec is None:
        return AgentCheck(name, ready=True)
    options = options or spec.options_model()
    binary = find_binary(spec.package.binary)
    if binary is None:
        return AgentCheck(name, False, f"not installed ({spec.package.install})")
    version = installed_version(binary) or "unknown"
    if version != spec.package.version:
        version += f" (tested: {spec.package.version})"
    credentials = describe_credentials(spec, options, os.environ)
    result = _live(spec, binary, settings or _agent_settings(name), options) if live else "-"
    ready = credentials is not None and not result.startswith("FAILED")
    return AgentCheck(name, ready, str(binary), version, credentials or "none found", result)


def run_checks(agents: str, live: bool, config: Path | None) -> list[AgentCheck]:
    """`agents` is 'all' or a comma-separated list; `config` checks that run config's agent (every arm's) instead."""
    if config is not None:
        loaded = load_run_config(config)
        return [check_agent(arm.agent.name, live, arm.agent_settings,
                            arm.agent_options if isinstance(arm.agent_options, CliOptions) else None)
                for arm in loaded.arms]
    known = agent_names()
    names = known if agents.strip() == "all" else [n.strip() for n in agents.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"--agents: unknown agent(s) {', '.join(unknown)} (registered: {', '.join(known)})")
    return [check_agent(name, live) for name in names]


def checks_table(checks: list[AgentCheck]) -> Table:
    table = Table(caption=f"project-local CLIs: {agent_cli_dir()}")
    for header in ("agent", "ready", "binary", "version", "credentials / endpoint", "live call"):
        table.add_column(header, overflow="fold")
    for c in checks:
        table.add_row(c.name, "[green]yes[/]" if c.ready else "[red]no[/]", c.binary, c.version, c.credentials, c.live)
    return table
