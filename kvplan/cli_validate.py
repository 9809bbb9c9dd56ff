"""Placeholder: the `validate` sub-commands register here (being written)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the kvplan app."""
