"""``csem train``: train a learned evaluation model on judge (or human) ratings (CSEM stage iii)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import PRECISION_HELP, app, col_option, column_map
from csem.errors import InputError


class _EpochTimes:
    """Echo the student's per-epoch timing lines (logger ``csem.model``, INFO: ``epoch N: S steps so
    far, T s, ...``) while ``csem train`` runs without ``--progress``, so a user sees time per epoch and
    in total without Lightning's progress bar; ``seconds`` is the whole training's wall time."""

    def __init__(self, enabled: bool):
        import logging

        self.enabled, self.seconds, self.epochs = enabled, 0.0, 0
        self.logger = logging.getLogger("csem.model")
        outer = self

        class _Echo(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                msg = record.getMessage()
                if msg.startswith("epoch ") and " s, " in msg:
                    outer.epochs += 1
                    typer.echo(msg)
                elif msg.startswith("contrast pretraining: "):  # the pairs' phase, once, with its time
                    typer.echo(msg)

        self.handler = _Echo(logging.INFO)

    def __enter__(self) -> "_EpochTimes":
        import logging
        import time

        self.t0, self.level = time.perf_counter(), self.logger.level
        if self.enabled:
            self.logger.addHandler(self.handler)
            if self.logger.getEffectiveLevel() > logging.INFO:
                self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc) -> None:
        import time

        self.seconds = time.perf_counter() - self.t0
        if self.enabled:
            self.logger.removeHandler(self.handler)
            self.logger.setLevel(self.level)


def _floats(text: str, what: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"{what} must look like MIN,MAX (e.g. 1,5), got '{text}'") from None
    return lo, hi


@app.command()
def train(
    data: Path = typer.Option(..., "--data", help="labelled file (JSONL/CSV/Parquet), e.g. from `csem annotate`"),
    label_col: str = typer.Option(..., "--label-col", help="label column(s), comma separated: one head each "
                                  "(e.g. judge.coherence,judge.relevance); several judges of one aspect joined "
                                  "with + (judge.coherence@gpt-4+judge.coherence@chatgpt)"),
    judge_col: Optional[str] = typer.Option(None, "--judge-col", help="long file: the column naming each row's "
                                            "judge (one row per candidate and judge)"),
    normalise: str = typer.Option("none", "--normalise", help="several judges: per-judge normalisation before "
                                  "combining: none | zscore | rank"),
    combine: str = typer.Option("mean", "--combine", help="several judges: mean (one label per aspect) | heads "
                                "(one head per judge, the aspect's score is their mean)"),
    pairs: bool = typer.Option(False, "--pairs", help="--data is a preference file (one row per judged pair, "
                               "from `csem annotate --compare`): learn from the pairs with the ranking loss (Eq. 3)"),
    out: Path = typer.Option(..., "--out", help="model folder to write"),
    mode: str = typer.Option("ref-free", help="ref-free (Eq. 10) | ref-based (Eq. 9) | fluency | fluency-ref"),
    dev: Optional[Path] = typer.Option(None, "--dev", help="dev file: per-epoch validation, best checkpoint, early stop"),
    encoder: Optional[str] = typer.Option(None, help="minilm (default) | mpnet | a transformers folder or hub id"),
    pooling: Optional[str] = typer.Option(None, help="cls (the paper) | mean | layerwise-mix (COMET); default: "
                                          "ModelConfig's"),
    loss: Optional[str] = typer.Option(None, help="mse (Eq. 11) | ce (star classes, expected value) | pairwise "
                                       "(Eq. 3) | mse+pairwise; default: ModelConfig's"),
    pairwise_weight: float = typer.Option(1.0, help="weight of the ranking term in mse+pairwise"),
    label_range: Optional[str] = typer.Option(None, help="declared rating scale MIN,MAX (default: the rubric "
                                              "scale recorded by `csem annotate`, else inferred from the labels)"),
    architecture: Optional[str] = typer.Option(None, help="bi-encoder (Eq. 9/10, COMET estimator) | unified "
                                               "(cross-encoder: candidate, reference and source in one input); "
                                               "default: ModelConfig's"),
    hidden_sizes: Optional[str] = typer.Option(None, help="head hidden sizes, comma separated (default: ModelConfig's)"),
    activation: Optional[str] = typer.Option(None, help="tanh (default) | relu | gelu | sigmoid"),
    dropout: float = typer.Option(0.1),
    max_length: Optional[int] = typer.Option(None, help="tokens kept per text (unified: per joint input)"),
    source_max_length: Optional[int] = typer.Option(None, help="bi-encoder: tokens kept of the source"),
    ref_aggregation: str = typer.Option("max", help="several references: max | mean of the per-reference scores"),
    overlap_features: Optional[bool] = typer.Option(None, "--overlap-features/--no-overlap-features",
                                                    help="lexical features into each head: its input and an "
                                                    "output term fitted on the features first; default: on"),
    feature_set: Optional[str] = typer.Option(None, help="lexical features: overlap (novel n-grams, repetition, "
                                              "length; a linear term; the default) | novelty (the same without "
                                              "the length) | lexical (also extractive "
                                              "fragments, source positions, surface form; an MLP term; better on "
                                              "the training data's systems, worse on unseen ones; use --lr 1e-4 "
                                              "--head-lr 1e-4)"),
    acceptability_gate: Optional[bool] = typer.Option(
        None, "--acceptability-gate/--no-acceptability-gate",
        help="after training, fit the acceptability gate (real vs rule-made degenerate texts; a text it rejects "
             "scores below the real candidates); default: on"),
    members: Optional[int] = typer.Option(None, help="a seed ensemble: train this many students (seeds SEED, "
                                          "SEED+1, ...) into one folder that scores their mean; k times the "
                                          "training and scoring time; default 1"),
    epochs: Optional[int] = typer.Option(None, help="maximum epochs (default: TrainConfig's)"),
    batch_size: Optional[int] = typer.Option(None, help="rows per step (default: TrainConfig's)"),
    lr: Optional[float] = typer.Option(None, help="encoder learning rate (default: TrainConfig's)"),
    head_lr: Optional[float] = typer.Option(None, help="head learning rate (default: TrainConfig's)"),
    frozen_epochs: Optional[float] = typer.Option(None, help="epochs with the encoder frozen first"),
    train_layers: Optional[int] = typer.Option(None, help="fine-tune only the top N encoder layers (lower layers' "
                                               "outputs cached once); -1 = all layers; default: TrainConfig's"),
    layerwise_decay: float = typer.Option(0.95),
    patience: int = typer.Option(3, help="early-stopping patience in epochs (with --dev)"),
    gradient_clip: float = typer.Option(1.0, help="max gradient norm (0 = off)"),
    seed: int = typer.Option(12),
    precision: str = typer.Option("auto", help="mixed precision of training: " + PRECISION_HELP),
    accelerator: str = typer.Option("auto", help="Lightning accelerator: auto | cpu | gpu"),
    devices: str = typer.Option("auto", help="Lightning devices: auto | N"),
    num_nodes: int = typer.Option(1, help="Lightning num_nodes: machines (with torchrun or SLURM; docs/guides/scale.md)"),
    strategy: str = typer.Option("auto", help="Lightning strategy, e.g. ddp (several processes; CPU: over gloo)"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    name: str = typer.Option("csem", help="metric name: scores go to metric.<name>.<aspect>"),
    judge: Optional[str] = typer.Option(None, help="teacher judge, for the metric card"),
    rubric: Optional[str] = typer.Option(None, help="rubric the labels come from, for the metric card"),
    col: Optional[List[str]] = col_option(),
    progress: bool = typer.Option(False, help="show Lightning's progress bar"),
    contrast: Optional[Path] = typer.Option(None, "--contrast", help="contrast pairs file (from `csem contrasts`): "
                                            "rank them first (pretraining), then learn the labels"),
    contrast_per_record: Optional[int] = typer.Option(None, "--contrast-per-record", help="without --contrast: make this "
                                                      "many rule-made pairs per training row and aspect (0 = none; "
                                                      "default: TrainConfig's)"),
    contrast_max_pairs: Optional[int] = typer.Option(None, "--contrast-max-pairs", help="with "
                                                     "--contrast-per-record: keep a seeded random subset of at most "
                                                     "this many pairs (default: TrainConfig's, 400)"),
    contrast_epochs: Optional[int] = typer.Option(None, "--contrast-epochs", help="epochs of contrast pretraining"),
    contrast_mix: Optional[float] = typer.Option(None, "--contrast-mix", help="weight of the contrast loss mixed into "
                                                 "label training (0 = off)"),
    contrast_specificity: Optional[float] = typer.Option(None, "--contrast-specificity", help="weight of the "
                                                         "aspect-specificity term: a contrast pair's own aspect "
                                                         "head must separate it more than the other heads "
                                                         "(0 = off)"),
    average_tail: Optional[float] = typer.Option(None, "--average-tail", help="average the weights of this share "
                                                 "(0-1) of the last training steps (tail averaging; 0 = off; "
                                                 "default: TrainConfig's)"),
    init: Optional[str] = typer.Option(None, "--init", help="start from this trained student (a model folder or "
                                       "package:NAME) instead of the bare encoder; architecture options left "
                                       "unset take its values"),
) -> None:
    """Train an evaluation model (encoder + Eq. 9/10 features + feed-forward heads) and save it with its metric card."""
    from csem.data.records import check_output_path, read_records
    from csem.model import ModelConfig, TrainConfig
    from csem.model.fit import fit, label_columns
    from csem.model.train import is_global_zero
    from csem.pipeline.annotate import read_provenance

    check_output_path(out, kind="folder")  # before any work
    columns = column_map(col)
    prov = read_provenance(data)
    label_cols = label_columns(label_col)
    ranges = _floats(label_range, "--label-range") if label_range else None
    if pairs:
        records = read_records(data, columns=columns, required=())
    else:
        records = read_records(data, columns=columns, required=("candidate",), numeric=label_cols)
    dev_records = read_records(dev, columns=columns, required=("candidate",), numeric=label_cols) if dev else None
    # options left unset take the defaults of ModelConfig / TrainConfig (their one home)
    given = lambda **kw: {k: v for k, v in kw.items() if v is not None}  # noqa: E731
    config = ModelConfig(**{**_architecture_of(init), **given(
        name=name, encoder=encoder, pooling=pooling, mode=mode, loss=loss, architecture=architecture,
        hidden_sizes=[int(h) for h in hidden_sizes.split(",") if h.strip()] if hidden_sizes else None,
        activation=activation, dropout=dropout, max_length=max_length, source_max_length=source_max_length,
        pairwise_weight=pairwise_weight, ref_aggregation=ref_aggregation, overlap_features=overlap_features,
        feature_set=feature_set, acceptability_gate=acceptability_gate, members=members)})
    tc = TrainConfig(**given(
        lr=lr, head_lr=head_lr, batch_size=batch_size, max_epochs=epochs, patience=patience,
        frozen_epochs=frozen_epochs, layerwise_decay=layerwise_decay, gradient_clip=gradient_clip,
        seed=seed, precision=precision, accelerator=accelerator,
        devices=int(devices) if devices.isdigit() else devices, num_nodes=num_nodes, strategy=strategy,
        num_threads=threads, progress=progress, contrast_per_record=contrast_per_record,
        contrast_max_pairs=contrast_max_pairs,
        contrast_epochs=contrast_epochs, contrast_mix=contrast_mix, contrast_specificity=contrast_specificity,
        average_tail=average_tail, init=init))
    contrast_rows = read_records(contrast, required=()) if contrast else None
    if train_layers is not None:
        tc = tc.model_copy(update={"train_layers": None if train_layers < 0 else train_layers})
    # the label pivot, normalisation, card entries and saving: csem.model.fit (as csem.train and csem run)
    timing = _EpochTimes(enabled=not progress)
    with timing:
        model = fit(records, label_col, mode=mode, out_dir=out, config=config, train_config=tc,
                    dev_records=dev_records, judge_col=judge_col, normalise=normalise, combine=combine, pairs=pairs,
                    label_range=ranges, provenance=prov, judge=judge, rubric=rubric, where=str(data),
                    dev_where=str(dev), log=typer.echo, contrast=contrast_rows,
                    contrast_where=str(contrast))
    if not is_global_zero():  # under DDP (--strategy ddp) the other ranks leave writing to rank 0
        return
    val = model.card.get("validation")
    summary = ""
    if val:
        means = val["mean"]
        summary = "; dev " + ", ".join(f"{k} {means[k]:.3f}" for k in ("kendall", "spearman", "pearson")
                                       if means.get(k) is not None)
    labels = model.card["training"].get("labels")  # "14 of 16 rows labelled; 2 without a label skipped"
    rows = labels["summary"] if labels else f"{model.card['training']['n_records']} training records"
    per_epoch = f", {timing.seconds / timing.epochs:.1f} s per epoch" if timing.epochs else ""
    typer.echo(f"wrote {out} (aspects {', '.join(model.aspects)}; {rows}{summary}); trained in "
               f"{timing.seconds:.1f} s{per_epoch}")


def _architecture_of(init: str | None) -> dict:
    """The architecture fields of the initial student's config (none without ``--init``), so that a warm
    start needs no architecture option repeated; an option given on the command line still wins."""
    if init is None:
        return {}
    import json

    from csem.model.config import ARCHITECTURE_FIELDS
    from csem.model.evaluation_model import CONFIG
    from csem.model.pretrained import resolve

    path = resolve(init) / CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent}: no '{CONFIG}' (is this a csem model folder written by `csem train`?)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a valid csem model config: {exc}") from None
    keep = tuple(f for f in ARCHITECTURE_FIELDS if f != "mode") + ("loss", "max_length", "source_max_length")
    return {k: raw[k] for k in keep if k in raw}
