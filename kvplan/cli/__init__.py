"""The `kvplan` command line: parse, call the pure core, render (one module per command).

`app` (the Typer app) and `main` (the console entry point) come from kvplan.cli.app, which imports
every command module; command modules import only kvplan.cli._common and their own helpers, never
this package's `app`, so any of them imports alone and there is no cycle.
"""

from kvplan.cli.app import app, main

__all__ = ["app", "main"]
