"""Layer 14 of 14, cli: the `kvplan` command line. Parse, call the layers below, render (one module per command).

`main` (the console entry point) comes from kvplan.cli.main, which imports only the command module
the command line names; `app` (the whole Typer app, every command) is built on first use. Command
modules import only kvplan.cli._common and their own helpers, never kvplan.cli.main, so any of them
imports alone and there is no cycle.
"""

from kvplan.cli.main import main, whole_app

__all__ = ["app", "main"]


def __getattr__(name: str):
    if name == "app":  # `from kvplan.cli import app`: every command, imported on first use
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
