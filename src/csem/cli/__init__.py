"""The ``csem`` command: a thin typer app; each sub-command lives in its own module here.

Command modules register themselves on :data:`app` when imported; they only parse arguments
and call the library functions of the stage packages.

Every command reports a failure as one line ``csem: error: ...`` on stderr and exits with

====  ==========================================================================================
0     success
1     a run-time failure (unreachable judge, model that cannot be loaded, I/O error)
2     bad input or usage (missing file or field, bad row, unknown rubric/aspect/option)
3     partial: some judgments failed; every finished one is kept and a re-run resumes
====  ==========================================================================================
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


def fail(message: object, code: int = 2) -> typer.Exit:
    """Print ``csem: error: <message>`` on one line to stderr and return the ``typer.Exit`` to raise
    (``raise fail(...)``); ``code`` follows the table in this module's docstring."""
    typer.echo(f"csem: error: {message}", err=True)
    return typer.Exit(code)


def main() -> None:
    """Entry point: run the command; expected failures print one ``csem: error: ...`` line and exit
    2 (bad input: ValueError, KeyError, FileNotFoundError) or 1 (RuntimeError, OSError); set
    ``CSEM_DEBUG=1`` for the traceback."""
    _load_commands()
    try:
        app()
    except (ValueError, OSError, RuntimeError, KeyError) as exc:
        if os.environ.get("CSEM_DEBUG"):
            raise
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        code = 2 if isinstance(exc, (ValueError, KeyError, FileNotFoundError)) else 1
        raise SystemExit(fail(msg, code).exit_code) from None
