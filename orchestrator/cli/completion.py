"""``orch completion SHELL``: the shell's completion script, from click's completion."""

from __future__ import annotations

import click


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL. It completes commands, options, model names,
    aliases, councils, run ids and plugin names, read from files (never a network call).

    \b
    Install it once:
      bash:  orch completion bash > ~/.local/share/bash-completion/completions/orch
      zsh:   orch completion zsh > "${fpath[1]}/_orch"
      fish:  orch completion fish > ~/.config/fish/completions/orch.fish
    """
    from click.shell_completion import get_completion_class

    from orchestrator.cli import cli
    from orchestrator.operations.completion import ENV_VAR

    script = get_completion_class(shell)(cli, {}, "orch", ENV_VAR)
    click.echo(script.source())
