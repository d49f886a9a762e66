"""The ``csem`` command: a thin typer app; each sub-command lives in its own module here.

Command modules register themselves on :data:`app` when imported; they only parse arguments
and call the library functions of the stage packages.
"""

from __future__ import annotations

import importlib

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
    _load_commands()
    app()
