"""Rubric model, built-in rubric files, user files (YAML/TOML) and their errors."""

from __future__ import annotations

import pytest

from csem.rubrics import Rubric, RubricError, list_rubrics, load_rubric, load_rubric_file, load_rubrics

REC = {"id": "r1", "source": "Das Haus ist rot.", "candidate": "The house is red.", "reference": "The house is red."}


def test_builtins_present_and_valid():
    ids = list_rubrics()
    for a in ("coherence", "consistency", "fluency", "relevance"):
        assert f"geval/summeval-{a}" in ids
    for task, aspects in {"summ": ["coherence", "consistency", "relevance", "fluency"],
                          "mt": ["accuracy", "completeness", "fluency", "style"],
                          "tst": ["content", "style", "fluency"]}.items():
        for ref in ("ref-free", "ref-based"):
            assert f"csem/{task}-multi-{ref}" in ids
            multi = load_rubric(f"csem/{task}-multi-{ref}")
            assert multi.aspect_names == aspects and multi.is_multi
            for a in aspects:
                r = load_rubric(f"csem/{task}-{a}-{ref}")
                assert (r.scale.min, r.scale.max, r.unit) == (1, 5, " stars")
                assert r.uses_reference is (ref == "ref-based")
    for rid in ids:  # every built-in renders with a full record
        r = load_rubric(rid)
        for a in r.aspect_names:
            text = r.render(REC, a)[-1]["content"]
            assert REC["candidate"] in text and "Evaluation Form (scores ONLY)" in text


def test_geval_rubrics_follow_geval():
    flu = load_rubric("geval/summeval-fluency")
    assert (flu.scale.min, flu.scale.max, flu.uses_source) == (1, 3, False)
    text = flu.render(REC)[-1]["content"]
    assert REC["source"] not in text and text.rstrip().endswith("- Fluency:")
    coh = load_rubric("geval/summeval-coherence").render(REC)[-1]["content"]
    # criteria, steps, then source before the candidate (prefix sharing), then the form
    pos = [coh.index(s) for s in ("Evaluation Criteria", "Evaluation Steps", REC["source"], REC["candidate"],
                                  "Evaluation Form (scores ONLY)")]
    assert pos == sorted(pos)


def test_multi_aspect_prompts_differ_only_in_the_last_line():
    r = load_rubric("csem/mt-multi-ref-based")
    texts = [r.render(REC, a)[-1]["content"] for a in r.aspect_names]
    heads = {t.rsplit("\n", 1)[0] for t in texts}
    assert len(heads) == 1 and len(set(texts)) == 4
    assert texts[0].endswith("- Accuracy (1-5 stars):")


def test_missing_input_names_rubric_record_and_field():
    r = load_rubric("csem/mt-accuracy-ref-based")
    with pytest.raises(KeyError, match="reference.*r2|r2.*reference"):
        r.render({"id": "r2", "source": "x", "candidate": "y"})
    with pytest.raises(ValueError, match="no aspect 'style'"):
        load_rubric("geval/summeval-coherence").render(REC, "style")


def test_user_yaml_and_toml(tmp_path):
    y = tmp_path / "mine.yaml"
    y.write_text("aspect: helpfulness\ncriteria: does it help\nscale: {min: 0, max: 10}\nuses_source: true\n")
    r = load_rubric_file(y)
    assert r.id == "mine" and r.scale.values == list(range(0, 11))
    t = tmp_path / "mine2.toml"
    t.write_text('id = "x/toml"\naspect = "tone"\ncriteria = "polite"\nuses_source = false\n[scale]\nmin = 1\nmax = 3\n')
    assert load_rubric(str(t)).id == "x/toml"
    got = load_rubrics(f"geval/summeval-coherence,{y},geval/summeval-coherence")
    assert [g.id for g in got] == ["geval/summeval-coherence", "mine"]
    assert len(load_rubrics("geval/")) == 4


@pytest.mark.parametrize("content, match", [
    ("aspect: a\ncriteria: [unclosed\n", r"line \d+: malformed YAML"),
    ("- just\n- a list\n", "mapping at top level"),
    ("aspect: coherence\n", "needs both 'aspect' and 'criteria'"),
    ("aspect: coherence\ncriteria: c\nscale: {min: 5, max: 1}\n", r"scale.*max \(1\) must be greater"),
    ("aspect: Bad Name\ncriteria: c\n", "aspect"),
    ("aspect: c\ncriteria: c\ncolour: blue\n", "colour"),
    ("aspect: c\ncriteria: c\ntemplate: '{% if %}'\n", "not valid Jinja2"),
    ("aspect: c\ncriteria: c\ntemplate: 'no candidate here'\n", "never shows"),
])
def test_bad_files_name_the_file_and_the_problem(tmp_path, content, match):
    p = tmp_path / "bad.yaml"
    p.write_text(content)
    with pytest.raises(RubricError, match=match) as err:
        load_rubric_file(p)
    assert str(p) in str(err.value)


def test_unknown_and_unreadable(tmp_path):
    with pytest.raises(RubricError, match="did you mean.*geval/summeval-coherence"):
        load_rubric("coherence")
    with pytest.raises(RubricError, match="no such rubric file"):
        load_rubric(str(tmp_path / "nope.yaml"))
    p = tmp_path / "latin1.yaml"
    p.write_bytes("aspect: c\ncriteria: caf\xe9\n".encode("latin-1"))
    with pytest.raises(RubricError, match="not valid UTF-8"):
        load_rubric_file(p)
    p = tmp_path / "bad.toml"
    p.write_text("aspect = \n")
    with pytest.raises(RubricError, match="malformed TOML"):
        load_rubric_file(p)
    with pytest.raises(RubricError, match="unknown rubric format"):
        load_rubric_file(_touch(tmp_path / "r.json"))


def _touch(p):
    p.write_text("{}")
    return p


def test_fingerprint_changes_with_prompt():
    a = Rubric(id="a", aspect="x", criteria="one")
    b = Rubric(id="a", aspect="x", criteria="two")
    assert a.fingerprint != b.fingerprint and a.fingerprint == Rubric(id="a", aspect="x", criteria="one").fingerprint


def test_template_cannot_run_code():
    r = Rubric(id="evil", aspect="x", criteria="c", template="{{ candidate.__class__.__mro__ }}")
    from jinja2.exceptions import SecurityError

    with pytest.raises(SecurityError):
        r.render({"candidate": "y", "source": "s"})
