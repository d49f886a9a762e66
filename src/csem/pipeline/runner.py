"""``csem run PIPELINE.yaml``: the whole CSEM loop as one resumable pipeline.

Stages (declared as data in `STAGE_REGISTRY`: name, settings, upstream stages, inputs,
outputs; each writes its file into the run folder and is skipped on a re-run when its content
fingerprint is unchanged, see `csem.pipeline.state`; the run folder's files are read through
one [`csem.pipeline.folder.RunFolder`][], each parsed once while unchanged):

============  =============================================  ===========================
stage         does                                           writes
============  =============================================  ===========================
collect       sample candidates (CSEM stage i)               ``candidates.jsonl``
annotate      judge them with the rubrics (stage ii)         ``labelled.jsonl``
compare       only with ``compare``: the judge compares      ``pairs.jsonl``
              pairs of candidates of each training source
train         train the student on training sources (iii)    ``model/``
score         score every candidate with the student; with   ``scored.jsonl``
              ``score``: defer the least certain to the
              judge (the cascade's combined column)
meta_eval     student vs judge (and humans) on held-out      ``meta.json``,
              sources, with a 95% interval over resampled    ``baselines.json``
              sources; trivial baselines vs judge; with      (``cascade.json``)
              ``score``: the combined column vs the
              targets that are not the judged labels
curve         the learning curve: the student recipe on       ``curve.json``
              nested shares of the training sources, scored
              on the held-out ones, and its log-linear fit
seeds         only with ``train.seeds``: one student per     ``seeds.json``
              seed, the spread of its agreement
rerank        only with ``rerank``: the student picks one    ``reranked.jsonl``,
              candidate per held-out source (Eq. 7/8)        ``reranked.scores.jsonl``
mrt           only with ``mrt``: fine-tune a generator with  ``mrt/`` (``final/``,
              MRT + MLE (Eq. 12), the student as reward      ``train_log.csv``, ...)
verdict       can the student replace the judge? one rule    ``verdict.json``, ``gate.json``
              over the figures above (csem.report.verdict);
              the acceptability gate's count of floored
              real candidates; both added to the metric card
report        markdown + HTML report with figures            ``report.md``, ``report.html``
============  =============================================  ===========================

``train.seeds`` leaves the train stage's student (``train.options.seed``) and its files as they are;
the seeds stage trains one more student per listed seed on the same training sources and settings
(the train stage's student stands in for its own seed), scores the held-out sources with each and
writes every seed's agreement table and the mean, sd, min and max over seeds. Changing only the
seeds re-runs only this stage and the report. When the student is a seed ensemble
(``train.model.members``: k students with seeds ``seed`` ... ``seed + k - 1``, scored as their mean),
a listed seed among its members is that member scored alone (the very student that seed gives,
no retraining), and the spread is that of single students beside the ensemble's own agreement
(``meta.json``); a listed seed outside the members is trained as one student.

With ``compare`` (comparison ranking, CSEM Sec. VI-F) the train stage learns from the judged pairs
of the training sources with the ranking loss (Eq. 3, `csem.model.preferences`; no dev set:
the last epoch is kept), one head per pairwise rubric's aspect; score and meta_eval then measure
that student against the annotate stage's ratings of the held-out sources (and the humans).

With ``score`` (``score: {defer: 0.2}`` or ``{defer_budget: 50}``, ``defer_by``, ``judge``, ``rubrics``) the
score stage sends the records the student is least sure of to the judge and writes the combined column
beside the student's own (`csem.pipeline.cascade`); every later stage still measures the student's own
score, and the combined column is measured only against human ratings and the judge's repeat labels.
Changing only the section re-runs score and what follows.

With ``rerank`` the student (or the metrics listed) reranks the collect stage's N-best lists of the
held-out sources after the score stage (`csem.pipeline.rerank`); changing only the ``rerank``
section re-runs only that stage and the report, which compares the judge's score of each chosen
candidate with the mean judge score of its list.

With ``mrt`` a generator is fine-tuned after the student is trained, with minimum risk training
mixed with MLE (CSEM Eq. 12, [`csem.apply.mrt.train_mrt`][] as ``csem mrt`` runs it), the student
(every head, or ``student#aspect``) as the reward, on the training sources and their references
(`csem.pipeline.mrt`)::

    mrt: {generator: smollm2, max_steps: 20, num_samples: 5, lam: 0.7}   # -> mrt/final/

A killed mrt stage resumes from ``mrt/lightning/last.ckpt``; changing only the ``mrt`` section
re-runs only that stage (from scratch) and the report, which gives the steps done and the mean reward
and MLE loss over the first and last quarter of ``mrt/train_log.csv``.

A half-finished collect resumes from ``candidates.partial.jsonl``; a half-finished annotate or
compare resumes from the judge cache ``judge_cache.sqlite``; both keep every finished result. A
judging stage in which some judgments failed (backend errors) is not marked done: the run stops
with [`StageIncomplete`][csem.pipeline.runner.StageIncomplete] (``csem run`` exits 3, or 1 when the judge answered nothing) and a
re-run judges only what is missing.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from csem.data.columns import format_column, score_columns
from csem.data.jsonio import write_json
from csem.data.records import read_records, write_records
from csem.errors import InputError
from csem.pipeline.config import STAGES, PipelineConfig, load_pipeline, resolve_path
from csem.pipeline.folder import BASELINES_FILE, CASCADE_FILE, LABELLED, SCORED, RunFolder
from csem.pipeline.state import RunState, fingerprint

#: collect settings added after run folders existed: left out of the collect fingerprint at their default
#: value (which does what csem did before), so a finished run does not collect again after an upgrade
COLLECT_FIELDS_ADDED = ("truncated",)

console = Console(stderr=True)


class StageIncomplete(RuntimeError):
    """A judging stage finished with failed judgments; it is not marked done and later stages do not
    run. ``stage`` names it, ``summary`` is its summary (``total``/``calls``, ``judged``, ``cached``,
    ``failed``, ``errors``)."""

    def __init__(self, stage: str, summary: dict):
        self.stage, self.summary = stage, summary
        super().__init__(f"{stage}: {summary.get('failed')} judgment(s) failed; the stage is not marked done")


def split_sources(source_ids: list[str], cfg_split) -> dict[str, str]:
    """``{source id: "train" | "dev" | "test"}``: held-out sources chosen by a seeded shuffle (or
    listed in ``test_ids``), then ``dev_fraction`` of the rest for model selection. Splits are by
    source, never by candidate, so no source is seen in training and test.

    Raises:
        ValueError: unknown ``test_ids``, or a split that leaves no training source.
    """
    ids = sorted(set(source_ids))
    rng = random.Random(cfg_split.seed)
    shuffled = ids[:]
    rng.shuffle(shuffled)
    if cfg_split.test_ids:
        test = set(cfg_split.test_ids)
        unknown = test - set(ids)
        if unknown:
            raise InputError(f"split.test_ids names unknown sources: {sorted(unknown)[:5]}")
    else:
        test = set(shuffled[: max(1, round(len(ids) * cfg_split.test_fraction))])
    rest = [i for i in shuffled if i not in test]
    n_dev = round(len(rest) * cfg_split.dev_fraction) if len(rest) > 2 else 0
    dev = set(rest[:n_dev])
    if len(rest) - n_dev < 1:
        raise InputError("the split leaves no training sources; lower split.test_fraction or dev_fraction")
    return {i: "test" if i in test else "dev" if i in dev else "train" for i in ids}


class Pipeline:
    """One pipeline run in ``run_dir``. ``run(from_stage=None)`` executes the stages in order."""

    def __init__(self, config: PipelineConfig, base_dir: Path, run_dir: Path, *, progress: bool = True):
        self.cfg, self.base, self.run_dir, self.progress = config, base_dir, Path(run_dir), progress
        self.batch_poll = 30.0  # seconds between batch status requests (annotate.batch)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.state = RunState(self.run_dir)
        self.folder = RunFolder(self.run_dir)  # labelled.jsonl, scored.jsonl, scales: each read once
        self._running: dict = {}  # the stage running now: its name, fingerprint, whether forced
        self.sources_path = resolve_path(config.sources.path, base_dir)
        if not self.sources_path.exists():
            raise FileNotFoundError(f"{self.sources_path}: sources file not found (sources.path in the pipeline file)")

    @classmethod
    def from_file(cls, path: str | Path, run_dir: str | Path | None = None, **kw) -> "Pipeline":
        cfg, base = load_pipeline(path)
        return cls(cfg, base, Path(run_dir) if run_dir else Path("runs") / cfg.name, **kw)

    # -- helpers ---------------------------------------------------------------------------------
    def _sources(self) -> list[dict]:
        recs = read_records(self.sources_path, columns=self.cfg.sources.columns, required=("source",))
        if not recs:
            raise InputError(f"{self.sources_path}: no sources (the file is empty; sources.path in the pipeline file)")
        for r in recs:
            r.setdefault("doc_id", r["id"])
            if r.get("doc_id") is None:
                r["doc_id"] = r["id"]
        return recs[: self.cfg.sources.limit] if self.cfg.sources.limit else recs

    def _rubrics(self, rubrics: list[str] | None = None) -> list[str]:
        """Rubric ids as given (default ``annotate.rubrics``); rubric files resolved against the
        pipeline file's folder."""
        return [str(resolve_path(r, self.base)) if r.endswith((".yaml", ".yml", ".toml")) else r
                for r in (self.cfg.annotate.rubrics if rubrics is None else rubrics)]

    def compare_rubrics(self) -> list[str]:
        """The compare stage's pairwise rubrics (default: the pairwise versions of ``annotate.rubrics``)."""
        c = self.cfg.compare
        return self._rubrics(c.rubrics if c is not None and c.rubrics else None)

    def compare_aspects(self) -> list[str]:
        from csem.rubrics.pairwise import load_pairwise_rubrics

        return [rub.aspect for r in self.compare_rubrics() for rub in load_pairwise_rubrics(r)]

    def _stage(self, name: str, settings, upstream: list[str], inputs: list[Path], outputs: list[str],
               fn: Callable[[], dict], force: bool) -> None:
        fp = fingerprint(settings, [self.state.fingerprint_of(u) for u in upstream], inputs)
        if not force and self.state.is_done(name, fp, self.run_dir):
            console.print(f"[dim]{name}: up to date, skipped[/dim]")
            return
        console.print(f"[bold]{name}[/bold] ...")
        self._running = {"stage": name, "fingerprint": fp, "force": force}  # for a stage that resumes itself (mrt)
        t0 = time.perf_counter()
        summary = fn()
        if summary.get("failed"):  # failed judgments never mark a stage done
            raise StageIncomplete(name, summary)
        self.state.record(name, fp, outputs, summary, time.perf_counter() - t0)

    # -- stages ----------------------------------------------------------------------------------
    def collect(self) -> dict:
        from csem.collect.sampler import collect_candidates

        c = self.cfg.collect
        recs, summary = collect_candidates(
            self._sources(), c.generators, task=c.task, decoding=c.decoding, seed=c.seed,
            include_reference=c.include_reference, keep=c.keep, duplicates=c.duplicates, empty=c.empty,
            truncated=c.truncated, partial_path=self.run_dir / "candidates.partial.jsonl", progress=self.progress)
        write_records(recs, self.run_dir / "candidates.jsonl")
        (self.run_dir / "candidates.partial.jsonl").unlink(missing_ok=True)
        return summary.as_dict()

    def _with_split(self, recs: list[dict]) -> tuple[list[dict], dict[str, int]]:
        """Add ``split`` (train/dev/test, by source) to each record; return them and the source counts.
        The split is applied at training time, so changing it never re-runs collect or annotate."""
        split = split_sources([r["doc_id"] for r in recs], self.cfg.split)
        for r in recs:
            r["split"] = split[r["doc_id"]]
        return recs, {f"{k}_sources": sum(v == k for v in split.values()) for k in ("train", "dev", "test")}

    def annotate(self) -> dict:
        from csem.pipeline.annotate import annotate_file

        a = self.cfg.annotate
        return annotate_file(self.run_dir / "candidates.jsonl", self.run_dir / "labelled.jsonl",
                             rubrics=self._rubrics(), judge=a.judge, mode=a.mode, n=a.n, temperature=a.temperature,
                             cache=self.run_dir / "judge_cache.sqlite", progress=self.progress,
                             backend_options=a.options, repeatability=a.repeatability,
                             repeat_rubrics=self._rubrics(a.repeat_rubrics) if a.repeat_rubrics else None,
                             repeat_seed=a.repeat_seed, batch=self.batch_options(), prices=a.prices)

    def batch_options(self):
        """The annotate stage's batch jobs (``annotate.batch``; state in ``labelled.jsonl.batch/``), or None."""
        if not self.cfg.annotate.batch:
            return None
        from csem.judge.batch import BatchOptions

        return BatchOptions(state_dir=self.run_dir / (LABELLED + ".batch"), poll=self.batch_poll)

    def estimate_annotate(self, prices=None):
        """The annotate stage's dry run ([`csem.judge.estimate_records`][]: the judgments its cache
        lacks, their prompt tokens and cost; ``prices`` default ``annotate.prices``); nothing is sent.

        Raises:
            InputError: the collect stage has not written its candidates yet.
        """
        from csem.judge.runner import estimate_records

        cands = self.run_dir / "candidates.jsonl"
        if not cands.exists():
            raise InputError(f"{cands}: no candidates yet; the annotate stage's cost is known once collect has run "
                             "(the collect stage generates them locally)")
        a = self.cfg.annotate
        return estimate_records(read_records(cands), self._rubrics(), a.judge, mode=a.mode, n=a.n,
                                temperature=a.temperature, cache=self.run_dir / "judge_cache.sqlite",
                                backend_options=a.options, prices=prices or a.prices)

    def annotate_settings(self) -> dict:
        """The annotate settings that fingerprint the stage: backend options only when given, and the
        settings of `csem.pipeline.config.ANNOTATE_FIELDS_ADDED` only away from their defaults (runs
        from before they existed stay done)."""
        from csem.pipeline.config import ANNOTATE_FIELDS_ADDED, ANNOTATE_TRANSPORT_FIELDS

        a = self.cfg.annotate
        out = a.model_dump(exclude=set(ANNOTATE_TRANSPORT_FIELDS) | (set() if a.options else {"options"}))
        for name in ANNOTATE_FIELDS_ADDED:
            if out[name] == type(a).model_fields[name].default:
                del out[name]
        return out

    def repeatability(self) -> dict | None:
        """The judge's repeatability the annotate stage measured (``labelled.jsonl.repeatability.json``,
        [`csem.judge.repeat`][]), or None without ``annotate.repeatability``."""
        from csem.pipeline.annotate import read_repeatability

        return read_repeatability(self.run_dir / LABELLED) if self.cfg.annotate.repeatability else None

    def curve(self) -> dict:
        """The learning curve ([`csem.pipeline.trust.run_curve`][]); writes ``curve.json``."""
        from csem.pipeline.trust import run_curve

        return run_curve(self)

    def verdict(self) -> dict:
        """The verdict and the gate's count ([`csem.pipeline.trust.run_verdict`][]); writes ``verdict.json``
        and ``gate.json`` and adds both, with the judge's repeatability, to the metric card."""
        from csem.pipeline.trust import run_verdict

        return run_verdict(self)

    def compare(self) -> dict:
        """Judge pairs of the candidates of each training source (``split`` = train) in both orders;
        writes ``pairs.jsonl`` (`csem.pipeline.annotate.compare_file`)."""
        from csem.pipeline.annotate import compare_file

        c, a = self.cfg.compare, self.cfg.annotate
        recs, counts = self.labelled()
        train_recs = [r for r in recs if r["split"] == "train"]
        rating_col = c.rating_col
        if c.pairs == "adjacent" and rating_col is None:
            cols = score_columns(train_recs, ("judge",))
            if len(cols) != 1:
                raise InputError(f"compare.pairs 'adjacent' needs compare.rating_col: the annotate stage wrote "
                                 f"{len(cols)} judge columns ({', '.join(cols)})")
            rating_col = cols[0]
        summary = compare_file(train_recs, self.run_dir / "pairs.jsonl", rubrics=self.compare_rubrics(),
                               judge=c.judge or a.judge, mode=c.mode, strategy=c.pairs, per_source=c.per_source,
                               rating_col=rating_col, seed=c.seed, cache=self.run_dir / "judge_cache.sqlite",
                               progress=self.progress, backend_options=a.options if c.options is None else c.options)
        return {**summary, "train_sources": counts["train_sources"]}

    def label_cols(self) -> list[str]:
        """The judge columns the student is trained on and measured against: ``train.label_cols``,
        with ``compare`` the ratings of the pairwise rubrics' aspects, else every ``judge.<aspect>``
        the annotate stage wrote."""
        if self.cfg.train.label_cols:
            return self.cfg.train.label_cols
        return list(self.folder.memo(("label_cols",), [LABELLED], self._label_cols))

    def _label_cols(self) -> list[str]:
        recs = self.folder.rows(LABELLED)
        if self.cfg.compare is not None:
            cols = [format_column("judge", a) for a in self.compare_aspects()]
            rated = set(score_columns(recs, ("judge",)))
            lacking = [c for c in cols if c not in rated]
            if lacking:
                raise InputError(f"compare: the annotate stage rated no {', '.join(lacking)}; the student learnt "
                                 "from pairs is measured against the judge's ratings of its aspects (add their "
                                 "rating rubrics to annotate.rubrics)")
            return cols
        cols = sorted(score_columns(recs, ("judge",)))
        if not cols:
            raise InputError("the annotate stage wrote no judge.<aspect> column to train on")
        return cols

    def scales(self) -> dict[str, tuple[float, float]]:
        """The declared scale of each judge column (never inferred from data): what the annotate stage
        wrote beside ``labelled.jsonl`` ([`RunFolder.scales`][csem.pipeline.folder.RunFolder.scales]), else from the rubrics (a run folder
        annotated before the provenance file existed)."""
        written = self.folder.scales(LABELLED)
        if written:
            return written
        return self.label_ranges()

    def label_ranges(self) -> dict[str, tuple[float, float]]:
        """The declared scale of each judge column, from its rubric (never inferred from data)."""
        from csem.judge.runner import rubric_columns
        from csem.rubrics import load_rubrics

        rubrics = load_rubrics(self._rubrics())
        cols = rubric_columns(rubrics)
        return {str(cols[(r.id, a)]): (float(r.scale.min), float(r.scale.max))
                for r in rubrics for a in r.aspect_names}

    def _fit(self, recs: list[dict], out_dir: Path, members: int | None = None,
             **options) -> tuple[int, list[dict] | None, list[str]]:
        """Train a student on the ``train`` records of ``recs`` (``dev`` ones for model selection) into
        ``out_dir`` with the pipeline's train settings, ``options`` overriding ``train.options`` and
        ``members`` (if given) ``train.model.members``.
        Returns (number of training records, dev records or None, label columns)."""
        from csem.model import ModelConfig, TrainConfig
        from csem.model.fit import fit  # the one path of csem train, csem.train and this stage

        t = self.cfg.train
        labels = self.label_cols()
        config = ModelConfig(encoder=t.encoder, mode=t.mode, **{**t.model, **({"members": members} if members else {})})
        train_config = TrainConfig(**{"progress": self.progress, **t.options, **options})
        notes = f"csem pipeline '{self.cfg.name}'"
        if self.cfg.compare is not None:  # the judged pairs of the training sources (Eq. 3), no dev set
            path = self.run_dir / "pairs.jsonl"
            pair_cols = [format_column("judge", a) for a in self.compare_aspects()]
            # fit converts the rows to candidates and pairs (once); the card counts both (training.data_notes)
            model = fit(read_records(path, required=()), pair_cols, mode=t.mode, out_dir=out_dir, config=config,
                        train_config=train_config, pairs=True, judge=self.cfg.compare.judge or self.cfg.annotate.judge,
                        rubric=", ".join(self.compare_rubrics()), notes=notes, where=str(path))
            return model.card["training"]["n_records"], None, labels
        ranges = self.scales()
        train_recs = [r for r in recs if r.get("split") == "train"]
        dev_recs = [r for r in recs if r.get("split") == "dev"] or None
        fit(train_recs, labels, mode=t.mode, out_dir=out_dir, config=config, train_config=train_config,
            dev_records=dev_recs, label_range={c: ranges[c] for c in labels if c in ranges} or None,
            judge=self.cfg.annotate.judge, rubric=", ".join(self.cfg.annotate.rubrics), notes=notes)
        return len(train_recs), dev_recs, labels

    def labelled(self) -> tuple[list[dict], dict[str, int]]:
        """Copies of the annotate stage's records (``labelled.jsonl``, parsed once per run while
        unchanged) with ``split``, and the source counts per split (`_with_split`)."""
        return self._with_split(self.folder.records(LABELLED))

    def train(self) -> dict:
        recs, counts = self.labelled()
        n_train, dev_recs, labels = self._fit(recs, self.run_dir / "model")
        card = json.loads((self.run_dir / "model" / "metric_card.json").read_text())
        return {**counts, "train_rows": n_train, "dev_rows": len(dev_recs or []), "label_cols": labels,
                "history": card.get("validation_history", [])}

    def train_seed(self) -> int:
        """The seed of the train stage's student (``train.options.seed``, else TrainConfig's default)."""
        from csem.model import TrainConfig

        return int(self.cfg.train.options.get("seed", TrainConfig.model_fields["seed"].default))

    def score(self) -> dict:
        """Score every candidate with the student (``scored.jsonl``); with a ``score`` section, then
        defer the records it is least sure of to the judge (`csem.pipeline.cascade.score_deferred`):
        the summary's ``cascade`` says what it did, its ``failed`` judgments keep the stage undone.
        The throughput figure is the student's one pass, which the cascade starts from."""
        from csem.model import EvaluationModel

        recs, _ = self.labelled()
        model = EvaluationModel.load(self.run_dir / "model")
        t0 = time.perf_counter()
        student = model.predict(recs)
        seconds = time.perf_counter() - t0
        scored = student.records
        summary = {"rows": len(recs), "seconds": seconds, "samples_per_second": len(recs) / max(seconds, 1e-9)}
        if self.cfg.score is not None:
            from csem.pipeline.cascade import score_deferred

            scored, cascade = score_deferred(self, model, recs, student)
            summary.update(cascade=cascade, failed=cascade["failed"], total=cascade["judge_calls"],
                           judged=cascade["judged"], cached=cascade["cached"], errors=cascade["errors"])
        write_records(scored, self.run_dir / SCORED)
        return summary

    def score_settings(self) -> dict:
        """The score stage's settings: ``{}`` without a ``score`` section (a run folder from before the
        section existed stays done), else the section with its defaults filled in
        ([`csem.pipeline.cascade.resolve`][])."""
        if self.cfg.score is None:
            return {}
        from csem.pipeline.cascade import resolve

        return resolve(self)

    def meta_eval(self) -> dict:
        """The student against the judge (and humans) on the held-out sources (``meta.json``), the
        trivial baselines (``baselines.json``) and, with a ``score`` section, the cascade's combined
        column against the targets that are not the judged labels (``cascade.json``,
        `csem.pipeline.cascade.cascade_rows`)."""
        from csem.pipeline.agreement import BOOTSTRAP, agreement_table, baseline_rows

        rows = self.folder.rows(SCORED)
        recs = [r for r in rows if r.get("split") == "test"]
        # with a handful of held-out sources the 95% interval over resampled sources goes beside each figure
        table = agreement_table(recs, self.label_cols(), human_cols=self.cfg.human_cols, bootstrap=BOOTSTRAP)
        write_json(self.run_dir / "meta.json", table)
        # what the student must beat: length, extractiveness, the system prior (no encoder at all)
        base = baseline_rows([r for r in rows if r.get("split") == "train"], recs, self.label_cols(),
                             bootstrap=BOOTSTRAP)
        write_json(self.run_dir / BASELINES_FILE, base)
        out = {"test_rows": len(recs), "rows": len(table), "baseline_rows": len(base)}
        if self.cfg.score is not None:
            from csem.pipeline.cascade import cascade_rows

            out["cascade"] = cascade_rows(recs, self.label_cols(), human_cols=self.cfg.human_cols, bootstrap=BOOTSTRAP)
            write_json(self.run_dir / CASCADE_FILE, out["cascade"])
        return out

    def seeds(self) -> dict:
        """One student per seed in ``train.seeds``, each scored on the held-out sources; writes
        ``seeds.json`` (``{"seeds", "train_seed", "per_seed": {seed: agreement rows}, "spread"}``, see
        `csem.pipeline.agreement.seed_spread`). Each extra student is trained in a temporary
        folder and deleted once it has scored; only its agreement rows are kept."""
        from csem.model import EvaluationModel
        from csem.pipeline.agreement import agreement_table, seed_spread

        recs, _ = self.labelled()
        labels = self.label_cols()
        own = self.train_seed()
        test_recs = [r for r in recs if r.get("split") == "test"]
        members = int(self.cfg.train.model.get("members", 1))
        ensemble = EvaluationModel.load(self.run_dir / "model") if members > 1 else None
        per_seed: dict[str, list[dict]] = {}
        seconds: dict[str, float] = {}
        for seed in self.cfg.train.seeds:
            t0 = time.perf_counter()
            if seed == own and ensemble is None:  # the train stage's student, already meta-evaluated
                per_seed[str(seed)] = json.loads((self.run_dir / "meta.json").read_text())
                continue
            if ensemble is not None and 0 <= seed - own < members:  # a member of the ensemble, alone
                test = ensemble.member(seed - own).predict(test_recs).records
                per_seed[str(seed)] = agreement_table(test, labels, human_cols=self.cfg.human_cols)
                continue
            console.print(f"  seed {seed} ...")
            with tempfile.TemporaryDirectory(dir=self.run_dir, prefix=f"seed{seed}.") as tmp:
                self._fit(recs, Path(tmp) / "model", seed=seed, members=1)
                model = EvaluationModel.load(Path(tmp) / "model")
                test = model.predict(test_recs).records
            per_seed[str(seed)] = agreement_table(test, labels, human_cols=self.cfg.human_cols)
            seconds[str(seed)] = round(time.perf_counter() - t0, 3)
        spread = seed_spread(per_seed)
        write_json(self.run_dir / "seeds.json", {"seeds": self.cfg.train.seeds, "train_seed": own,
                                                 "per_seed": per_seed, "spread": spread})
        return {"seeds": self.cfg.train.seeds, "trained": len(seconds), "seconds_per_seed": seconds}

    def rerank(self) -> dict:
        """Rerank the N-best lists of ``scored.jsonl`` (held-out sources by default) with
        ``rerank.metrics``; writes ``reranked.jsonl`` and ``reranked.scores.jsonl``
        (`csem.pipeline.rerank.run_rerank`)."""
        from csem.pipeline.rerank import run_rerank

        return run_rerank(self.folder.records(SCORED), self.cfg.rerank, label_cols=self.label_cols(),
                          base=self.base, run_dir=self.run_dir, judge_cache=self.run_dir / "judge_cache.sqlite")

    def rerank_inputs(self) -> list[Path]:
        """Files the rerank stage reads besides the run folder's: a weights file, student folders."""
        from csem.pipeline.rerank import weights_file

        r = self.cfg.rerank
        paths = [resolve_path(str(weights_file(r)), self.base)] if weights_file(r) is not None else []
        for spec in r.metrics:
            p = resolve_path(spec.partition("#")[0], self.base)
            if spec.partition("#")[0] != "student" and p.is_dir():
                paths.append(p)
        return paths

    def mrt_generator(self) -> tuple[str, Path | None]:
        """``mrt.generator`` as ``load_generator`` takes it, and its local file or folder (or None);
        checked before any stage runs (`csem.pipeline.mrt.generator_uri`)."""
        from csem.pipeline.mrt import generator_uri

        return generator_uri(self.cfg.mrt.generator, self.base)

    def mrt_task(self) -> str:
        """The task prompt of the mrt stage: ``mrt.options.task``, else the collect stage's task."""
        return self.cfg.mrt.options.get("task", self.cfg.collect.task)

    def mrt(self) -> dict:
        """Fine-tune ``mrt.generator`` with MRT + MLE on the sources of ``mrt.sources`` (the training
        split by default, as the train stage split them), the train stage's student as the reward;
        writes ``mrt/`` (`csem.pipeline.mrt.run_mrt`). Resumes a killed run of the same settings."""
        from csem.pipeline.mrt import mrt_sources, run_mrt

        split = {r["doc_id"]: r["split"] for r in self.labelled()[0]}
        run = self._running
        return run_mrt(self.cfg.mrt, sources=mrt_sources(self._sources(), split, self.cfg.mrt.sources),
                       student_dir=self.run_dir / "model", label_cols=self.label_cols(),
                       generator=self.mrt_generator()[0], out_dir=self.run_dir / "mrt", task=self.mrt_task(),
                       key=run.get("fingerprint", ""), fresh=bool(run.get("force")), progress=self.progress)

    def report(self) -> dict:
        from csem.pipeline.report import write_report

        paths = write_report(self.run_dir, self.cfg, self.state.data, scales=self.scales())
        return {"files": [str(p.relative_to(self.run_dir)) for p in paths]}

    def collect_settings(self) -> dict:
        """The collect settings that fingerprint the stage. Decoding settings (run and per generator)
        list only the fields that are set: an unset field (None) inherits, so a field csem adds
        later, unset, leaves finished runs' fingerprints as they were; so do the collect fields of
        `COLLECT_FIELDS_ADDED` at their defaults."""
        c = self.cfg.collect
        out = c.model_dump(exclude={"decoding", "generators"})
        for name in COLLECT_FIELDS_ADDED:  # at their default they behave as before they existed
            if out[name] == type(c).model_fields[name].default:
                del out[name]
        out["decoding"] = c.decoding.model_dump(exclude_none=True)
        out["generators"] = [{**g.model_dump(exclude={"decoding"}),
                              "decoding": g.decoding.model_dump(exclude_none=True) if g.decoding else None}
                             for g in c.generators]
        return out

    def run(self, from_stage: str | None = None) -> dict:
        """Run every stage in order (skipping finished ones); ``from_stage`` forces it and later ones."""
        if from_stage is not None:
            from_stage = from_stage.replace("-", "_")
            if from_stage not in STAGES:
                raise InputError(f"unknown stage '{from_stage}'; choose from {', '.join(STAGES)}")
        forced = set(STAGES[STAGES.index(from_stage):]) if from_stage else set()
        # every stage's settings, inputs and outputs first: a bad setting (an unknown mrt generator)
        # fails here, before any stage runs
        plan = [(spec, spec.settings(self), spec.upstream(self.cfg), spec.inputs(self), spec.outputs(self.cfg))
                for spec in STAGE_REGISTRY if spec.enabled(self.cfg)]
        for spec, settings, upstream, inputs, outputs in plan:
            self._stage(spec.name, settings, upstream, inputs, outputs, getattr(self, spec.method),
                        force=spec.name in forced)
        return json.loads((self.run_dir / "meta.json").read_text())

    def baseline_rows(self) -> list[dict]:
        """The meta_eval stage's trivial-baseline rows (``baselines.json``; empty before it ran):
        `csem.pipeline.agreement.baseline_rows`."""
        path = self.run_dir / BASELINES_FILE
        return json.loads(path.read_text()) if path.exists() else []

    def seed_spread(self) -> list[dict] | None:
        """The seeds stage's spread rows (``seeds.json``), or None without ``train.seeds``."""
        if not self.cfg.train.seeds or not (self.run_dir / "seeds.json").exists():
            return None
        return json.loads((self.run_dir / "seeds.json").read_text())["spread"]


# -- the stages, as data ----------------------------------------------------------------------------

_RUBRIC_FILES = (".yaml", ".yml", ".toml")


@dataclass(frozen=True)
class StageSpec:
    """One stage of [`Pipeline`][csem.pipeline.runner.Pipeline], declared as data.

    Attributes:
        name: the stage name (``csem run --from NAME``; the order of `STAGE_REGISTRY` is the
            run order). method: the [`Pipeline`][csem.pipeline.runner.Pipeline] method that runs it and returns its summary.
        settings: the settings that fingerprint it (`csem.pipeline.state.fingerprint`; changing
            them re-runs the stage and what follows). upstream: the stages whose fingerprints enter
            its own. inputs: files outside the run folder it reads (their content enters the
            fingerprint). outputs: what it writes in the run folder (missing: not done).
        enabled: whether a pipeline file has this stage (the optional sections).
    """

    name: str
    method: str
    settings: Callable[[Pipeline], Any]
    upstream: Callable[[PipelineConfig], list[str]]
    outputs: Callable[[PipelineConfig], list[str]]
    inputs: Callable[[Pipeline], list[Path]] = lambda p: []
    enabled: Callable[[PipelineConfig], bool] = lambda c: True


def _mrt_inputs(p: Pipeline) -> list[Path]:
    _, generator_path = p.mrt_generator()  # an unknown generator fails here, before any stage
    return [generator_path] if generator_path is not None else []


STAGE_REGISTRY: tuple[StageSpec, ...] = (
    StageSpec("collect", "collect",
              settings=lambda p: {"collect": p.collect_settings(),
                                  "sources": p.cfg.sources.model_dump(exclude={"path"})},
              upstream=lambda c: [], inputs=lambda p: [p.sources_path], outputs=lambda c: ["candidates.jsonl"]),
    # backend options enter the fingerprint only when given (runs from before they existed stay done)
    StageSpec("annotate", "annotate", settings=lambda p: p.annotate_settings(), upstream=lambda c: ["collect"],
              inputs=lambda p: [Path(r) for r in p._rubrics() + p._rubrics(p.cfg.annotate.repeat_rubrics or [])
                                if r.endswith(_RUBRIC_FILES)],
              outputs=lambda c: [LABELLED]),
    StageSpec("compare", "compare",
              settings=lambda p: {"compare": p.cfg.compare.model_dump(), "rubrics": p.compare_rubrics(),
                                  "judge": p.cfg.compare.judge or p.cfg.annotate.judge,
                                  "split": p.cfg.split.model_dump()},
              upstream=lambda c: ["annotate"],
              inputs=lambda p: [Path(r) for r in p.compare_rubrics() if r.endswith(_RUBRIC_FILES)],
              outputs=lambda c: ["pairs.jsonl"], enabled=lambda c: c.compare is not None),
    # train.seeds is the seeds stage's setting only: listing seeds never re-trains the main student
    StageSpec("train", "train",
              settings=lambda p: {"train": p.cfg.train.model_dump(exclude={"seeds"}), "split": p.cfg.split.model_dump()},
              upstream=lambda c: ["annotate", *(["compare"] if c.compare is not None else [])],
              outputs=lambda c: ["model"]),
    # a score section (the cascade) fingerprints the stage with its defaults filled in; none: as before it existed
    StageSpec("score", "score", settings=lambda p: p.score_settings(), upstream=lambda c: ["train"],
              inputs=lambda p: [Path(r) for r in p.score_settings().get("rubrics", []) if r.endswith(_RUBRIC_FILES)],
              outputs=lambda c: [SCORED]),
    StageSpec("meta_eval", "meta_eval", settings=lambda p: {"human_cols": p.cfg.human_cols},
              upstream=lambda c: ["score"],
              outputs=lambda c: ["meta.json", BASELINES_FILE, *([CASCADE_FILE] if c.score is not None else [])]),
    StageSpec("curve", "curve", settings=lambda p: {"curve": p.cfg.curve.model_dump()}, upstream=lambda c: ["meta_eval"],
              outputs=lambda c: ["curve.json"], enabled=lambda c: c.curve is not None and c.compare is None),
    StageSpec("seeds", "seeds", settings=lambda p: {"seeds": p.cfg.train.seeds}, upstream=lambda c: ["meta_eval"],
              outputs=lambda c: ["seeds.json"], enabled=lambda c: bool(c.train.seeds)),
    StageSpec("rerank", "rerank", settings=lambda p: {"rerank": p.cfg.rerank.model_dump()},
              upstream=lambda c: ["score"], inputs=lambda p: p.rerank_inputs(),
              outputs=lambda c: ["reranked.jsonl", "reranked.scores.jsonl",
                                 *(["rerank_weights.json"] if c.rerank.weights == "mert" else [])],
              enabled=lambda c: c.rerank is not None),
    # the split is in train's fingerprint; the task (default collect.task) is in the MRTConfig dump
    StageSpec("mrt", "mrt",
              settings=lambda p: {"mrt": p.cfg.mrt.model_dump(),
                                  "config": p.cfg.mrt.mrt_config(task=p.mrt_task()).model_dump()},
              upstream=lambda c: ["train"], inputs=_mrt_inputs, outputs=lambda c: ["mrt/final", "mrt/train_log.csv"],
              enabled=lambda c: c.mrt is not None),
    StageSpec("verdict", "verdict", settings=lambda p: {},
              upstream=lambda c: ["meta_eval", *(["curve"] if c.curve is not None and c.compare is None else [])],
              outputs=lambda c: ["verdict.json", "gate.json"]),
    StageSpec("report", "report", settings=lambda p: {},
              upstream=lambda c: ["meta_eval", "verdict", *(["seeds"] if c.train.seeds else []),
                                  *(["rerank"] if c.rerank is not None else []),
                                  *(["mrt"] if c.mrt is not None else [])],
              outputs=lambda c: ["report.md", "report.html"]),
)
assert tuple(s.name for s in STAGE_REGISTRY) == STAGES, "STAGE_REGISTRY and config.STAGES name the same stages"
