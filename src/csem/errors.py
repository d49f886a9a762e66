"""The one error type for bad input: what csem raises on purpose when the user's files, options or
settings are wrong.

The command line maps [`InputError`][csem.errors.InputError] (and its subclasses: ``RecordError``,
``RubricError``, ``TrainingDataError``, ``DatasetError``, ``ModelFolderError`` ...) to one line
``csem: error: ...`` and exit code 2 (`csem.cli.exit_code`); an exception csem did not raise on
purpose is a bug and shows its traceback with exit code 1. It subclasses ``ValueError``, so code that
catches ``ValueError`` keeps catching it.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: a file, field, row, option or setting the user gave is wrong (exit code 2).

    The message names what is wrong and where (file, line, field, option), in one line.
    """


class MissingInputError(InputError, KeyError):
    """Bad input: a field, column or key the input should have is absent (exit code 2). Also a
    ``KeyError``, for callers that catch one; ``str()`` gives the message without ``KeyError``'s quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
