"""`aka check-agents`: is each agent ready to run here, and if not, what does it still need?

For a CLI agent: where its binary is, its version against the pinned one, which credentials or
endpoint it would use, and with `--live` a one-turn call through the same launcher code a run
uses. For an `llm`-protocol agent (`llm`, `deepseek_harness`): its model, endpoint and key, and
with `--live` one request. Any other agent is ready once its options validate (`replay` needs
`solutions_dir`). `needs` lists what is missing, each as the fix.
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
from pydantic import BaseModel, ValidationError
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
from aka.agents.llm import LlmOptions
from aka.agents.llm.readiness import live_call, llm_needs, llm_uses
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
    needs: str = "-"


def installed_version(binary: Path) -> str | None:
    """`<binary> --version`, run with a throw-away home so that it leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="aka-version-") as home:
        try:
            out = subprocess.run(
                [str(binary), "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                env=isolated_env(Path(home), Path(home)),
                cwd=home,
                check=False,
            )
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


def _missing_options(error: ValidationError) -> list[str]:
    return [f"agent option `{'.'.join(str(p) for p in e['loc'])}` ({e['msg'].lower()})" for e in error.errors()]


def _options(name: str, options: BaseModel | None) -> tuple[BaseModel | None, list[str]]:
    """The agent's options as given, or its defaults; None and what is missing when they do not validate."""
    if options is not None:
        return options, []
    try:
        return get_agent(name).options_model(), []
    except ValidationError as exc:
        return None, _missing_options(exc)


def _check_llm(
    name: str, live: bool, settings: AgentSettings, options: LlmOptions | None, missing: list[str]
) -> AgentCheck:
    base_url = options.base_url if options is not None else None
    api_key_env = options.api_key_env if options is not None else None
    needs = llm_needs(settings, base_url, api_key_env, os.environ)
    needs += [m for m in missing if "base_url" not in m]
    result = "-"
    if live and not needs and options is not None and base_url:
        result = live_call(
            settings, options.api, base_url, api_key_env, LIVE_PROMPT, LIVE_TIMEOUT_SECONDS, options.extra_body
        )
        if result.startswith("FAILED"):
            needs.append("a working endpoint (the live call failed)")
    return AgentCheck(
        name,
        not needs,
        credentials=llm_uses(base_url, api_key_env, os.environ),
        live=result,
        needs="; ".join(needs) or "-",
    )


def _needs_credentials(spec: CliAgentSpec, options: CliOptions) -> str:
    if options.api_key_env and not os.environ.get(options.api_key_env):
        return f"its key in ${options.api_key_env} (not set)"
    endpoint = "agent option `base_url`" if "base_url" in type(options).model_fields else ""
    if spec.endpoint_var:
        endpoint += f"{' or ' if endpoint else ''}${spec.endpoint_var}"
    return f"a key (${', $'.join(spec.key_vars)})" + (f" or an endpoint ({endpoint})" if endpoint else "")


def check_agent(
    name: str, live: bool, settings: AgentSettings | None = None, options: BaseModel | None = None
) -> AgentCheck:
    spec = cli_agents().get(name)
    settings = settings or _agent_settings(name)
    if spec is None:
        checked, missing = _options(name, options)
        if issubclass(get_agent(name).options_model, LlmOptions):
            return _check_llm(name, live, settings, checked if isinstance(checked, LlmOptions) else None, missing)
        return AgentCheck(name, not missing, needs="; ".join(missing) or "-")
    cli_options = options if isinstance(options, CliOptions) else spec.options_model()
    binary = find_binary(spec.package.binary)
    if binary is None:
        return AgentCheck(
            name, False, f"not installed ({spec.package.install})", needs=f"the CLI: {spec.package.install}"
        )
    version = installed_version(binary) or "unknown"
    if version != spec.package.version:
        version += f" (tested: {spec.package.version})"
    credentials = describe_credentials(spec, cli_options, os.environ)
    result = _live(spec, binary, settings, cli_options) if live else "-"
    needs = [] if credentials is not None else [_needs_credentials(spec, cli_options)]
    if result.startswith("FAILED"):
        needs.append("a working endpoint and key (the live call failed)")
    return AgentCheck(
        name, not needs, str(binary), version, credentials or "none found", result, "; ".join(needs) or "-"
    )


def run_checks(agents: str, live: bool, config: Path | None) -> list[AgentCheck]:
    """`agents` is 'all' or a comma-separated list; `config` checks that run config's agent (every arm's) instead."""
    if config is not None:
        loaded = load_run_config(config)
        return [check_agent(arm.agent.name, live, arm.agent_settings, arm.agent_options) for arm in loaded.arms]
    known = agent_names()
    names = known if agents.strip() == "all" else [n.strip() for n in agents.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"--agents: unknown agent(s) {', '.join(unknown)} (registered: {', '.join(known)})")
    return [check_agent(name, live) for name in names]


def checks_table(checks: list[AgentCheck]) -> Table:
    table = Table(caption=f"project-local CLIs: {agent_cli_dir()}")
    for header in ("agent", "ready", "binary", "version", "credentials / endpoint", "live call", "needs"):
        table.add_column(header, overflow="fold")
    for c in checks:
        table.add_row(
            c.name, "[green]yes[/]" if c.ready else "[red]no[/]", c.binary, c.version, c.credentials, c.live, c.needs
        )
    return table
