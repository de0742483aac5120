"""The ``orch`` command. Subcommands load lazily so ``orch --help`` never imports litellm."""

from __future__ import annotations

import importlib
import os
import sys

import click

from orchestrator import __version__
from orchestrator.errors import OrchError

# name -> "module:attribute"; imported only when that command runs (or its help is shown).
COMMANDS = {
    "fanout": "orchestrator.cli.fanout:fanout",
    "bench": "orchestrator.cli.bench:bench",
    "status": "orchestrator.cli.status:status",
    "spend": "orchestrator.cli.spend:spend",
    "ledger": "orchestrator.cli.ledger_cmds:ledger",
    "provider": "orchestrator.cli.config_cmds:provider",
    "alias": "orchestrator.cli.config_cmds:alias",
    "council": "orchestrator.cli.council:council",
    "plugins": "orchestrator.cli.plugins_cmd:plugins",
    "model": "orchestrator.cli.model_cmds:model",
    "server": "orchestrator.cli.server_cmds:server",  # the old `orch local` start|stop|status
    "local": "orchestrator.cli.server_cmds:local",
    "doctor": "orchestrator.cli.doctor:doctor",
    "runs": "orchestrator.cli.runs:runs",
    "models": "orchestrator.cli.models_cmd:models",
    "completion": "orchestrator.cli.completion:completion",
    "mcp": "orchestrator.cli.mcp_cmd:mcp",
    "serve": "orchestrator.cli.serve:serve",
    "ui": "orchestrator.cli.ui:ui",
}


class LazyGroup(click.Group):
    """A click group whose built-in commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        from orchestrator.operations import completion

        return completion.install(command) if completion.completing() else command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help without importing every command module: keep `orch --help` fast.
        rows = [(name, SUMMARIES[name]) for name in COMMANDS if name in SUMMARIES]
        rows += [(n, c.get_short_help_str(60)) for n, c in self.commands.items()
                 if n not in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.ClickException as exc:  # `orch --bogus`: one line too
            from orchestrator.cli.usage import one_line

            raise one_line(exc) from None

    def invoke(self, ctx: click.Context):
        from orchestrator.security.scrubbed_io import scrubbed_output

        with scrubbed_output():  # no registered key value is ever printed
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except OrchError as exc:
            click.echo(f"orch: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("orch: interrupted", err=True)
            ctx.exit(130)
        except Terminated:
            click.echo("orch: terminated", err=True)
            ctx.exit(143)
        except click.exceptions.ClickException as exc:  # a usage mistake: one line, exit 2
            from orchestrator.cli.usage import one_line

            raise one_line(exc) from None
        except (click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise  # BrokenPipeError: stdout's reader left; main() ends quietly
        except Exception as exc:  # a bug, not bad input: still one line, the trace in the log
            from orchestrator.runtime import log
            from orchestrator.security.secrets import scrub

            log().debug("internal_error", exc_info=True)
            first = (str(exc).splitlines() or [""])[0]
            click.echo(f"orch: internal error: {type(exc).__name__}: {scrub(first)} "
                       "(LOG_LEVEL=debug shows the traceback; please report it)", err=True)
            ctx.exit(1)


SUMMARIES = {
    "bench": "A bake-off: contestants on tasks with hidden checks, honest statistics.",
    "fanout": "Run one briefing on several models at once (a wave).",
    "status": "Show a wave's legs, rebuilt from disk if the run was killed.",
    "spend": "Roll up the spend ledger: tokens and dollars by model, day, wave...",
    "ledger": "The spend ledger itself: upgrade its schema, export its rows (csv, jsonl).",
    "provider": "Declare OpenAI-compatible endpoints (provider add|list|remove).",
    "alias": "Short names for models (alias set|list|remove).",
    "council": "Multi-model review and saved model lists (council run|save|list|stats).",
    "plugins": "List plugins: where each came from, its hooks, whether it loaded.",
    "model": "Per-model settings: capability tier (model set-tier|tiers).",
    "local": "The embedded local model: its server (local start|stop|status), binary and "
             "GGUF models (local build|add|list|remove).",
    "doctor": "Check the set-up: keys, endpoints, names, variants, local model, plugins.",
    "runs": "List past waves and councils; show, search, tail or clean them up (runs show|search|tail|gc).",
    "models": "Every model you can address, with window, ceiling, prices and abilities.",
    "completion": "Print the shell completion script (completion bash|zsh|fish).",
    "mcp": "Serve orch's tools to coding agents over MCP on stdio (fanout, council, spend, runs).",
    "ui": "A local read-only web view of runs, waves, councils, benches and spend.",
    "serve": "The warm daemon that makes fanout/council/bench start fast (serve start|stop|...).",
}


def _log_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        import os

        from orchestrator import runtime

        os.environ["ORCH_LOG_JSON"] = "1"
        runtime.configure_logging.cache_clear()
        runtime.configure_logging()


def _plugins_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:  # read from argv before parsing already (directory.from_argv): said here too
        os.environ["ORCH_PLUGINS_DIR"] = value


# color=True: click never strips an escape sequence from what it echoes (it does when piped);
# the outlet shows every one escaped instead, on a terminal and piped alike
# (orchestrator/security/outlet.py): stripped, a model's ESC[2K would vanish unseen.
@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "color": True})
@click.version_option(__version__, prog_name="orch")
@click.option("--log-json", is_flag=True, expose_value=False, is_eager=True,
              callback=_log_json, help="Logs as JSON lines on stderr (default: one orch: line each).")
@click.option("--plugins-dir", metavar="DIR", expose_value=False, is_eager=True,
              type=click.Path(exists=True, file_okay=False),
              callback=_plugins_dir,
              help="Load every *.py in DIR as a plugin (default: config plugins.dir, else "
                   "ORCH_HOME/plugins).")
def cli() -> None:
    """orch: a second (and third, and fifth) opinion from several models at once.

    \b
    Quick start:
      orch provider add myvllm --base-url http://127.0.0.1:8000/v1
      orch fanout --models myvllm/qwen3-8b,openai/gpt-4o-mini --prompt "Why does this flake?"
      orch spend --since 7d

    Config lives in ORCH_HOME (default ~/.config/orch). Logs go to stderr at LOG_LEVEL
    (default warning): one line each (orch: LEVEL: ...), JSON lines only with --log-json;
    stdout carries only each command's output.
    """
    from orchestrator import runtime

    if runtime.job_logging is None:  # each command starts at LOG_LEVEL: an earlier -q in
        runtime.configure_logging.cache_clear()  # this process (CliRunner) does not linger


def _command_word() -> str | None:
    """The subcommand named on the command line (or on the one being TAB-completed)."""
    if "_ORCH_COMPLETE" in os.environ:
        words = os.environ.get("COMP_WORDS", "").split()
        cword = os.environ.get("COMP_CWORD", "0")
        return words[1] if cword.isdigit() and int(cword) > 1 and len(words) > 1 else None
    return sys.argv[1] if len(sys.argv) > 1 else None


def _register_plugin_commands() -> None:
    """Let plugins add subcommands; a broken plugin is reported once and skipped."""
    word = _command_word()
    if word in COMMANDS:
        return  # a built-in command runs: plugin commands can't be what was asked for
    from orchestrator import runtime
    from orchestrator.notices import warn as stderr_warn
    from orchestrator.plugin_host.declared import add_commands
    from orchestrator.plugin_host.plugins import load

    if word in (None, "--help", "-h", "--version"):  # the command list (or a TAB on the
        # command word): only the plugins that can add a command; the built-ins declare
        # theirs (none today)
        pm = load(runtime.config().section("plugins"), warn=stderr_warn, commands_only=True)
    else:  # a plugin's command runs: the whole manager, the one it will ask for (cached)
        pm = runtime.plugin_manager()
    add_commands(pm, cli, reserved=COMMANDS, warn=stderr_warn)


class Terminated(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt
    """SIGTERM outside a wave (a wave watches its own signals and writes wave.json)."""


def _terminate(signum, frame) -> None:
    raise Terminated()


def main() -> None:
    import signal

    # Watched from the first line to the last: SIGINT is KeyboardInterrupt already; SIGTERM
    # becomes Terminated (exit 143, one line) instead of a silent kill mid-write.
    signal.signal(signal.SIGTERM, _terminate)
    from orchestrator import closed_pipe, leaving

    closed_pipe.install()  # `orch runs | head -1`: the rest goes nowhere, the run goes on
    try:
        _main()
    except BrokenPipeError:  # a write around sys.stdout (its buffer) met the closed pipe
        closed_pipe.silence(sys.__stdout__)
        leaving.leave(0)
        sys.exit(0)
    except SystemExit as done:
        # The exit is orch's: a thread a plugin started, or an abandoned tool call in native
        # code, never holds (or crashes) the end once everything is written.
        leaving.leave(done.code)
        raise
    leaving.leave(0)


def _main() -> None:
    from orchestrator.plugin_host.directory import from_argv

    from_argv(sys.argv[1:])  # --plugins-dir: its plugins' commands and options load first
    try:
        _register_plugin_commands()
    except OrchError as exc:
        if "_ORCH_COMPLETE" not in os.environ:  # a TAB must not print errors into the shell
            click.echo(f"orch: error: {exc}", err=True)
            sys.exit(1)
    except (KeyboardInterrupt, Terminated) as exc:
        sys.exit(130 if isinstance(exc, KeyboardInterrupt) else 143)
    cli(prog_name="orch")
