"""``csem train``: train a learned evaluation model on judge (or human) ratings (CSEM stage iii)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from csem.cli import app, col_option, column_map
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


SET_HELP = ("SECTION.FIELD=VALUE (repeatable): any field of ModelConfig (model.) or TrainConfig (train.), e.g. "
            "--set train.lr=1e-4 --set model.hidden_sizes=[512] --set train.init=package:news-relevance-minilm; "
            "--print-config lists them with their defaults")


@app.command()
def train(
    data: Optional[Path] = typer.Option(None, "--data", help="labelled file (JSONL/CSV/Parquet)"),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="label column(s), comma separated, one "
                                            "head each; several judges of one aspect joined with +"),
    out: Optional[Path] = typer.Option(None, "--out", help="model folder to write"),
    config_file: Optional[Path] = typer.Option(None, "--config", help="training config: YAML with sections "
                                               "model: (ModelConfig) and train: (TrainConfig)"),
    set_: Optional[List[str]] = typer.Option(None, "--set", help=SET_HELP),
    print_config: bool = typer.Option(False, "--print-config", help="write the training config (defaults, "
                                      "with --config and --set applied) as YAML and exit"),
    mode: Optional[str] = typer.Option(None, help="ref-free (default) | ref-based | fluency | fluency-ref"),
    encoder: Optional[str] = typer.Option(None, help="minilm (default) | mpnet | a transformers folder or hub id"),
    epochs: Optional[int] = typer.Option(None, help="maximum epochs (train.max_epochs)"),
    seed: Optional[int] = typer.Option(None, help="random seed (train.seed)"),
    members: Optional[int] = typer.Option(None, help="seed ensemble of this many students (model.members)"),
    dev: Optional[Path] = typer.Option(None, "--dev", help="dev file: validation, best epoch, early stop; its sources absent "
                                      "from --data give the card's verdict"),
    label_range: Optional[str] = typer.Option(None, help="rating scale MIN,MAX (default: the scale `csem "
                                              "annotate` recorded, else the labels' range)"),
    pairs: bool = typer.Option(False, "--pairs", help="--data is a preference file (`csem annotate --compare`)"),
    judge_col: Optional[str] = typer.Option(None, "--judge-col", help="long file: the column of the judge"),
    normalise: str = typer.Option("none", "--normalise", help="several judges: none | zscore | rank"),
    combine: str = typer.Option("mean", "--combine", help="several judges: mean | heads (one head per judge)"),
    contrast: Optional[Path] = typer.Option(None, "--contrast", help="contrast pairs (`csem contrasts`)"),
    judge: Optional[str] = typer.Option(None, help="teacher judge, for the metric card"),
    rubric: Optional[str] = typer.Option(None, help="rubric of the labels, for the metric card"),
    col: Optional[List[str]] = col_option(),
) -> None:
    """Train an evaluation model (a text encoder, features comparing the candidate with its source or
    reference, one head per aspect) and save it with its metric card."""
    from csem.data.records import check_output_path, read_records
    from csem.model.config import dump_config
    from csem.model.fit import fit
    from csem.model.labels import parse_label_spec
    from csem.pipeline.annotate import read_provenance

    common = {"model": {"mode": mode, "encoder": encoder, "members": members},
              "train": {"max_epochs": epochs, "seed": seed}}
    sections, (config, tc) = _configs(config_file, common, set_ or [])
    if print_config:
        typer.echo(dump_config(sections), nl=False)
        return
    if data is None or label_col is None or out is None:
        raise typer.BadParameter("--data, --label-col and --out are required (unless --print-config)")
    check_output_path(out, kind="folder")  # before any work
    columns = column_map(col)
    groups = parse_label_spec(label_col)  # parsed once, passed on to fit
    numeric = [c for g in groups for c in g]
    records = read_records(data, columns=columns, required=() if pairs else ("candidate",),
                           numeric=() if pairs else numeric)
    if not records:
        raise InputError(f"{data}: no records to train on (the file is empty)")
    dev_records = read_records(dev, columns=columns, required=("candidate",), numeric=numeric) if dev else None
    contrast_rows = read_records(contrast, required=()) if contrast else None
    timing = _EpochTimes(enabled=not tc.progress)
    with timing:  # the label pivot, normalisation, card entries and saving: csem.model.fit (the one path)
        model = fit(records, groups, config.mode, out_dir=out, config=config, train_config=tc,
                    dev_records=dev_records, judge_col=judge_col, normalise=normalise, combine=combine, pairs=pairs,
                    label_range=_floats(label_range, "--label-range") if label_range else None,
                    provenance=read_provenance(data), judge=judge, rubric=rubric, where=str(data),
                    dev_where=str(dev), log=typer.echo, contrast=contrast_rows, contrast_where=str(contrast),
                    notes=f"training config: {config_file}" if config_file else None, verdict=True)
    _summary(model, out, timing)


def _configs(config_file: Path | None, common: dict[str, dict], sets: list[str]) -> tuple[dict, tuple]:
    """The training config's sections (defaults < ``--config`` file < the common options < ``--set``)
    and the configs built from them; with ``train.init``, architecture fields set nowhere take the
    initial student's values."""
    from csem.model.config import DERIVED_FIELDS, SECTIONS, apply_overrides, build_configs, read_config_file

    sections = read_config_file(config_file) if config_file else {}
    for name, given in common.items():
        sections.setdefault(name, {}).update({k: v for k, v in given.items() if v is not None})
    sections = apply_overrides(sections, sets)
    init = sections.get("train", {}).get("init")
    if init:
        sections["model"] = {**_architecture_of(str(init)), **sections.get("model", {})}
    configs = build_configs(sections, where=f"{config_file} and the options" if config_file else "options")
    return {name: c.model_dump(exclude=set(DERIVED_FIELDS.get(name, ()))) for name, c in zip(SECTIONS, configs)}, configs


def _summary(model, out: Path, timing: "_EpochTimes") -> None:
    """Echo the closing lines (aspects, rows, dev figures, time; the verdict's headline) on the main process: under DDP
    (``--set train.strategy=ddp``) the other ranks leave writing to rank 0."""
    from csem.model.train import is_global_zero

    if not is_global_zero():
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
    v = model.card.get("verdict")
    if v:  # the one rule's answer on the dev records (csem.pipeline.trust.train_verdict), its reasons in the card
        typer.echo(f"verdict: {v['headline']} Reasons: {Path(out) / 'metric_card.md'}")


def _architecture_of(init: str | None) -> dict:
    """The architecture fields of the initial student's config (``train.init``), so that a warm start
    needs no architecture field repeated; a field set in the config file or with ``--set`` still wins."""
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
