"""Stage ``speed``: seconds per training epoch on the training rows, the old whole-encoder recipe
against csem train's default, measured side by side in one run."""

from __future__ import annotations

import time

from harness import ASPECTS, log, machine

from .common import Bench


def stage_speed(b: Bench, train: list[dict], test: list[dict]) -> None:
    """Seconds per epoch, before (whole encoder, 512-token sources) and after (the default recipe)."""
    import lightning as L
    import torch

    from csem.model import ModelConfig, TrainConfig

    args = b.args
    cols = [f"judge.{a}" for a in ASPECTS]
    out = {}

    class Timer(L.Callback):
        """Times optimiser steps 2..n+1 (then stops: whole-encoder variants) or whole epochs
        (partial fine-tuning: epoch 1 fills the lower-layer cache, later epochs reuse it)."""

        def __init__(self, n_steps):
            self.n, self.t0, self.step_s, self.epochs = n_steps, None, None, []
            self.c0, self.step_cpu, self.epochs_cpu = None, None, []

        def on_train_epoch_start(self, trainer, module):
            self.e0, self.ec0 = time.perf_counter(), time.process_time()

        def on_train_epoch_end(self, trainer, module):
            self.epochs.append(time.perf_counter() - self.e0)
            self.epochs_cpu.append(time.process_time() - self.ec0)

        def on_train_batch_start(self, trainer, module, batch, i):
            if self.n and i == 1 and self.t0 is None:
                self.t0, self.c0 = time.perf_counter(), time.process_time()  # step 0 warms up

        def on_train_batch_end(self, trainer, module, outputs, batch, i):
            if self.n and i == self.n:
                self.step_s = (time.perf_counter() - self.t0) / self.n
                self.step_cpu = (time.process_time() - self.c0) / self.n
                trainer.should_stop = True

    default_model, default_train = ModelConfig(), TrainConfig()
    # the old default: whole encoder, whole (512-token) sources, no overlap features, COMET's head
    old = dict(name="s", encoder=args.encoder, max_length=512, source_max_length=None, overlap_features=False,
               loss="mse", hidden_sizes=[3072, 1024])
    variants = {
        "before: whole encoder fine-tuned, 512-token sources, fp32 (the old default)":
            (ModelConfig(**old),
             TrainConfig(max_epochs=1, frozen_epochs=0, lr=1e-5, head_lr=3e-5, train_layers=None, batch_size=32)),
        "whole encoder, 512-token sources, bf16-mixed autocast":
            (ModelConfig(**old),
             TrainConfig(max_epochs=1, frozen_epochs=0, train_layers=None, precision="bf16-mixed", batch_size=32)),
        "top 2 layers (lower 4 cached), 512-token sources":
            (ModelConfig(**old),
             TrainConfig(max_epochs=2, frozen_epochs=0, train_layers=2, batch_size=32)),
        f"after: csem train's default recipe ({default_model.architecture}, top {default_train.train_layers} layers, "
        f"sources {default_model.source_max_length or default_model.max_length} tokens, overlap features, "
        f"batches of {default_train.batch_size})":
            (ModelConfig(name="s", encoder=args.encoder), TrainConfig(max_epochs=2)),
    }
    n_steps = 2 if args.quick else args.speed_steps
    from csem.model import fit
    from csem.model.batching import GroupedBatchSampler

    for name, (cfg, tc) in variants.items():
        steps_per_epoch = len(GroupedBatchSampler(train, tc.batch_size, "ref-free"))
        partial = tc.train_layers is not None
        timer = Timer(0 if partial or not n_steps else n_steps)
        tc = tc.model_copy(update={"num_threads": args.threads, "seed": args.seed})
        orig = L.Trainer.__init__

        def patched(self, *a, _timer=timer, **kw):  # add the timing callback to csem's own Trainer
            kw["callbacks"] = list(kw.get("callbacks") or []) + [_timer]
            orig(self, *a, **kw)

        L.Trainer.__init__ = patched
        try:
            fit(train, cols, "ref-free", config=cfg, train_config=tc, label_range=(1, 5))
        finally:
            L.Trainer.__init__ = orig
        if partial or not n_steps:  # whole epochs (--speed-steps 0: also for the whole-encoder variants)
            entry = {"first_epoch_s": timer.epochs[0], "seconds_per_epoch": timer.epochs[-1],
                     "cpu_seconds_per_epoch": timer.epochs_cpu[-1], "first_epoch_cpu_s": timer.epochs_cpu[0],
                     "seconds_per_step": timer.epochs[-1] / steps_per_epoch,
                     "timed": "whole epochs 1 and 2" if len(timer.epochs) > 1 else "whole epoch 1"}
        else:
            entry = {"seconds_per_step": timer.step_s, "seconds_per_epoch": timer.step_s * steps_per_epoch,
                     "cpu_seconds_per_epoch": timer.step_cpu * steps_per_epoch,
                     "timed": f"steps 2..{n_steps + 1} of epoch 1, times steps per epoch"}
        out[name] = {**entry, "steps_per_epoch": steps_per_epoch, "threads": torch.get_num_threads()}
        log(f"speed {name}: {entry['seconds_per_epoch']:.0f} s/epoch ({entry['timed']})")
    before = next(v for k, v in out.items() if k.startswith("before"))
    after = next(v for k, v in out.items() if k.startswith("after"))
    b.data["speed"] = {"variants": out, "ratio_before_over_after": before["seconds_per_epoch"] / after["seconds_per_epoch"],
                       "cpu_ratio_before_over_after": before["cpu_seconds_per_epoch"] / after["cpu_seconds_per_epoch"],
                       "machine": machine(), "rows": len(train)}
    b.save()
