"""`seqtasks.load`: a trained model, from a run folder or an export, called on plain Python values."""

from dataclasses import dataclass
from pathlib import Path

from seqtasks.errors import SeqtasksError


@dataclass
class Translation:
    """One translation: the text, its length-normalised log-probability and, on request, the attention.

    `attention` is `(len(target_tokens), len(source_tokens))`: row `i` holds
    the weights the decoder gave the source subwords while writing target
    subword `i` (the end token included); None unless asked for.
    """

    text: str
    score: float
    source_tokens: list = None
    target_tokens: list = None
    attention: object = None


@dataclass
class Classification:
    """A text's label and the probabilities of every class, in the recipe's `data.label_names` order."""

    label: str
    probabilities: list


@dataclass
class Caption:
    """An image's caption and its length-normalised log-probability."""

    text: str
    score: float


def load(path, checkpoint=None, verbose=False):
    """The model at `path`: a run folder, an export's version folder, or its base path (newest version).

    A run folder gives its final model; `checkpoint` (`best`, `latest`, a
    step or a `.weights.h5` file) picks a checkpoint instead, as for
    `seqtasks export`, and is how an unfinished run is used. Exports need
    TensorFlow (and tensorflow-text) only. TensorFlow's start-up log lines
    are hidden as in the commands, unless `verbose` (or TensorFlow was
    imported before).
    """
    if not verbose:
        from seqtasks.quiet import quiet_tensorflow

        quiet_tensorflow()
    path = Path(path)
    if (path / "recipe.yaml").is_file():
        from seqtasks.predict import Predictor
        from seqtasks.runner import Runner

        runner = Runner.open(path, log=lambda line: None)
        model = runner.load_model(checkpoint)
        server = runner.task.serving_module(model)
        spec = runner.task.spec
        return SeqtasksModel(Predictor(server, server.serve, spec.serving_input, spec, path), runner, model)
    if checkpoint is not None:
        raise SeqtasksError(f"{path}: checkpoint={checkpoint!r} needs a run folder; an export holds one model")
    if not path.is_dir():
        raise SeqtasksError(f"{path}: no such run folder or SavedModel")
    from seqtasks.predict import Predictor

    predictor = Predictor.load(path)
    if predictor.spec is None:
        raise SeqtasksError(f"{predictor.path}: not the export of a seqtasks task (its outputs are unknown)")
    return SeqtasksModel(predictor)


class SeqtasksModel:
    """A trained model with one method for its task; each takes one input or a list and answers alike.

    - translation: `translate(texts, attention=False)` -> `Translation`s;
    - sentiment: `classify(texts)` -> `Classification`s;
    - ner: `tag(texts)` -> lists of `(token, tag)` pairs (texts split on whitespace);
    - captioning: `caption(image_paths)` -> `Caption`s;
    - any task: `predict(inputs)` -> dicts of every output of the export's signature.

    Inputs go through the model `batch_size` at a time. Attention weights come
    from a run folder's model (`translate(..., attention=True)`); an export's
    signature does not return them.

    Attributes:
        task: the task's name, e.g. `"translation"`.
        path: the run folder or the SavedModel version folder.
    """

    def __init__(self, predictor, runner=None, model=None):
        self._predictor = predictor
        self._runner = runner
        self._model = model
        self.task = predictor.spec.name
        self.path = predictor.path

    def __repr__(self):
        return f"<seqtasks {self.task} model from {self.path}>"

    def predict(self, inputs, batch_size=64):
        """Every output of the serving signature for each input, as plain Python values (NER: without padding)."""
        from seqtasks.predict import plain_outputs

        single, items = _as_list(inputs)
        results = []
        for outputs, count in self._batches(items, batch_size):
            results += [plain_outputs(outputs, index) for index in range(count)]
        return results[0] if single else results

    def translate(self, texts, batch_size=64, attention=False):
        self._expect("translation", "translate")
        single, items = _as_list(texts)
        results = []
        for outputs, count in self._batches(items, batch_size):
            results += [
                Translation(outputs["translation"][i].decode(), float(outputs["score"][i])) for i in range(count)
            ]
        if attention:
            if self._runner is None:
                raise SeqtasksError(
                    f"{self.path}: attention weights come from a run folder's model; "
                    "an export's signature returns only the translation and its score"
                )
            maps = self._runner.task.attention_maps(self._model, items)
            for result, (source_tokens, target_tokens, weights) in zip(results, maps):
                result.source_tokens, result.target_tokens, result.attention = source_tokens, target_tokens, weights
        return results[0] if single else results

    def classify(self, texts, batch_size=64):
        self._expect("sentiment", "classify")
        return self._each(
            texts,
            batch_size,
            lambda out, i: Classification(out["label"][i].decode(), [float(p) for p in out["probabilities"][i]]),
        )

    def tag(self, texts, batch_size=64):
        self._expect("ner", "tag")
        return self._each(
            texts,
            batch_size,
            lambda out, i: [
                (token.decode(), tag.decode()) for token, tag in zip(out["tokens"][i], out["tags"][i]) if token
            ],
        )

    def caption(self, image_paths, batch_size=16):
        self._expect("captioning", "caption")
        return self._each(
            [str(p) for p in image_paths] if isinstance(image_paths, (list, tuple)) else str(image_paths),
            batch_size,
            lambda out, i: Caption(out["caption"][i].decode(), float(out["score"][i])),
        )

    def _expect(self, task, method):
        if self.task != task:
            raise SeqtasksError(f"{self.path}: a {self.task} model has no {method}(); use predict()")

    def _each(self, inputs, batch_size, convert):
        single, items = _as_list(inputs)
        results = []
        for outputs, count in self._batches(items, batch_size):
            results += [convert(outputs, index) for index in range(count)]
        return results[0] if single else results

    def _batches(self, items, batch_size):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise SeqtasksError(f"batch_size: expected a positive integer; got {batch_size!r}")
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            yield self._predictor.outputs(batch), len(batch)


def _as_list(inputs):
    """`(True, [x])` for one string or path, `(False, list)` for a list or tuple of them."""
    if isinstance(inputs, (str, Path)):
        return True, [str(inputs)]
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(item, (str, Path)) for item in inputs):
        raise SeqtasksError("expected a string or a list of strings (texts, or image paths for captioning)")
    return False, [str(item) for item in inputs]

