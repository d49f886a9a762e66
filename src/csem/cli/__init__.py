"""The ``csem`` command: a thin typer app; each sub-command lives in its own module here.

Command modules register themselves on `app` when imported; they only parse arguments
and call the library functions of the stage packages.

Every command reports an expected failure as one line ``csem: error: ...`` on stderr and exits with
(`exit_code` maps exceptions to these codes once for all commands; ``CSEM_DEBUG=1`` adds the
traceback, for every command)

====  ==========================================================================================
0     success
1     a run-time failure, nothing done (a judge that answered nothing, a refused API key, a model
      that cannot be loaded, an I/O error); or a bug: an exception csem did not raise on purpose
      prints its traceback and ``csem: internal error: ...``
2     bad input or usage, before any work: [`csem.errors.InputError`][] and nothing else (missing
      file or field, bad row, unknown rubric/aspect/option, an output path that cannot be written)
3     partial: some judgments failed (any backend error); every finished one is kept and a re-run
      resumes (`csem.cli.judge.run_outcome`)
====  ==========================================================================================
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import traceback
from typing import Optional

import click
import typer
from typer.core import TyperGroup


def exit_code(exc: BaseException) -> int | None:
    """The exit code of an exception escaping a command, or None for a bug (its traceback is shown).

    2: bad input or usage, raised on purpose: [`csem.errors.InputError`][] and its subclasses
    (RecordError, RubricError, TrainingDataError, DatasetError, ModelFolderError,
    MissingInputError ...), pydantic's ``ValidationError`` (a setting of a config file or option),
    ``FileNotFoundError``, ``IsADirectoryError``, ``NotADirectoryError`` (a path the user gave).
    1: a run-time failure (``BackendError``: an unreachable or refusing judge, a model that cannot be
    loaded; any other ``OSError``). None: anything else, a plain ``ValueError``, ``KeyError`` or
    ``RuntimeError`` included: csem did not raise it on purpose, so it is a bug.
    """
    from csem.errors import InputError
    from csem.llm.api import BackendError

    if isinstance(exc, (InputError, FileNotFoundError, IsADirectoryError, NotADirectoryError)):
        return 2
    if isinstance(exc, ValueError) and type(exc).__name__ == "ValidationError" and callable(getattr(exc, "errors", None)):
        return 2  # pydantic: a setting the user wrote
    if isinstance(exc, (BackendError, OSError)):
        return 1
    return None


def internal_error(exc: BaseException) -> int:
    """Report a bug (an exception no rule of `exit_code` knows): its traceback, then one line
    ``csem: internal error: <type>: <message>`` on stderr; returns exit code 1.

    The traceback is redacted like every other message that may name a backend
    ([`csem.llm.redact.redact_text`][])."""
    from csem.llm.redact import redact_text

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    typer.echo(redact_text(text).rstrip(), err=True)
    typer.echo(f"csem: internal error: {type(exc).__name__}: {redact_text(str(exc))} (a bug in csem, not in "
               "your input; the traceback above shows where)", err=True)
    return 1


def error_message(exc: BaseException) -> str:
    """One line for ``csem: error: ...`` (a KeyError without its quotes, an OSError with its file)."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":  # pydantic: one line per setting
        try:
            parts = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in errors()]
        except Exception:  # noqa: BLE001 - fall back to pydantic's own text
            parts = []
        if parts:
            return f"invalid {exc.title} settings: " + "; ".join(parts)
    return str(exc)


def _is_click(exc: BaseException) -> bool:
    """An exception of click's (a usage error, ``Exit``, ``Abort``), also from the copy of click that
    typer vendors (``typer._click``): click reports it with its own exit code."""
    return type(exc).__module__.split(".")[0] in ("click", "typer") and any(
        c.__name__ in ("ClickException", "Exit", "Abort") for c in type(exc).__mro__)


class _ErrorMappingGroup(TyperGroup):
    """The command group: any exception a command lets escape becomes one ``csem: error:`` line and
    the code of `exit_code` (with the traceback under ``CSEM_DEBUG=1``)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - mapped once for every command
            if _is_click(exc):  # usage errors and exits of click (or typer's vendored click): click reports them
                raise
            code = exit_code(exc)
            if code is None:
                raise typer.Exit(internal_error(exc)) from None
            if os.environ.get("CSEM_DEBUG"):
                traceback.print_exc(file=sys.stderr)
            raise fail(error_message(exc), code) from None


def _help_width() -> None:
    """Help is rendered at least 100 columns wide (or ``$TERMINAL_WIDTH``): rich's tables cut long
    option names (``--source-max-len…``) to fit 80 columns; at 100 none of csem's is cut."""
    import shutil

    from typer import rich_utils

    if rich_utils.MAX_WIDTH is None:
        rich_utils.MAX_WIDTH = max(HELP_MIN_WIDTH, shutil.get_terminal_size((HELP_MIN_WIDTH, 24)).columns)


def _plain_flags() -> None:
    """Help shows a boolean flag (``--print-config``, ``--progress/--no-progress``) without a value
    type: typer's rich help writes ``<bool>`` after every option, which reads as if the flag took a value."""
    from typer.core import TyperOption

    if getattr(TyperOption.display_type_rich, "_csem_plain_flags", False):
        return
    shown = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return None if self.is_flag and not self.count else shown(self, ctx)

    display_type_rich._csem_plain_flags = True
    TyperOption.display_type_rich = display_type_rich


HELP_MIN_WIDTH = 100
_help_width()
_plain_flags()

app = typer.Typer(cls=_ErrorMappingGroup, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="csem: LLM judges (G-Eval) and learned evaluation metrics distilled from them (CSEM).")


def parse_pairs(pairs: Optional[list[str]], option: str, example: str = "KEY=VALUE") -> dict[str, str]:
    """``KEY=VALUE`` command-line pairs as a dict (``--col source=article``, ``--judge-opt base_url=...``,
    ``--data-option judge=gpt-4``); one parser for every such option.

    Raises:
        typer.BadParameter: a pair without ``=`` or with an empty key (usage error, exit 2).
    """
    out: dict[str, str] = {}
    for p in pairs or []:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise typer.BadParameter(f"'{p}' must look like KEY=VALUE, e.g. {example}", param_hint=option)
        out[k.strip()] = v.strip()
    return out


#: the ``--precision`` help of the commands that run a student (one text: what ``auto`` picks)
PRECISION_HELP = ("auto | fp32 | bf16 | fp16 (bf16-mixed, 32-true, 16-mixed accepted too). auto picks bf16 on a "
                  "CUDA GPU that supports it (fp16 on other GPUs), fp32 on a CPU (bf16 on a CPU rounds scores to "
                  "1/32 steps and ties candidates; ask for it with bf16) (csem.model.inference.resolve_precision)")


def col_option() -> typer.models.OptionInfo:
    """The ``--col FIELD=COLUMN`` option, declared once for every command that reads records."""
    return typer.Option(None, "--col", help="column mapping FIELD=COLUMN (repeatable), e.g. --col source=article")


def column_map(col: Optional[list[str]]) -> dict[str, str]:
    """The ``--col`` pairs as ``{csem_field: user_column}``."""
    return parse_pairs(col, "--col", "source=article")

# one module per command group; a module missing here simply adds no command
_COMMAND_MODULES = ("judge", "meta", "train", "score", "collect", "annotate", "pipeline", "example",
                    "rerank", "mrt", "serve", "doctor", "contrasts")


def _load_commands() -> None:
    for name in _COMMAND_MODULES:
        try:
            importlib.import_module(f"csem.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"csem.cli.{name}":
                raise
    for info in app.registered_commands:
        if info.short_help is None:
            info.short_help = command_summary(info.help or inspect.getdoc(info.callback) or "")


def command_summary(doc: str) -> str:
    """The one-line summary ``csem --help`` lists for a command: the first sentence of its docstring's
    first paragraph, its line breaks joined (rich keeps a docstring's hard line breaks in the command
    list, which wrapped every long first paragraph mid-sentence)."""
    first = " ".join(inspect.cleandoc(doc).split("\n\n", 1)[0].split())
    sentence = re.match(r".+?[.!?](?=\s+[A-Z(`]|$)", first)
    return sentence.group(0) if sentence else first


def fail(message: object, code: int = 2) -> typer.Exit:
    """Print ``csem: error: <message>`` on one line to stderr and return the ``typer.Exit`` to raise
    (``raise fail(...)``); ``code`` follows the table in this module's docstring. The message passes
    the one redaction rule ([`csem.llm.redact.redact_text`][]): no credential reaches the terminal."""
    from csem.llm.redact import redact_text

    typer.echo(f"csem: error: {redact_text(str(message))}", err=True)
    return typer.Exit(code)


def main() -> None:
    """Entry point: run the command; expected failures print one ``csem: error: ...`` line and exit
    with the code of `exit_code` (the command group maps them; this catches what escapes before
    a command runs); a bug prints its traceback and exits 1 (`internal_error`); set
    ``CSEM_DEBUG=1`` for the traceback of an expected failure too."""
    _load_commands()
    try:
        app()
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # noqa: BLE001
        if _is_click(exc):
            raise
        code = exit_code(exc)
        if code is None:
            raise SystemExit(internal_error(exc)) from None
        if os.environ.get("CSEM_DEBUG"):
            traceback.print_exc(file=sys.stderr)
        raise SystemExit(fail(error_message(exc), code).exit_code) from None
