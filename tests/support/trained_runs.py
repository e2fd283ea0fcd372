"""The small trained runs the tests share: their recipes and data, and a cache that trains each once a session.

A `RunSpec` names a run: a recipe (a built-in one, a file of the repository,
or YAML text written as `tiny.yaml`), the data files written beside it, and
`--set` overrides. `RunCache.get(spec)` (the session fixture `run_cache`
of `tests/conftest.py`) trains it with `seqtasks run` the first time any test
of the session asks for it, in whichever pytest-xdist worker, and hands every
later caller, in either worker, the same folder:

    ROOT/                 the spec's folder in the session's cache
        tiny.yaml         the recipe, when given as text
        <data files>      as the spec lists them
        runs/<name>/<timestamp>/    the run folder
        saved_models/<name>/1/      its export (unless export=False)

The cache is `trained-runs/` in the folder pytest makes afresh for each
session (the parent of each xdist worker's base temporary folder, or the base
temporary folder itself with `-n 0`), so nothing outlives the session. A
spec's folder is trained under an exclusive `flock` of its own lock file, so
the two workers never train the same spec twice, while different specs train
at the same time on both; the key is a hash of the recipe, the data files,
the overrides and the Keras backend of the process (`KERAS_BACKEND`).

Cached folders are shared and must stay as trained. A test that writes into a
run folder or its export folder (`seqtasks eval`, `Runner.evaluate`, which
rewrites the run's validation outputs, `seqtasks export` into the recipe's
export directory, a resumed or deleted `metrics.json`) works on
`trained.copy_to(tmp_path / ...)`: a copy of the whole ROOT whose text files
name the copy instead of the cache (the recipe's data path and export
directory, the export's source and card), as if it had been trained there.
"""

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import traceback
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
SAMPLE_PAIRS = REPO / "tests" / "data" / "spa-eng-sample.tsv"
SHIPPED = REPO / "recipes" / "data"


# --- data -------------------------------------------------------------------------------------------------------


def sample_pairs(count):
    """The first `count` lines of the Anki/Tatoeba sample (`English<TAB>Spanish`), as text."""
    lines = SAMPLE_PAIRS.read_text(encoding="utf-8").splitlines()[:count]
    return "\n".join(lines) + "\n"


def conll_sentences(path, count):
    """The first `count` sentences of a CoNLL file, as text."""
    return "\n\n".join(Path(path).read_text(encoding="utf-8").strip().split("\n\n")[:count]) + "\n"


def ner_documents():
    """Ten `-DOCSTART-` documents of 50 sentences of the shipped NER sample (two become the held-out split)."""
    sentences = conll_sentences(SHIPPED / "ner-sample.train.conll", 500).strip().split("\n\n")
    documents = ["\n\n".join(sentences[start : start + 50]) for start in range(0, 500, 50)]
    return "".join(f"-DOCSTART- O\n\n{document}\n\n" for document in documents)


def sentiment_reviews(count=700):
    """The header and the first `count` reviews of the shipped sentiment sample, as text."""
    sample = (SHIPPED / "sentiment-sample.tsv").read_text(encoding="utf-8").splitlines()
    return "\n".join(sample[: count + 1]) + "\n"


# --- recipes ----------------------------------------------------------------------------------------------------

TRANSLATION_RECIPE = """
task: translation
seed: 3
data:
  path: pairs.tsv
  validation_size: 40
  max_length: 20
  source_vocab_size: 300
  target_vocab_size: 300
model:
  embedding_dim: 16
  encoder: {cell_type: gru, units: 16, bidirectional: true}
  # RNNsearch's decoder (attention before the cell, maxout output): its steps run in a scan,
  # unlike the default recipe's fused one, which the SentencePiece run test covers.
  decoder: {cell_type: gru, units: 32, dropout: 0.1, placement: before, deep_output: maxout, output_size: 16}
  attention: {type: bahdanau, units: 16}
  decoding: {beam_width: 3, length_penalty: 0.6, max_length: 12}
training:
  epochs: 6
  batch_size: 32
  learning_rate: 0.01
  label_smoothing: 0.1
"""

# The translation model `seqtasks serve`'s tests serve: Luong attention, the decoder after it, two best translations.
SERVED_TRANSLATION_RECIPE = """
task: translation
name: tiny
seed: 3
data:
  path: pairs.tsv
  validation_size: 40
  max_length: 20
  source_vocab_size: 300
  target_vocab_size: 300
model:
  embedding_dim: 16
  encoder: {cell_type: gru, units: 16, bidirectional: true}
  decoder: {cell_type: gru, units: 32}
  attention: {type: luong, score: general}
  decoding: {beam_width: 3, n_best: 2, length_penalty: 0.6, max_length: 12}
training:
  epochs: 4
  batch_size: 32
  learning_rate: 0.01
"""

NER_RECIPE = """
task: ner
seed: 2
data:
  path: train.conll
  validation_path: dev.conll
  tag_column: 1
  max_length: 50
  heldout_documents: 2
model:
  word_embedding_dim: 16
  char_embedding_dim: 8
  char_filters: 8
  encoder: {cell_type: lstm, units: 16, bidirectional: true}
  dropout: 0.2
training:
  epochs: 3
  batch_size: 32
  learning_rate: 0.01
"""

SENTIMENT_RECIPE = """
task: sentiment
seed: 2
data:
  format: tsv
  path: reviews.tsv
  validation_size: 100
  labels: ["0", "1"]
  label_names: [negative, positive]
  vocab_size: 200
  max_length: 12
model:
  embedding_dim: 16
  encoder: {cell_type: gru, units: 16, bidirectional: true}
  pooling: attention
  attention_units: 8
training:
  epochs: 6
  batch_size: 32
  learning_rate: 0.01
"""

# The encoder-decoder without attention (Sutskever et al.'s kind): the source reaches the decoder through the
# bridge's initial state and, with summary_input, its summary at every step.
NO_ATTENTION = (
    "model.attention.type=none",
    "model.decoder.summary_input=true",
    "model.decoder.placement=after",
    "model.decoder.deep_output=null",
)

# Exact resume: two epochs, a step checkpoint every 3 steps (the stop falls inside the second epoch), no early stop.
RESUMABLE = (
    "training.epochs=2",
    "training.checkpoint_every_steps=3",
    "training.early_stopping_patience=null",
)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A small run: `recipe` (a built-in recipe's name, a recipe file relative to the repository, or `tiny.yaml`
    written from `text`), `files` (`(name, text)` pairs written beside it), `overrides` (`KEY=VALUE`), and whether
    it exports (to ROOT/saved_models)."""

    label: str
    recipe: str = "tiny.yaml"
    text: str = ""
    files: tuple = ()
    overrides: tuple = ()
    export: bool = True

    def but(self, label, *overrides):
        """This spec with more overrides, under another label."""
        return dataclasses.replace(self, label=label, overrides=self.overrides + tuple(overrides))

    def key(self):
        """A hash of everything that decides what the run trains, the process's Keras backend included."""
        described = {
            "recipe": self.recipe,
            "text": self.text,
            "files": [[name, hashlib.sha256(text.encode()).hexdigest()] for name, text in self.files],
            "overrides": list(self.overrides),
            "export": self.export,
            "backend": os.environ.get("KERAS_BACKEND", "tensorflow"),
        }
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()

    def write(self, root):
        """Writes the recipe text and the data files in `root`; returns what `seqtasks run` is given as the recipe."""
        for name, text in self.files:
            (root / name).write_text(text, encoding="utf-8")
        if self.text:
            (root / self.recipe).write_text(self.text, encoding="utf-8")
            return root / self.recipe
        return REPO / self.recipe if "/" in self.recipe else self.recipe

    def command_overrides(self, root):
        return [*self.overrides, *([f"export.directory={root / 'saved_models'}"] if self.export else [])]


_PAIRS = (("pairs.tsv", sample_pairs(300)),)

# The tiny translation run of tests/tasks/translation/test_task.py.
TRANSLATION = RunSpec("translation", text=TRANSLATION_RECIPE, files=_PAIRS)
# The same over cased SentencePiece subwords (tests/tasks/translation/test_task.py).
SENTENCEPIECE_TRANSLATION = TRANSLATION.but(
    "translation-sentencepiece",
    "data.tokenizer=sentencepiece",
    "data.lower_case=false",
    "data.source_vocab_size=500",
    "data.target_vocab_size=400",
)
# Without attention, two epochs, resumable: tests/tasks/translation/test_task.py decodes and serves it and
# tests/training/test_position.py resumes a stopped copy of its recipe to the same end.
TRANSLATION_WITHOUT_ATTENTION = TRANSLATION.but(
    "translation-without-attention", *RESUMABLE, *NO_ATTENTION, "model.decoding.n_best=2"
)
# What `seqtasks serve` serves in tests/serving/test_app.py.
SERVED_TRANSLATION = RunSpec("served-translation", text=SERVED_TRANSLATION_RECIPE, files=_PAIRS)

NER = RunSpec(
    "ner",
    text=NER_RECIPE,
    files=(("train.conll", ner_documents()), ("dev.conll", conll_sentences(SHIPPED / "ner-sample.dev.conll", 60))),
)

NER_ENSEMBLE = NER.but("ner-ensemble", "model.ensemble=2", "model.self_attention=luong", "training.monitor=val_f1")

SENTIMENT = RunSpec("sentiment", text=SENTIMENT_RECIPE, files=(("reviews.tsv", sentiment_reviews()),))
SENTIMENT_ENSEMBLE = SENTIMENT.but("sentiment-ensemble", "model.ensemble=2", "model.pooling=max", "training.epochs=3")

# A slice of the shipped shapes, with Show, Attend and Tell's decoder as published (the Flickr8k recipe's).
CAPTIONING = RunSpec(
    "captioning",
    recipe="recipes/captioning.yaml",
    overrides=(
        "data.max_train_images=48",
        "data.max_validation_images=8",
        "training.epochs=2",
        "training.max_minutes=1",
        "model.decoder.placement=before",
        "model.decoder.input_feeding=false",
        "model.decoder.deep_output=linear",
    ),
)
# Two captioners trained side by side, ending with the average of the last two checkpoints where it scores higher;
# they read their own words at up to half the steps (scheduled sampling), and the epoch of the best dev BLEU-4 is kept.
CAPTIONING_ENSEMBLE = CAPTIONING.but(
    "captioning-ensemble",
    "model.ensemble=2",
    "training.keep_checkpoints=2",
    "training.average_last=2",
    "model.scheduled_sampling=0.5",
    "training.monitor=val_bleu_4",
)

# The whole default toy recipe: what it learns is the claim under test.
TOY = RunSpec("toy", recipe="toy")
# One step of the toy recipe (64 examples, batches of 64), for the commands that need a run folder and an export,
# not a good model: tests/tasks/toy/test_task.py exports and resumes copies of it, tests/encoder_decoder/test_export.py
# exports its 3 best.
SMALL_TOY = RunSpec(
    "small-toy",
    recipe="toy",
    overrides=("data.train_size=64", "data.validation_size=16", "training.epochs=1", "model.encoder.units=8"),
)


# --- the cache --------------------------------------------------------------------------------------------------


class TrainedRun(NamedTuple):
    """A trained spec: its folder (ROOT), its run folder and what `seqtasks run` printed."""

    root: Path
    run_dir: Path
    output: str

    @property
    def exports(self):
        """The export directory: `exports / <recipe name> / <version>`."""
        return self.root / "saved_models"

    def copy_to(self, dest):
        """A copy of the whole ROOT at `dest` (which must not exist) that names itself, as if trained there.

        Every UTF-8 file naming ROOT (recipes, metrics, the export's source
        and model card, checkpoint state) names `dest` instead; binary files
        (weights, SavedModels, event logs) are copied as they are.
        """
        dest = Path(dest)
        shutil.copytree(self.root, dest, symlinks=True)
        old, new = str(self.root).encode(), str(dest).encode()
        for path in dest.rglob("*"):
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            if old not in data:
                continue
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            path.write_bytes(data.replace(old, new))
        return TrainedRun(dest, dest / self.run_dir.relative_to(self.root), self.output.replace(str(self.root), str(dest)))


class RunCache:
    """Trained specs in `folder`, shared by the processes of a test session (see the module's docstring)."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._known = {}

    def get(self, spec):
        """The spec's trained run: trained now if no process of the session has trained it yet."""
        key = spec.key()
        if key not in self._known:
            self._known[key] = self._trained(spec, f"{spec.label}-{key[:12]}")
        return self._known[key]

    def copy(self, spec, dest):
        """A copy of the spec's trained run at `dest`, for a test that writes into it (`TrainedRun.copy_to`)."""
        return self.get(spec).copy_to(dest)

    def _trained(self, spec, name):
        import pytest

        root, done, failed = self.folder / name, self.folder / f"{name}.json", self.folder / f"{name}.failed"
        with open(self.folder / f"{name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, or the process ends
            if not done.exists():
                if failed.exists():
                    pytest.fail(f"{spec.label}: its training failed earlier in this session:\n{failed.read_text()}")
                if root.exists():  # a process that died while training it left this
                    shutil.rmtree(root)
                root.mkdir()
                try:
                    run_dir, output = _train(spec, root)
                except Exception:
                    failed.write_text(traceback.format_exc()[-5000:], encoding="utf-8")
                    raise
                record = {"run_dir": str(run_dir.relative_to(root)), "output": output}
                done.with_suffix(".tmp").write_text(json.dumps(record), encoding="utf-8")
                done.with_suffix(".tmp").replace(done)
            record = json.loads(done.read_text(encoding="utf-8"))
        return TrainedRun(root, root / record["run_dir"], record["output"])


def _train(spec, root):
    from tests.conftest import run_recipe

    recipe = spec.write(root)
    return run_recipe(recipe, root / "runs", *spec.command_overrides(root))


def session_cache_folder(tmp_path_factory):
    """`trained-runs/` in the folder pytest made for this session, which every xdist worker shares."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the workers' folders are popen-gw0, popen-gw1, ... in the session's folder
    return base / "trained-runs"


# --- exact resume -----------------------------------------------------------------------------------------------

_STOP_AND_RESUME = """
import json
from pathlib import Path
from seqtasks.training.checkpoints import TrainingCheckpoints
from seqtasks.recipe import load_recipe
from seqtasks.lifecycle.runner import Runner

root, overrides = Path(ROOT), OVERRIDES
recipe = load_recipe(root / "recipe.yaml", overrides)
quiet = lambda line: None
uninterrupted = Runner.start(recipe, root / "uninterrupted", log=quiet).train() if UNINTERRUPTED else {"history": None}
save = TrainingCheckpoints.save


class Stopped(Exception):
    pass


def save_then_stop(self, done=False):
    save(self, done)
    if self.epoch == 1 and self.batches_done >= 2:
        raise Stopped


TrainingCheckpoints.save = save_then_stop
try:
    Runner.start(recipe, root / "stopped", log=quiet).train()
except Stopped:
    pass
TrainingCheckpoints.save = save
resumed = Runner.start(recipe, root / "stopped", log=quiet).train()
print(json.dumps({"uninterrupted": uninterrupted["history"], "resumed": resumed["history"],
                  "epochs": resumed["epochs_run"]}))
"""


def json_lines(stdout):
    """The JSON objects a script printed, one a line, among its other output."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def stop_and_resume_script(root, overrides, setup="", uninterrupted=True):
    """A script for a fresh process: `setup`, then the recipe `root/recipe.yaml` with `overrides` trained
    whole (unless not `uninterrupted`: the caller trained it), then stopped at a step checkpoint inside epoch 2
    and resumed; it prints the histories as JSON."""
    script = _STOP_AND_RESUME.replace("ROOT", repr(str(root))).replace("OVERRIDES", repr(list(overrides)))
    return setup + script.replace("UNINTERRUPTED", repr(uninterrupted))


# What the exact-resume tests add to a recipe: resumable, and no export.
EXACT_RESUME = (*RESUMABLE, "export.enabled=false")


def write_translation_for_resume(root):
    """The tiny translation recipe and its pairs as `root/recipe.yaml`; returns its overrides (greedy decoding)."""
    (root / "pairs.tsv").write_text(sample_pairs(300), encoding="utf-8")
    (root / "recipe.yaml").write_text(TRANSLATION_RECIPE, encoding="utf-8")
    return ["model.decoding.beam_width=1"]
