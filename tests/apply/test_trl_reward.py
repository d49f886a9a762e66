"""The TRL reward function: its signature and formats, and a real tiny GRPOTrainer run on CPU."""

from __future__ import annotations

import math

import pytest

from csem.apply.reward import TRLReward, trl_reward


def test_reward_reads_standard_and_conversational_formats(student, nbest_test):
    reward = trl_reward(student, aspects=["quality", "fluency"], weights=[1.0, 0.0])
    assert isinstance(reward, TRLReward) and reward.__name__ == "csem_tiny"
    recs = nbest_test[:4]
    direct = reward.metric.score(recs)["metric.tiny.quality"]
    # standard format, the source as a dataset column
    got = reward(prompts=["p"] * 4, completions=[r["candidate"] for r in recs], source=[r["source"] for r in recs])
    assert got == pytest.approx(direct, abs=1e-4)
    # conversational format: the source is the prompt's last user turn
    prompts = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": r["source"]}] for r in recs]
    completions = [[{"role": "assistant", "content": r["candidate"]}] for r in recs]
    assert reward(prompts=prompts, completions=completions) == pytest.approx(direct, abs=1e-4)
    assert reward.calls == 2 and reward.scored == 8
    mean = trl_reward(student)  # default: the mean of the heads
    both = mean.metric.score(recs)
    assert mean(prompts=prompts, completions=completions) == pytest.approx(
        [(a + b) / 2 for a, b in zip(both["metric.tiny.quality"], both["metric.tiny.fluency"])], abs=1e-4)
    by_name = trl_reward(student, weights={"fluency": 2.0})
    assert by_name(prompts=prompts, completions=completions) == pytest.approx(
        [2 * b for b in both["metric.tiny.fluency"]], abs=1e-4)


def test_reward_errors(student):
    with pytest.raises(ValueError, match="weight"):
        trl_reward(student, weights=[1.0])
    with pytest.raises(ValueError, match="unknown aspect"):
        trl_reward(student, weights={"nonsense": 1.0})
    with pytest.raises(ValueError, match="no completions"):
        trl_reward(student)(prompts=["x"])


@pytest.mark.slow
def test_tiny_grpo_run_on_cpu_with_the_student_reward(student, nbest_test, tmp_path):
    """A real TRL GRPOTrainer (SmolLM2-135M-Instruct, fp32 on CPU) takes a few steps with the reward."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from csem.apply.mrt import load_generator

    net, tok = load_generator("smollm2")
    reward = trl_reward(student)
    rows = []
    for r in nbest_test[::4][:4]:
        rows.append({"prompt": [{"role": "user", "content": "Summarize in one sentence:\n" + r["source"][:300]}],
                     "source": r["source"]})
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=2, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=8, learning_rate=1e-6, logging_steps=1,
                      report_to="none", save_strategy="no", use_cpu=True, bf16=False, seed=0,
                      dataloader_num_workers=0)
    trainer = GRPOTrainer(model=net, reward_funcs=reward, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tok)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "rewards/csem_tiny/mean" in h]
    print(logged)
    assert trainer.state.global_step == 2
    assert logged and all(math.isfinite(h["rewards/csem_tiny/mean"]) for h in logged)
    assert reward.calls >= 2 and reward.scored >= 4  # the model stayed loaded across calls
