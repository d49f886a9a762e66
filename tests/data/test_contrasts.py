"""Synthetic contrast pairs (issue 24): every perturbation changes what it claims, stays in its severity
range, is deterministic given the seed, and yields nothing (never an identical text) when the text
offers nothing to perturb; the pairs load with the real preference reader of ``csem train --pairs``."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data import contrasts as C
from csem.data import text
from csem.data.contrasts import consistency, relevance
from csem.data.records import read_records, write_records

_load_commands()

SOURCE = (
    "(CNN) Donald Sterling's racist remarks cost him an NBA team last year. But now it's his former female "
    "companion who has lost big. A Los Angeles judge has ordered V. Stiviano to pay back more than $2.6 million "
    "in gifts after Sterling's wife sued her. In the lawsuit, Rochelle \"Shelly\" Sterling accused Stiviano of "
    "targeting extremely wealthy older men. She claimed Donald Sterling used the couple's money to buy Stiviano "
    "a Ferrari, two Bentleys and a Range Rover, and that he helped her get a $1.8 million duplex. The ruling came "
    "on Monday, March 16, 2015, in a courtroom in Los Angeles. Stiviano's lawyer said she would appeal. "
    "The judge, Richard Fruin, said the gifts were community property. Meanwhile, the Clippers were sold to "
    "Steve Ballmer for $2 billion in 2014. Ballmer is a former chief executive of Microsoft."
)
CANDIDATE = (
    "A Los Angeles judge has ordered V. Stiviano to pay back $2.6 million in gifts. Donald Sterling's wife "
    "sued her. However, Stiviano's lawyer said she would appeal the ruling made on Monday. The Clippers were "
    "sold to Steve Ballmer in 2014 because the NBA forced a sale."
)
LOWER = ("a los angeles judge has ordered v. stiviano to pay back $ 2.6 million in gifts . donald sterling 's wife "
         "sued her . stiviano 's lawyer said she would appeal .")
OTHER = ("The whale, named Varvara, swam nearly 14,000 miles from Russia to Mexico and back. It said the previous "
         "record was set by a humpback whale that swam a mere 10,190-mile round trip. Scientists tracked her with "
         "a satellite tag for five months. The western gray whale is critically endangered.")
CTX = C.Context(source=SOURCE, other=OTHER)

ALL = {name: f for fam in C.FAMILIES.values() for name, f in fam.items()}
ALL.update(C.DEGENERATE)
for _only in C.DEGENERATE_ONLY.values():
    ALL.update(_only)
ALL["truncate_mid"] = C.truncate_mid


def _run(name, text=CANDIDATE, seed=0, ctx=CTX):
    return ALL[name](text, random.Random(seed), ctx)


def _numbers(text):
    return re.findall(r"\d+(?:[.,]\d+)*", text)


# ------------------------------------------------------------------------------------------ every function

@pytest.mark.parametrize("name", sorted(ALL))
def test_changes_text_deterministic_and_severity_in_range(name):
    res = _run(name)
    assert res is not None, name
    assert res.text.split() != CANDIDATE.split()
    assert 0.0 < res.severity <= 1.0
    assert isinstance(res.edit, str) and res.edit
    again = _run(name)
    assert again == res  # same seed, same output
    outs = {_run(name, seed=s).text for s in range(8)}
    if name not in ("empty", "source_copy", "repeated_token", "connective_drop", "date_swap"):  # one output here
        assert len(outs) > 1, f"{name} ignores its random generator"


@pytest.mark.parametrize("name", sorted(ALL))
def test_nothing_to_perturb_gives_none(name):
    # a single short word: nothing to reorder, swap, negate, cut or shorten; no source, no other article
    res = _run(name, text="Yes", ctx=C.Context())
    if name in ("empty", "whitespace", "repeated_token", "redundancy"):
        assert res is not None and res.text.split() != ["Yes"]  # these apply to any text
    else:
        assert res is None, f"{name} returned {res}"


# ------------------------------------------------------------------------------------------- coherence

def test_sentence_shuffle_and_move_keep_the_sentences():
    sents = C.split_sentences(CANDIDATE)
    assert len(sents) == 4
    for name in ("sentence_shuffle", "sentence_move"):
        for seed in range(5):
            res = _run(name, seed=seed)
            new = C.split_sentences(res.text)
            assert sorted(new) == sorted(sents) and new != sents
    move = _run("sentence_move", seed=3)
    new = C.split_sentences(move.text)
    # one sentence moved: removing it from both orders leaves the same sequence
    assert any([s for s in sents if s != x] == [s for s in new if s != x] for x in sents)


def test_shuffle_severity_is_kendall_distance():
    text = "The dog ran. The cat sat. The bird flew."
    reversed_seen = False
    for seed in range(30):
        res = C.sentence_shuffle(text, random.Random(seed), C.Context())
        if C.split_sentences(res.text) == ["The bird flew.", "The cat sat.", "The dog ran."]:
            assert res.severity == 1.0
            reversed_seen = True
        if C.split_sentences(res.text)[0] == "The dog ran.":  # only the last two swapped: 1 of 3 pairs discordant
            assert res.severity == pytest.approx(1 / 3, abs=1e-3)
    assert reversed_seen


def test_identical_sentences_cannot_be_shuffled():
    assert C.sentence_shuffle("It rained. It rained.", random.Random(0), C.Context()) is None


def test_connective_swap_and_drop():
    seen = set()
    for seed in range(10):
        res = _run("connective_swap", seed=seed)
        old, new = res.edit.split(" -> ")
        assert C.CONNECTIVE_SWAPS[old.lower()] == new.lower()
        assert res.text.count(new) == CANDIDATE.count(new) + 1
        seen.add(old)
    assert seen == {"However", "because"}
    drop = _run("connective_drop")
    assert "However" not in drop.text and "Stiviano's lawyer said" in drop.text
    assert C.connective_swap("The team won the cup.", random.Random(0), C.Context()) is None
    for seed in range(6):
        ins = C.connective_insert(CANDIDATE, random.Random(seed), CTX)
        added = [s for s in C.split_sentences(ins.text) if s not in C.split_sentences(CANDIDATE)]
        assert len(added) == 1 and re.match(r"[A-Z][a-z ]+, ", added[0])
        assert added[0].split(", ", 1)[1].lower() in CANDIDATE.lower()
    low = C.connective_insert(LOWER, random.Random(0), CTX)
    assert low.text == low.text.lower() and re.search(r"\b[a-z ]+ , ", low.text)


# ----------------------------------------------------------------------------------------- consistency

def test_number_swap_uses_another_source_number():
    src_numbers = set(_numbers(SOURCE))
    for seed in range(10):
        res = _run("number_swap", seed=seed)
        old, new = res.edit.split(" -> ")
        assert old in _numbers(CANDIDATE) and new in src_numbers and new != old
        assert _numbers(res.text) != _numbers(CANDIDATE)
        assert not re.fullmatch(r"(19|20)\d\d", new)  # years belong to date_swap
    assert C.number_swap(CANDIDATE, random.Random(0), C.Context(source="Nothing numeric here.")) is None


def test_date_swap_same_kind_from_source():
    res = C.date_swap("The ruling came on Monday, March 16, 2015.", random.Random(0),
                      C.Context(source="It began on Friday in May 2014 and ended on Monday."))
    old, new = res.edit.split(" -> ")
    kinds = {"Monday": "weekday", "March": "month", "2015": "year"}
    assert old in kinds and new in {"Friday", "May", "2014"}
    assert consistency._date_kind(new)[0] == kinds[old]


def test_entity_swap_uses_an_unrelated_source_entity():
    ents = consistency._entities(SOURCE)
    assert "Donald Sterling" in ents and "V. Stiviano" in ents and "Steve Ballmer" in ents
    assert "But" not in ents and "Monday" not in ents and "March" not in ents
    for seed in range(10):
        res = _run("entity_swap", seed=seed)
        old, new = res.edit.split(" -> ")
        assert new.lower() in {e.lower() for e in ents}
        assert not {w.lower() for w in old.split()} & {w.lower() for w in new.split()}
        assert new in res.text


def test_entity_swap_keeps_lower_case_style():
    res = C.entity_swap(LOWER, random.Random(1), CTX)
    assert res is not None and res.text == res.text.lower()


def test_subject_swap_changes_a_sentence_opening():
    for seed in range(6):
        res = _run("subject_swap", seed=seed)
        before, after = C.split_sentences(CANDIDATE), C.split_sentences(res.text)
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        assert len(changed) == 1
        old, new = changed[0]
        assert old.split()[0] != new.split()[0] or old.split()[:2] != new.split()[:2]
    pron = C.subject_swap("He said it was over.", random.Random(0), C.Context())
    assert pron.text == "She said it was over."


@pytest.mark.parametrize("text,expected", [
    ("The judge was fair.", "The judge was not fair."),
    ("The judge was not fair.", "The judge was fair."),
    ("The judge did n't rule.", "The judge did rule."),
    ("The judge didn't rule.", "The judge did rule."),
    ("She cannot appeal.", "She can appeal."),
])
def test_negation_toggles(text, expected):
    assert C.negation(text, random.Random(0), C.Context()).text == expected


def test_foreign_sentence_comes_from_the_other_article():
    res = _run("foreign_sentence")
    other = {s.lower() for s in C.split_sentences(OTHER)}
    new = [s for s in C.split_sentences(res.text) if s not in C.split_sentences(CANDIDATE)]
    assert len(new) == 1 and new[0].lower() in other


# --------------------------------------------------------------------------------------------- fluency

def test_word_level_noise():
    words = text.TOKEN.findall(CANDIDATE)
    drop = _run("word_drop")
    assert len(text.TOKEN.findall(drop.text)) < len(words)
    double = _run("word_double")
    assert re.search(r"\b(\w+) \1\b", double.text)
    swap = _run("word_swap")
    assert sorted(text.TOKEN.findall(swap.text)) == sorted(words) and text.TOKEN.findall(swap.text) != words
    noise = _run("char_noise")
    assert len(text.TOKEN.findall(noise.text)) >= len(words) - 1 and noise.text != CANDIDATE
    # severity grows with the number of edits
    sev = {C.word_drop(CANDIDATE, random.Random(s), CTX).severity for s in range(20)}
    assert len(sev) > 1 and all(0.2 < s <= 1 for s in sev)


def test_sentence_cut_leaves_a_sentence_unfinished():
    sentences = C.split_sentences(CANDIDATE)
    for seed in range(5):
        res = _run("sentence_cut", seed=seed)
        # the text is the original minus one piece that runs from inside a sentence to its end
        i = [k for k, s in enumerate(sentences) if s not in res.text]
        assert len(i) == 1
        s = sentences[i[0]]
        kept = res.text.split(" " + sentences[i[0] + 1])[0] if i[0] + 1 < len(sentences) else res.text
        prefix = kept[len(" ".join(sentences[:i[0]])):].strip()
        assert prefix and s.startswith(prefix) and len(prefix) < len(s) and prefix[-1].isalnum()


# ------------------------------------------------------------------------------------------- relevance

def test_peripheral_swap_brings_in_unimportant_source_sentences():
    res = _run("peripheral_swap")
    src = C.split_sentences(SOURCE)
    imp = relevance._importance(SOURCE)
    added = [s for s in C.split_sentences(res.text) if s not in C.split_sentences(CANDIDATE)]
    assert added and all(a in src for a in added)
    bottom = sorted(range(len(src)), key=lambda i: imp[i])[: len(src) // 2]
    assert all(src.index(a) in bottom for a in added)


def test_redundancy_off_topic_truncation():
    red = _run("redundancy")
    sents = C.split_sentences(red.text)
    assert len(sents) == 5 and len(set(sents)) == 4
    off = _run("off_topic")
    other = set(C.split_sentences(OTHER))
    assert sum(s in other for s in C.split_sentences(off.text)) >= 2
    trunc = _run("truncation")
    assert CANDIDATE.startswith(trunc.text) and len(trunc.text) < len(CANDIDATE)


def test_inserted_sentences_take_the_candidate_style():
    res = C.off_topic(LOWER, random.Random(0), CTX)
    assert res.text == res.text.lower() and " ." in res.text and not re.search(r"[a-z][,.]", res.text)
    mixed = "( cnn ) the judge ruled . Stiviano 's lawyer said she would appeal the ruling on monday in los angeles ."
    styled = text.surface_style('A U.S. judge said "no" on Tuesday. It cost $2.6 million.', mixed)
    assert styled == "A u.s. judge said \" no \" on tuesday . It cost $ 2.6 million ."


# ------------------------------------------------------------------------------------------ degenerate

def test_degenerate_texts():
    assert _run("empty").text == ""
    assert _run("whitespace").text.strip() == ""
    few = _run("few_tokens")
    assert 1 <= len(few.text.split()) <= 3
    rep = _run("repeated_token")
    assert len(rep.text.split()) == 100 and len(set(rep.text.split())) == 1
    assert _run("source_copy").text == SOURCE
    assert C.source_copy(SOURCE, random.Random(0), CTX) is None  # the source itself: not a worse copy


def test_word_shuffle_and_truncate_mid():
    shuf = _run("word_shuffle")
    assert sorted(shuf.text.split()) == sorted(CANDIDATE.split()) and shuf.text.split() != CANDIDATE.split()
    for seed in range(5):
        cut = _run("truncate_mid", seed=seed)
        assert CANDIDATE.startswith(cut.text) and cut.text[-1].isalnum()
        assert 0.3 <= len(cut.text.split()) / len(CANDIDATE.split()) <= 0.75


def test_sanity_cases():
    cases = C.sanity_cases(CANDIDATE, source=SOURCE, other_summary=OTHER, seed=1, key="d1")
    assert list(cases) == list(C.SANITY_CASES)
    assert cases["empty"] == "" and not cases["whitespace"].strip() and cases["one_token"] == "A"
    assert len(cases["repeated_token"].split()) == 100 and cases["source_copy"] == SOURCE
    assert cases["other_summary"] == OTHER and CANDIDATE.startswith(cases["truncated"])
    assert cases == C.sanity_cases(CANDIDATE, source=SOURCE, other_summary=OTHER, seed=1, key="d1")
    short = C.sanity_cases("Two words", seed=0)
    assert set(short) == {"empty", "whitespace", "one_token", "repeated_token"}


def test_sentence_splitter_handles_lowercase_and_abbreviations():
    assert len(C.split_sentences(LOWER)) == 3
    assert C.split_sentences("the record was set by u.s. officials. mr. smith said so.") == [
        "the record was set by u.s. officials.", "mr. smith said so."]
    assert C.split_sentences("  ") == []
    assert C.split_sentences("He said `` no . '' Then he left .") == ["He said `` no . ''", "Then he left ."]
    assert C.split_sentences("He said ' no . ' Then he left .") == ["He said ' no . '", "Then he left ."]


# ------------------------------------------------------------------------------------------ make_pairs

def _records():
    other_src = OTHER + " " + OTHER.replace("whale", "dolphin")
    return [
        {"id": "d1-s1", "doc_id": "d1", "system_id": "s1", "source": SOURCE, "candidate": CANDIDATE,
         "reference": "Stiviano must pay back $2.6 million."},
        {"id": "d1-s2", "doc_id": "d1", "system_id": "s2", "source": SOURCE, "candidate": LOWER},
        {"id": "d2-s1", "doc_id": "d2", "system_id": "s1", "source": other_src, "candidate": OTHER},
        {"id": "d3-s1", "doc_id": "d3", "system_id": "s1", "source": other_src, "candidate": "Yes"},
    ]


def test_make_pairs_layout_and_order_independence():
    recs = _records()
    pairs = C.make_pairs(recs, per_record=3, seed=5)
    assert pairs
    for p in pairs:
        assert p["candidate_a"] != p["candidate_b"] and p["candidate_b"].strip()
        assert p[f"judge.{p['aspect']}"] == 1.0
        assert not any(k.startswith("judge.") and k != f"judge.{p['aspect']}" for k in p)
        assert p["id_b"] == f"{p['id_a']}~{p['perturbation']}" and 0 < p["severity"] <= 1
        assert p["perturbation"] in C.perturbations(p["aspect"])
    by_rec = {}
    for p in pairs:
        by_rec.setdefault((p["id_a"], p["aspect"]), []).append(p)
    assert all(len(v) <= 3 for v in by_rec.values())
    assert len(by_rec[("d1-s1", "consistency")]) == 3
    # one id, one text: a perturbed copy drawn by two aspects is the same text
    texts = {}
    for p in pairs:
        assert texts.setdefault(p["id_b"], p["candidate_b"]) == p["candidate_b"]
    # order of records does not matter; the seed does
    shuffled = C.make_pairs(list(reversed(recs)), per_record=3, seed=5)
    key = lambda p: p["id"]  # noqa: E731
    assert sorted(pairs, key=key) == sorted(shuffled, key=key)
    assert sorted(C.make_pairs(recs, per_record=3, seed=6), key=key) != sorted(pairs, key=key)
    # no empty candidates unless asked
    assert not any(p["perturbation"] in C.EMPTY_KINDS for p in pairs)
    with_empty = C.make_pairs(recs, per_record=30, seed=5, include_empty=True, max_degenerate=10)
    assert {"empty", "whitespace"} <= {p["perturbation"] for p in with_empty}
    assert not any(p["degenerate"] for p in C.make_pairs(recs, seed=5, degenerate_weight=0))
    many = C.make_pairs(recs, per_record=30, seed=5, degenerate_weight=100)
    per = Counter((p["id_a"], p["aspect"]) for p in many if p["degenerate"])
    assert per and max(per.values()) == 1  # max_degenerate


def test_references_as_candidates():
    recs = _records()
    refs = C.reference_records(recs)
    assert [r["id"] for r in refs] == ["d1~ref0"] and refs[0]["candidate"] == recs[0]["reference"]
    pairs = C.make_pairs(recs, seed=0, references=True)
    from_ref = [p for p in pairs if p["id_a"] == "d1~ref0"]
    assert from_ref and all(p["system_a"] == "reference" and p["candidate_a"] == recs[0]["reference"] for p in from_ref)
    two = C.reference_records([{"source": "S", "doc_id": "x", "candidate": "c", "reference": ["r1", "r2"]}])
    assert [(r["candidate"], r["reference"]) for r in two] == [("r1", ["r2"]), ("r2", ["r1"])]


def test_soft_preferences_follow_severity():
    for p in C.make_pairs(_records(), seed=2, soft=True):
        assert p[f"judge.{p['aspect']}"] == pytest.approx(0.5 + 0.5 * p["severity"], abs=1e-4)


def test_entity_swap_prefers_the_same_type_and_shape():
    types = consistency._entity_types(SOURCE)
    assert types["v. stiviano"] == "person" and types["los angeles"] == "place" and types["nba"] == "acronym"
    rng = random.Random(0)
    pool = ["Los Angeles", "Steve Ballmer", "Richard Fruin", "Range Rover"]
    kinds = {"los angeles": "place", "steve ballmer": "person", "richard fruin": "person"}
    picks = {consistency._entity_replacement("Donald Sterling", pool, random.Random(s), dict(kinds, **{"donald sterling": "person"}))
             for s in range(10)}
    assert picks == {"Steve Ballmer", "Richard Fruin"}
    assert all(consistency._entity_replacement("NBA", ["CNN", "Donald Sterling", "Los Angeles"], rng) == "CNN" for _ in range(5))
    assert consistency._entity_replacement("Steve Ballmer", ["CNN", "Donald Sterling", "Ballmer"], rng) == "Donald Sterling"


def test_pairs_by_aspect_and_summary():
    recs = _records()
    by = C.pairs_by_aspect(recs, aspects=["coherence", "fluency"], per_record=2, seed=1)
    assert set(by) == {"coherence", "fluency"} and all(p["aspect"] == a for a, v in by.items() for p in v)
    summary = C.summarize(by["coherence"] + by["fluency"])
    assert sum(summary["coherence"].values()) == len(by["coherence"])
    with pytest.raises(ValueError, match="unknown aspect"):
        C.make_pairs(recs, aspects=["taste"])
    with pytest.raises(ValueError, match="per_record"):
        C.make_pairs(recs, per_record=0)


def test_pairs_load_with_the_preference_reader(tmp_path):
    from csem.model.preferences import pairs_to_training

    pairs = C.make_pairs(_records(), per_record=3, seed=0)
    path = write_records(pairs, tmp_path / "pairs.jsonl")
    cols = [f"judge.{a}" for a in C.ASPECTS]
    records, table = pairs_to_training(read_records(path, required=()), cols)
    assert len(table) == len(pairs)
    assert {r["id"] for r in records} == {p["id_a"] for p in pairs} | {p["id_b"] for p in pairs}
    assert {x for _, _, x, _ in table.pairs} == set(range(4))


def test_on_summeval_articles(shared_data):
    rows = [json.loads(line) for line in (shared_data / "summeval" / "summeval.jsonl").open()][:64]
    recs = [{"id": f"{r['doc_id']}/{r['system_id']}", "doc_id": r["doc_id"], "system_id": r["system_id"],
             "source": r["source"], "candidate": r["summary"]} for r in rows]
    pairs = C.make_pairs(recs, per_record=3, seed=0)
    counts = C.summarize(pairs)
    assert set(counts) == set(C.ASPECTS)
    for aspect, names in counts.items():
        family = set(C.FAMILIES[aspect])
        assert len(family & set(names)) >= 3, (aspect, names)  # most of each family applies to real summaries
        assert sum(v for k, v in names.items() if k in family) > sum(v for k, v in names.items() if k not in family)


# ----------------------------------------------------------------------------------------------- CLI

def test_cli_writes_pairs_and_summary(tmp_path):
    data = write_records(_records(), tmp_path / "recs.jsonl")
    out = tmp_path / "pairs.jsonl"
    res = CliRunner().invoke(app, ["contrasts", "--data", str(data), "--out", str(out), "--per-record", "2",
                                   "--aspects", "coherence,relevance", "--seed", "3"])
    assert res.exit_code == 0, res.output
    pairs = read_records(out, required=())
    assert pairs and {p["aspect"] for p in pairs} == {"coherence", "relevance"}
    summary = json.loads((tmp_path / "pairs.summary.json").read_text())
    assert summary["pairs"] == len(pairs)
    assert sum(sum(c.values()) for c in summary["counts"].values()) == len(pairs)
    assert "coherence:" in res.output


@pytest.mark.parametrize("args,needle", [
    (["--aspects", "taste"], "unknown aspect 'taste'"),
    (["--per-record", "0"], "--per-record"),
])
def test_cli_bad_options_exit_2(tmp_path, args, needle):
    data = write_records(_records(), tmp_path / "recs.jsonl")
    res = CliRunner().invoke(app, ["contrasts", "--data", str(data), "--out", str(tmp_path / "p.jsonl"), *args])
    assert res.exit_code == 2 and needle in res.output
    assert not (tmp_path / "p.jsonl").exists()


def test_cli_bad_record_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"source": SOURCE, "candidate": CANDIDATE}) + "\n" + json.dumps({"source": SOURCE}) + "\n")
    res = CliRunner().invoke(app, ["contrasts", "--data", str(bad), "--out", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 2
    assert "bad.jsonl, line 2" in res.output and "candidate" in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.slow  # Lightning training: ~40 s on the shared 2 cores
def test_cli_pairs_train_a_student(tmp_path, tiny_encoder):
    """The written file goes straight into `csem train --pairs` (tiny random encoder: the format, not the skill)."""
    import csem.cli.train  # noqa: F401  (registers the command)

    data = write_records(_records(), tmp_path / "recs.jsonl")
    pairs = tmp_path / "pairs.jsonl"
    assert CliRunner().invoke(app, ["contrasts", "--data", str(data), "--out", str(pairs)]).exit_code == 0
    n = len(read_records(pairs, required=()))
    cols = ",".join(f"judge.{a}" for a in C.ASPECTS)
    res = CliRunner().invoke(app, ["train", "--data", str(pairs), "--pairs", "--label-col", cols, "--out",
                                   str(tmp_path / "m"), "--epochs", "1", "--set", "train.frozen_epochs=1", "--set", "model.hidden_sizes=[16]",
                                   "--set", "model.max_length=32", "--set", "train.num_threads=1", "--encoder", str(tiny_encoder)])
    assert res.exit_code == 0, res.output
    assert f"{n} judged pairs of" in res.output
    card = json.loads((tmp_path / "m" / "metric_card.json").read_text())
    assert card["labels"]["preference_pairs"] == n


def test_odd_texts_never_raise_nor_return_the_same_text():
    import string

    rng = random.Random(0)
    odd = ["...", "!!! ???", "1 2 3 4 5 6 7", "東京は日本の首都です。大きい。", "Ça va? Oui. Très bien!", "a\n\n\nb\n\nc d e f g h.",
           "\t", "x" * 3000, "\"Quote.\" 'Single.' (Paren.) [Bracket.]", "— – … •", "a. b. c. d. e. f.", "U.S. U.K. E.U.",
           "ALL CAPS TEXT HERE. MORE CAPS NOW.", "Mr. Smith didn't go. He can't! Won't he? 2,000 people on Jan. 5, 2015."]
    odd += ["".join(rng.choice(string.printable) for _ in range(rng.randint(0, 120))) for _ in range(40)]
    for text in odd:
        for source in ("", SOURCE, text):
            ctx = C.Context(source=source, other=OTHER)
            for name, fn in ALL.items():
                res = fn(text, random.Random(1), ctx)
                assert res is None or (res.text.split() != text.split() and 0 < res.severity <= 1), (name, text)
