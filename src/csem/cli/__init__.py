"""The ``csem`` command: a thin typer app; each sub-command lives in its own module here.

Command modules register themselves on :data:`app` when imported; they only parse arguments
and call the library functions of the stage packages.
"""

from __future__ import annotations

import importlib
import os

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="csem: LLM judges (G-Eval) and learned evaluation metrics distilled from them (CSEM).")

# one module per command group; a module missing here simply adds no command
_COMMAND_MODULES = ("judge", "meta", "train", "score", "collect", "annotate", "pipeline", "example")


def _load_commands() -> None:
    for name in _COMMAND_MODULES:
        try:
            importlib.import_module(f"csem.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"csem.cli.{name}":
                raise


def main() -> None:
    """Entry point: run the command; expected failures (bad input, missing model, unreachable
    judge) print one ``csem: error: ...`` line and exit 1 (set ``CSEM_DEBUG=1`` for the traceback)."""
    _load_commands()
    try:
        app()
    except (ValueError, OSError, RuntimeError, KeyError) as exc:
        if os.environ.get("CSEM_DEBUG"):
            raise
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        typer.echo(f"csem: error: {msg}", err=True)
        raise SystemExit(1) from None
