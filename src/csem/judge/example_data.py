"""The G-Eval example: one news article and two summaries of clearly different quality.

Text written for csem (not from any dataset). ``system_id`` names the candidate set, which is the
column of the pivot table printed by ``csem example``.
"""

from __future__ import annotations

ARTICLE = (
    "The town of Millbrook opened its first public swimming pool on Saturday, ending a campaign by local "
    "parents that began almost ten years ago. The pool, built next to the primary school on Oak Street, "
    "cost 3.2 million pounds, two thirds of which came from a regional sports grant. Mayor Helen Price said "
    "the town council had chosen an outdoor design heated by solar panels to keep running costs low. "
    "About 400 residents attended the opening, and children from the school swam the first lengths. "
    "Entry will be free for pupils during school hours, while adults will pay 3 pounds per visit. "
    "The pool will be open from May to September and will employ six lifeguards. Local swimming coach "
    "Tom Reed said the nearest pool had been a forty-minute bus ride away, so many children in Millbrook "
    "had never learned to swim. The council plans to add changing rooms for disabled visitors next year."
)

GOOD_SUMMARY = (
    "Millbrook opened its first public swimming pool on Saturday after a parents' campaign of almost ten "
    "years. The solar-heated outdoor pool cost 3.2 million pounds, mostly paid by a regional sports grant. "
    "It is free for pupils during school hours, costs adults 3 pounds, and is open from May to September."
)

POOR_SUMMARY = (
    "the mayor helen price swim pool. It cost 32 million pounds from the school and is open all year round "
    "for free. pool pool opened, children bus ride forty minutes Tom Reed lifeguards. The council will "
    "close it next year."
)


def example_records() -> list[dict]:
    """Two csem records (``good``, ``poor``) sharing the article as ``source``."""
    return [
        {"id": "example-good", "doc_id": "millbrook-pool", "system_id": "good", "source": ARTICLE,
         "candidate": GOOD_SUMMARY},
        {"id": "example-poor", "doc_id": "millbrook-pool", "system_id": "poor", "source": ARTICLE,
         "candidate": POOR_SUMMARY},
    ]
