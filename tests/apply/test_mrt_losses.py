"""Eq. 5, 6 and 12 on tiny tensors, the batched sequence log-probabilities, masks and the reward cache."""

from __future__ import annotations

import math

import pytest
import torch

from csem.apply.mrt import (RewardCache, batch_for_step, completion_mask, continuation_logprobs, mixed_loss,
                            mrt_loss, prompt_cache, q_distribution, sample_continuations, sequence_logprobs)


def test_q_is_p_to_the_alpha_renormalised():
    logp = torch.tensor([[-1.0, -2.0, -4.0], [-10.0, -10.0, -10.0]])
    alpha = 0.5
    q = q_distribution(logp, alpha)
    p = logp.exp()
    expected = p ** alpha / (p ** alpha).sum(-1, keepdim=True)
    assert torch.allclose(q, expected)
    assert torch.allclose(q[1], torch.full((3,), 1 / 3))
    # alpha -> 0: uniform; large alpha: the most probable sample
    assert torch.allclose(q_distribution(logp, 1e-9)[0], torch.full((3,), 1 / 3), atol=1e-6)
    assert q_distribution(logp, 50.0)[0, 0] > 0.999


def test_mrt_loss_value_and_gradient():
    logp = torch.tensor([[-1.0, -2.0, -4.0]], requires_grad=True)
    r = torch.tensor([[0.2, 0.9, 0.5]])
    alpha = 0.7
    loss = mrt_loss(logp, r, alpha)
    q = q_distribution(logp.detach(), alpha)
    assert loss.item() == pytest.approx(-(q * r).sum().item())
    loss.backward()
    # d/dlogp_s sum_s' Q_s' (-r_s') = -alpha * Q_s * (r_s - E_Q[r])
    expected = -alpha * q * (r - (q * r).sum())
    assert torch.allclose(logp.grad, expected, atol=1e-7)
    # the gradient raises the log-probability of the sample with the highest reward
    assert logp.grad[0, 1] < 0 and logp.grad[0, 0] > 0


def test_mrt_loss_masks_samples_and_averages_sources():
    logp = torch.tensor([[-1.0, -3.0], [-2.0, -1.0]])
    r = torch.tensor([[1.0, 5.0], [2.0, 4.0]])
    mask = torch.tensor([[True, False], [True, True]])
    q1 = torch.tensor([1.0, 0.0])
    q2 = q_distribution(logp[1:], 0.5)[0]
    expected = -((q1 * r[0]).sum() + (q2 * r[1]).sum()) / 2
    assert mrt_loss(logp, r, 0.5, mask).item() == pytest.approx(expected.item())


def test_eq12_mix():
    a, b = torch.tensor(2.0), torch.tensor(10.0)
    assert mixed_loss(a, b, 0.7).item() == pytest.approx(0.7 * 2 + 0.3 * 10)
    assert mixed_loss(a, b, 0.0).item() == 10.0  # MLE only
    assert mixed_loss(a, None, 0.7).item() == 2.0  # no references: MRT only


def test_completion_mask_stops_after_the_first_eos():
    toks = torch.tensor([[5, 6, 2, 7, 2], [5, 2, 2, 2, 2], [1, 1, 1, 1, 1]])
    m = completion_mask(toks, [2])
    assert m.tolist() == [[True, True, True, False, False], [True, True, False, False, False], [True] * 5]


def test_batched_left_padded_logprobs_equal_one_by_one():
    """A tiny random Llama (pure logic: is the batched, left-padded pass exact?)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    net = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)).eval()
    prompts = [[3, 4, 5, 6], [7, 8]]
    targets = [[9, 10, 11], [12, 13]]
    pad = 0
    p_len, t_len = 4, 3
    ids, attn, tmask = [], [], []
    for p, t in zip(prompts, targets):
        ids.append([pad] * (p_len - len(p)) + p + t + [pad] * (t_len - len(t)))
        attn.append([0] * (p_len - len(p)) + [1] * (len(p) + len(t)) + [0] * (t_len - len(t)))
        tmask.append([True] * len(t) + [False] * (t_len - len(t)))
    with torch.no_grad():
        s, n = sequence_logprobs(net, torch.tensor(ids), torch.tensor(attn), p_len, torch.tensor(tmask))
        for i, (p, t) in enumerate(zip(prompts, targets)):
            x = torch.tensor([p + t])
            lp = torch.log_softmax(net(x).logits[0, :-1].float(), -1)
            ref = sum(lp[len(p) - 1 + j, tok].item() for j, tok in enumerate(t))
            assert s[i].item() == pytest.approx(ref, abs=1e-4)
            assert n[i].item() == len(t)


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                        pad_token_id=0, eos_token_id=2, bos_token_id=1)).eval()


def test_cached_prompt_logprobs_equal_the_full_pass_values_and_gradients():
    """A tiny random Llama (pure logic): the prompt encoded once and its cache shared by several
    continuations gives the same log-probabilities and the same parameter gradients as one pass over
    ``[left-padded prompt | target]`` per row."""
    net = _tiny_llama()
    pad, p_len, t_len = 0, 4, 3
    prompts = [[3, 4, 5, 6], [7, 8]]
    targets = [[9, 10, 11], [12, 13], [14, 15, 16], [17]]
    rows = [0, 0, 1, 1]  # two continuations per prompt
    p_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    p_mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prompts])
    t_ids = torch.tensor([t + [pad] * (t_len - len(t)) for t in targets])
    t_mask = torch.tensor([[True] * len(t) + [False] * (t_len - len(t)) for t in targets])
    r = torch.tensor(rows)

    cache, last = prompt_cache(net, p_ids, p_mask)
    s1, n1 = continuation_logprobs(net, cache, p_mask, last, r, t_ids, t_mask)
    s1.sum().backward()
    g1 = {k: v.grad.clone() for k, v in net.named_parameters()}
    net.zero_grad()
    s2, n2 = sequence_logprobs(net, torch.cat([p_ids[r], t_ids], 1), torch.cat([p_mask[r], t_mask.long()], 1), p_len,
                               t_mask)
    s2.sum().backward()
    assert torch.allclose(s1, s2, atol=1e-5) and n1.tolist() == n2.tolist() == [3, 2, 3, 1]
    for k, v in net.named_parameters():
        assert torch.allclose(g1[k], v.grad, atol=1e-5), k
    # the cache is not consumed: a second use (the MLE term's) gives the same values
    s3, _ = continuation_logprobs(net, cache, p_mask, last, r, t_ids, t_mask)
    assert torch.allclose(s3, s1.detach(), atol=1e-6)


def test_samples_from_a_shared_prompt_cache_match_generate():
    """Greedy decoding from the repeated cache equals transformers' own generate per prompt."""
    net = _tiny_llama()

    class Tok:
        pad_token_id = 0

    p_ids = torch.tensor([[0, 0, 7, 8], [3, 4, 5, 6]])
    p_mask = (p_ids != 0).long()
    out = sample_continuations(net, Tok(), p_ids, p_mask, 3, do_sample=False, max_new_tokens=5)
    assert out.shape[0] == 6 and out.shape[1] <= 4 + 5
    for b, p in enumerate(([7, 8], [3, 4, 5, 6])):
        ref = net.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long), do_sample=False,
                           max_new_tokens=5, pad_token_id=0)[0, len(p):]
        for s in range(3):
            got = out[b * 3 + s, 4:4 + len(ref)]
            assert got.tolist() == ref.tolist()


def test_batches_are_a_pure_function_of_the_step():
    a = [batch_for_step(7, 2, seed=3, step=s) for s in range(8)]
    assert a == [batch_for_step(7, 2, seed=3, step=s) for s in range(8)]
    epoch0 = sorted(i for b in a[:4] for i in b)
    assert epoch0 == list(range(7))  # one epoch covers every source once


def test_reward_cache_scores_each_pair_once_and_persists(tmp_path):
    calls = []

    def fn(recs):
        calls.append(len(recs))
        return [float(len(r["candidate"])) if r["candidate"] != "bad" else None for r in recs]

    path = tmp_path / "rewards.jsonl"
    cache = RewardCache(fn, path, namespace="len")
    recs = [{"doc_id": "a", "candidate": "xy"}, {"doc_id": "a", "candidate": "xy"}, {"doc_id": "b", "candidate": "bad"}]
    assert cache(recs) == [2.0, 2.0, None]
    assert calls == [2]
    assert cache(recs) == [2.0, 2.0, None] and calls == [2] and cache.hits == 3
    again = RewardCache(fn, path, namespace="len")  # a resumed run
    assert again(recs) == [2.0, 2.0, None] and calls == [2]
    other = RewardCache(fn, path, namespace="another metric")  # never reuses another metric's rewards
    other(recs)
    assert calls == [2, 2]
    assert not math.isnan(sum(v for v in again(recs) if v is not None))


def test_reward_cache_survives_a_line_cut_by_a_kill(tmp_path):
    """rewards.jsonl is a csem.data.jsonio.JsonlLog: a torn last line is skipped on reading and cut off
    before the next append, so the rows written after it read back."""
    path = tmp_path / "rewards.jsonl"
    cache = RewardCache(lambda recs: [1.0] * len(recs), path, namespace="n")
    cache([{"doc_id": "a", "candidate": "x"}])
    with path.open("a") as fh:
        fh.write('{"key": "torn", "rew')  # the process died here
    again = RewardCache(lambda recs: [2.0] * len(recs), path, namespace="n")
    assert again.skipped == 1 and len(again.memo) == 1
    assert again([{"doc_id": "a", "candidate": "x"}, {"doc_id": "b", "candidate": "y"}]) == [1.0, 2.0]
    third = RewardCache(lambda recs: [3.0] * len(recs), path, namespace="n")
    assert third.skipped == 0 and len(third.memo) == 2


@pytest.fixture(scope="module")
def tiny_generator():
    """A tiny random Llama with the real SmolLM2 tokenizer (``tests/tiny_generator.py``): the training
    loop's logic (Lightning, Eq. 12, the log) at unit-test cost; the real 135M model is in test_mrt_train."""
    from tiny_generator import tiny_generator as build

    return build()


SOURCES = [{"id": f"s{i}", "source": f"Story {i}: the council met on Monday and voted to close the old bridge.",
            "reference": f"Council {i} votes to close the bridge."} for i in range(3)]


def test_mle_only_draws_no_samples_and_mixed_run_logs_rewards(tiny_generator, tmp_path):
    import csv

    from csem.apply.mrt import MRTConfig, train_mrt

    calls = []

    def reward(recs):
        calls.append(len(recs))
        return [float(len(r["candidate"])) for r in recs]

    net, tok = tiny_generator
    small = dict(max_steps=2, batch_size=2, num_samples=2, max_new_tokens=4, max_source_tokens=24, checkpoint_every=100,
                 lr=1e-3, threads=1)
    res = train_mrt((net, tok), SOURCES, reward, tmp_path / "mle", MRTConfig(lam=0.0, **small))
    rows = list(csv.DictReader(open(res.log)))
    assert calls == [] and res.steps == 2 and [int(r["step"]) for r in rows] == [0, 1]
    assert all(float(r["mle_loss"]) > 0 and r["reward_mean"] == "" for r in rows)
    assert 0 < float(rows[0]["cpu_seconds"]) <= float(rows[1]["cpu_seconds"])

    res = train_mrt((net, tok), SOURCES, reward, tmp_path / "mrt", MRTConfig(lam=0.7, **small))
    rows = list(csv.DictReader(open(res.log)))
    assert sum(calls) == res.reward_misses > 0 and len(rows) == 2
    for r in rows:
        assert float(r["mle_loss"]) > 0 and float(r["reward_mean"]) >= 0 and 1 <= float(r["sample_length"]) <= 4
        # Eq. 12 as logged: loss = 0.7 * L_MRT + 0.3 * L_MLE
        assert float(r["loss"]) == pytest.approx(0.7 * float(r["mrt_loss"]) + 0.3 * float(r["mle_loss"]), rel=1e-4)
