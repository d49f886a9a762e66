"""trim_to_sentence: a sample cut at max_tokens goes back to its last complete sentence (fast tier,
pure function; the collect path that applies it is tested with SmolLM2 in test_collect.py)."""

from __future__ import annotations

import pytest

from csem.collect.sampler import trim_to_sentence


@pytest.mark.parametrize("text, expected", [
    ("The bridge will close. Buses can still", "The bridge will close."),
    ("It rose 3.5 percent on Monday. Dr. Smith said the", "It rose 3.5 percent on Monday."),
    ('He said "we will go." Then the', 'He said "we will go."'),
    ("First one. Second one? Third one! The fourth", "First one. Second one? Third one!"),
    ("A complete summary ends here.", "A complete summary ends here."),
    ("Nothing here ends a sentence", None),
    ("", None),
])
def test_trim_to_sentence(text, expected):
    assert trim_to_sentence(text) == expected
