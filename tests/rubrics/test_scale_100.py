"""The 0-100 variants of the CSEM star rubrics (csem-100/...), and exact probability-weighted 0-100
scores on llama.cpp, where numbers up to 100 take up to three tokens."""

from __future__ import annotations

import math

import numpy as np
import pytest

from csem.rubrics import list_rubrics, load_rubric

REC = {"id": "r1", "source": "SOURCE TEXT", "candidate": "CANDIDATE TEXT", "reference": "REFERENCE TEXT"}


def test_every_star_rubric_has_a_0_100_twin():
    stars = [i for i in list_rubrics() if i.startswith("csem/")]
    assert len(stars) == 28
    for rid in stars:
        star, hundred = load_rubric(rid), load_rubric(rid.replace("csem/", "csem-100/", 1))
        assert (hundred.scale.min, hundred.scale.max) == (0, 100)
        # same criteria and inputs; only the scale wording differs
        assert [c.criteria for c in hundred.criteria_list] == [c.criteria for c in star.criteria_list]
        assert (hundred.uses_source, hundred.uses_reference) == (star.uses_source, star.uses_reference)
        for a in hundred.aspect_names:
            text = hundred.render(REC, a)[-1]["content"]
            assert "continuous scale from 0 to 100, where a score of zero means" in text
            assert "a score of one hundred means" in text and "star" not in text
            assert text.endswith("(0-100 points):")


@pytest.mark.slow
def test_0_100_probabilities_are_exact_on_llama_cpp(smol, tiny_template):
    """p(s) for every s in 0..100 equals the chain rule over s's tokens computed here by hand from
    the model's logits (numbers that prefix another valid number must also end there)."""
    from csem.judge import score_probs
    from csem.llm import run_sync
    from csem.rubrics import Rubric

    # a short prompt keeps the hand computation (one full evaluation per token path) affordable
    rub = Rubric(id="test/tiny-100", aspect="coherence", criteria="how well it reads", scale={"min": 0, "max": 100},
                 template=tiny_template, system=None)
    msgs = rub.render(REC)
    got = run_sync(score_probs(smol, msgs, rub.scale.values))
    llm = smol.llm
    prompt = smol.prompt_tokens(msgs)

    def logp_after(path):
        # the provider's evaluation order: the prompt in blocks aligned to block_size, then the path as
        # one batch (llama.cpp's per-batch activation quantisation makes other splits differ slightly)
        llm.reset()
        for start in range(0, len(prompt), smol.block_size):
            llm.eval(prompt[start: start + smol.block_size])
        if path:
            llm.eval(list(path))
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
        m = logits.max()
        return logits - (m + math.log(np.exp(logits - m).sum()))

    digit = np.array([llm._model.token_get_text(i).replace("\u0120", " ").lstrip()[:1].isdigit()
                      for i in range(llm.n_vocab())])
    for s in (7, 42, 100, 10):
        total = 0.0
        for text in (str(s), " " + str(s)):
            seq = llm.tokenize(text.encode(), add_bos=False, special=False)
            lp = sum(logp_after(seq[:i])[t] for i, t in enumerate(seq))
            if 1 <= s <= 10:  # 1..9 prefix 10..99 and 10 prefixes 100: the number must end after it
                lp += math.log(max(1.0 - float(np.exp(logp_after(seq))[digit].sum()), 1e-300))
            total += math.exp(lp)
        assert got.probs[s] == pytest.approx(total, rel=1e-6, abs=2e-7), s  # paths below 1e-7 are pruned (documented)
    assert len(llm.tokenize(b"100", add_bos=False, special=False)) >= 2  # really a multi-token number here
    assert 0.0 < got.mass <= 1.0 + 1e-9 and 0.0 <= got.score <= 100.0


def test_splits_numbers():
    from csem.llm.providers.openai import splits_numbers

    assert splits_numbers(["8", "5", "\n"]) and splits_numbers([" 8", "5"])
    assert not splits_numbers(["85", "\n"])  # cl100k_base / o200k_base / Llama 3 keep it whole
    assert not splits_numbers(["The", " summary"]) and not splits_numbers(["7"])


@pytest.mark.slow
def test_openai_server_falls_back_when_its_tokenizer_splits_numbers(llama_server_factory, tiny_template):
    """Qwen2.5-0.5B behind llama.cpp's OpenAI-compatible server splits '85' into '8' + '5': on a 0-100
    scale the first token's probabilities are those of the first digit only, so csem says so and
    parses the answer instead; on 1-5 the first token is the whole score and probs mode is kept."""
    from csem.assets import resolve_gguf
    from csem.judge import judge_records
    from csem.rubrics import Rubric

    recs = [dict(REC, id=f"r{i}", source="The river flooded the old mill on Monday.", candidate=c)
            for i, c in enumerate(["The mill flooded on Monday.", "monday the mill"])]
    hundred = Rubric(id="test/tiny-100", aspect="coherence", criteria="how well it reads",
                     scale={"min": 0, "max": 100}, template=tiny_template)
    five = Rubric(id="test/tiny-5", aspect="coherence", criteria="how well it reads", template=tiny_template)
    with llama_server_factory(resolve_gguf("qwen-0.5b")) as server:
        opts = {"base_url": server.url}
        rows, s = judge_records(recs, hundred, "openai:qwen", backend_options=opts, progress=False)
        assert s.fallback and "splits numbers into several tokens" in s.fallback and "used mode 'parse'" in s.fallback
        assert all(0 <= r["judge.coherence"] <= 100 and r["judge.coherence"] == int(r["judge.coherence"])
                   for r in rows)  # parsed whole answers, not a first-digit average
        rows, s = judge_records(recs, five, "openai:qwen", backend_options=opts, progress=False)
        assert s.fallback is None and all(1 <= r["judge.coherence"] <= 5 for r in rows)
