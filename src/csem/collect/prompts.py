"""Task prompts that turn a source into a generation request (CSEM stage i).

A task prompt is a ``str.format`` template with a ``{source}`` field, rendered as the user turn of
a chat; the system turn is fixed per task. Users pass their own template text instead of a name.
"""

from __future__ import annotations

from csem.errors import InputError

TASK_PROMPTS: dict[str, tuple[str, str]] = {
    # name: (system turn, user template)
    "summarize": (
        "You are a helpful assistant that writes short, faithful news summaries.",
        "Summarize the following article in one or two sentences.\n\nArticle:\n{source}\n\nSummary:",
    ),
    "translate-en-de": (
        "You are a professional translator from English to German.",
        "Translate the following English text into German. Answer with the translation only.\n\n"
        "English: {source}\n\nGerman:",
    ),
    "restyle-formal": (
        "You are a helpful writing assistant.",
        "Rewrite the following informal sentence in a formal style, keeping its meaning. "
        "Answer with the rewritten sentence only.\n\nInformal: {source}\n\nFormal:",
    ),
    "respond": (
        "You are a helpful assistant.",
        "{source}",
    ),
}


def render_task_prompt(task: str, source: str) -> list[dict[str, str]]:
    """Chat messages asking a generator to perform ``task`` on ``source``.

    Args:
        task: a key of `TASK_PROMPTS` or a template text containing ``{source}``.
        source: the input text.

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.

    Raises:
        ValueError: ``task`` is neither a known name nor a template with ``{source}``.
    """
    if task in TASK_PROMPTS:
        system, template = TASK_PROMPTS[task]
    elif "{source}" in task:
        system, template = "You are a helpful assistant.", task
    else:
        raise InputError(f"unknown task prompt '{task}': use one of {sorted(TASK_PROMPTS)} "
                         "or a template text containing '{source}'")
    return [{"role": "system", "content": system}, {"role": "user", "content": template.replace("{source}", source)}]
