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
    `n_best` lists `(text, score)` pairs, best first, when `translate` was
    given `n_best`.
    """

    text: str
    score: float
    source_tokens: list = None
    target_tokens: list = None
    attention: object = None
    n_best: list = None


@dataclass
class Classification:
    """A text's label and the probabilities of every class, in the recipe's `data.label_names` order."""

    label: str
    probabilities: list


@dataclass
class Caption:
    """An image's caption and its length-normalised log-probability; `n_best` as for `Translation`."""

    text: str
    score: float
    n_best: list = None


@dataclass
class Entity:
    """A named entity: `text[start:end]` of the tagged text, its `type` (e.g. `"LOC"`) and `score`, the
    model's probability that exactly this span has this type. Offsets count Unicode characters."""

    start: int
    end: int
    text: str
    type: str
    score: float


@dataclass
class Tagged:
    """A tagged text: its `entities` (`Entity`s in text order), and the `tokens` the pre-tokenizer made, their
    `tags` (IOB2) and `offsets` (`(start, end)` pairs). For an input of tokens, `text` is the tokens joined
    by single spaces, which the offsets count in. `entities` and `offsets` are None from a model whose
    export has no entity outputs (a tagging task of one's own, or an NER export of before 2026-11-28)."""

    text: str
    entities: list
    tokens: list
    tags: list
    offsets: list


@dataclass
class Scored:
    """A target's log-probability given its input (forced decoding): length-normalised as the search scores
    (`score`), in total (`log_prob`), and per token (`tokens`, the end token included, and `token_log_probs`)."""

    score: float
    log_prob: float
    tokens: list
    token_log_probs: list


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
        from seqtasks.utils.quiet import quiet_tensorflow

        quiet_tensorflow()
    path = Path(path)
    if (path / "recipe.yaml").is_file():
        from seqtasks.inference.predict import Predictor
        from seqtasks.lifecycle.runner import Runner

        runner = Runner.open(path, log=lambda line: None)
        model = runner.load_model(checkpoint)
        from seqtasks.export.saved_model import module_signatures

        module = runner.task.serving_module(model)
        spec = runner.task.spec
        predictor = Predictor(module, module.serve, spec.serving_input, spec, path, module_signatures(module))
        return SeqtasksModel(predictor, runner, model)
    if checkpoint is not None:
        raise SeqtasksError(f"{path}: checkpoint={checkpoint!r} needs a run folder; an export holds one model")
    if not path.is_dir():
        raise SeqtasksError(f"{path}: no such run folder or SavedModel")
    from seqtasks.inference.predict import Predictor

    predictor = Predictor.load(path)
    if predictor.spec is None:
        raise SeqtasksError(f"{predictor.path}: not the export of a seqtasks task (its outputs are unknown)")
    return SeqtasksModel(predictor)


class SeqtasksModel:
    """A trained model with one method for its task; each takes one input or a list and answers alike.

    - translation: `translate(texts, attention=False, **settings)` -> `Translation`s;
    - sentiment: `classify(texts)` -> `Classification`s;
    - ner: `tag(texts)` -> `Tagged`s: entity spans with offsets and scores, tokens and tags (a text may be a
      list of tokens instead);
    - captioning: `caption(image_paths)` -> `Caption`s (an image's bytes may stand for its path);
    - translation and captioning: `score(inputs, targets)` -> `Scored`s, the log-probabilities of given outputs;
    - any task: `predict(inputs)` -> dicts of every output of the export's signature;
      `attention(inputs)` -> tokens and attention weights; `run_signature(name, inputs)`.

    Inputs go through the model `batch_size` at a time. Exports made since
    `seqtasks serve` hold the signatures `with_settings` (decoding settings
    per call) and `attention`; a run folder's model has them too.

    Attributes:
        task: the task's name, e.g. `"translation"`.
        path: the run folder or the SavedModel version folder.
        input_name: the signatures' example input, `"text"` or `"image"`.
    """

    def __init__(self, predictor, runner=None, model=None):
        self._predictor = predictor
        self._runner = runner
        self._model = model
        self.task = predictor.spec.name
        self.path = predictor.path
        self.input_name = predictor.input_name
        self.spec = predictor.spec
        self.binary_input = predictor.spec.binary_input
        self.mergeable_signatures = predictor.spec.mergeable_signatures

    def __repr__(self):
        return f"<seqtasks {self.task} model from {self.path}>"

    def predict(self, inputs, batch_size=64):
        """Every output of the serving signature for each input, as plain Python values (NER: without padding)."""
        from seqtasks.inference.predict import plain_outputs

        single, items = _as_list(inputs, self.binary_input)
        results = []
        for outputs, count in self._batches(items, batch_size):
            results += [plain_outputs(outputs, index) for index in range(count)]
        return results[0] if single else results

    def translate(self, texts, batch_size=64, attention=False, prefix=None, **settings):
        """`Translation`s of `texts`; `settings` (any of the decoding settings declared in
        `seqtasks.decoding.settings`, e.g. `beam_width=5`) replace the export's own (the recipe's
        `model.decoding`) for this call (its `with_settings` signature); those left out are the export's.

        With `attention`, each result also holds the subwords and the weights
        of the recipe's own decoding (a model without attention cannot).
        `prefix` (a text, or one per input) is where every translation starts:
        its tokens are forced and the search continues them (`with_prefix`).
        """
        self._expect("translate")
        single, items = _as_list(texts)
        results = self._decoded(Translation, "translation", items, batch_size, settings, prefix)
        if attention:
            maps = [(m["source_tokens"], m["target_tokens"], m["attention"]) for m in self.attention(items)]
            for result, (source_tokens, target_tokens, weights) in zip(results, maps):
                result.source_tokens, result.target_tokens, result.attention = source_tokens, target_tokens, weights
        return results[0] if single else results

    def attention(self, inputs, batch_size=16):
        """For each input, the `attention` signature's outputs as plain values, padding cut off.

        Translation: `translation`, `score`, `source_tokens`, `target_tokens`
        (the end token included) and `attention` `(target, source)` as a
        NumPy array. Sentiment: `label`, `probabilities`, `tokens` and
        `attention` `(tokens,)`. Captioning (inputs are image paths or
        bytes): `caption`, `score`, `tokens`, `attention` `(tokens, h * w)`
        and `grid` `[h, w]`. A model without attention (NER, `attention:
        none`, pooling other than attention) raises `SeqtasksError`.
        """
        from seqtasks.export.signatures import ATTENTION_SIGNATURE

        if ATTENTION_SIGNATURE not in self._predictor.signature_names:
            raise SeqtasksError(f"{self.path}: this {self.task} model has no attention weights to show")
        single, items = _as_list(inputs, self.binary_input)
        results = []
        for start in range(0, len(items), _positive(batch_size)):
            batch = items[start : start + batch_size]
            inputs = {self._predictor.input_name: self._predictor.inputs(batch)}
            results += attention_rows(self._predictor.run(ATTENTION_SIGNATURE, inputs))
        return results[0] if single else results

    def score(self, inputs, targets, batch_size=64):
        """How likely the model finds each target given its input: `Scored`s, one per (input, target) pair.

        `inputs` are texts (captioning: image paths or bytes) and `targets`
        texts, as many; each target is tokenized as the model writes, and
        the end token is scored after it. The `score` signature of the export.
        """
        from seqtasks.export.signatures import SCORE_SIGNATURE

        if SCORE_SIGNATURE not in self._predictor.signature_names:
            if self.spec.n_best_outputs():
                raise SeqtasksError(f"{self.path}: this export has no score signature (export it again to add it)")
            raise SeqtasksError(f"{self.path}: a {self.task} model writes no text to score; use predict()")
        single, items = _as_list(inputs, self.binary_input)
        _, wanted = _as_list(targets)
        if len(wanted) != len(items):
            raise SeqtasksError(f"targets: expected one per input ({len(items)}); got {len(wanted)}")
        results = []
        for start in range(0, len(items), _positive(batch_size)):
            batch = {self.input_name: self._predictor.inputs(items[start : start + batch_size]),
                     "target": wanted[start : start + batch_size]}
            outputs = self._predictor.run(SCORE_SIGNATURE, batch)
            for i in range(len(batch["target"])):
                tokens = [token.decode() for token in outputs["target_tokens"][i]]
                kept = tokens.index("") if "" in tokens else len(tokens)
                results.append(Scored(float(outputs["score"][i]), float(outputs["log_prob"][i]), tokens[:kept],
                                      [float(p) for p in outputs["token_log_probs"][i][:kept]]))
        return results[0] if single else results

    def classify(self, texts, batch_size=64):
        self._expect("classify")
        return self._each(
            texts,
            batch_size,
            lambda out, i: Classification(out["label"][i].decode(), [float(p) for p in out["probabilities"][i]]),
        )

    def tag(self, texts, batch_size=64):
        """`Tagged`s of `texts`: each a string, split by the recipe's pre-tokenizer inside the model, or a list
        of tokens, tagged as they are (`from_tokens`). One string gives one `Tagged`; a list (of strings or
        token lists) a list of them, so one tokenized sentence is passed as `[["John", "Smith", ...]]`."""
        from seqtasks.inference.predict import plain_outputs
        from seqtasks.tasks.ner.export import TOKENS_SIGNATURE

        self._expect("tag")
        single = isinstance(texts, str)
        items = [texts] if single else texts
        if not isinstance(items, (list, tuple)) or not all(_is_text_or_tokens(item) for item in items):
            raise SeqtasksError("expected a text, a list of tokens, or a list of texts or token lists")
        results = [None] * len(items)
        for tokenized in (False, True):
            chosen = [i for i, item in enumerate(items) if isinstance(item, (list, tuple)) == tokenized]
            for start in range(0, len(chosen), _positive(batch_size)):
                batch = [items[i] for i in chosen[start : start + batch_size]]
                if tokenized:
                    width = max(1, max(len(tokens) for tokens in batch))
                    padded = [list(tokens) + [""] * (width - len(tokens)) for tokens in batch]
                    outputs = self._predictor.run(TOKENS_SIGNATURE, {"tokens": padded})
                else:
                    outputs = self._predictor.outputs(batch)
                for offset, index in enumerate(chosen[start : start + batch_size]):
                    row = plain_outputs(outputs, offset)
                    text = items[index] if not tokenized else " ".join(items[index])
                    # An export made before entity outputs existed gives tokens and tags only.
                    entities = [Entity(**entity) for entity in row["entities"]] if "entities" in row else None
                    offsets = list(zip(row["token_start"], row["token_end"])) if "token_start" in row else None
                    results[index] = Tagged(text, entities, row["tokens"], row["tags"], offsets)
        return results[0] if single else results

    def caption(self, image_paths, batch_size=16, prefix=None, **settings):
        """`Caption`s of images (paths or bytes); `settings` and `prefix` as for `translate` (e.g.
        `num_samples=5, temperature=0.8, n_best=5` for five sampled captions in `Caption.n_best`, best
        first; `prefix="a dog"` for captions that start so)."""
        self._expect("caption")
        single, items = _as_list(
            [_item(p) for p in image_paths] if isinstance(image_paths, (list, tuple)) else _item(image_paths), True
        )
        results = self._decoded(Caption, "caption", items, batch_size, settings, prefix)
        return results[0] if single else results

    def _decoded(self, kind, output, items, batch_size, settings, prefix):
        """`kind(text, score)` per item, decoded with `settings` and `prefix`; with an `n_best` setting, also
        its `n_best` list of `(text, score)` pairs, best first."""
        results = []
        for outputs, count in self._batches(items, batch_size, settings, prefix):
            for i in range(count):
                result = kind(outputs[output][i].decode(), float(outputs["score"][i]))
                if settings.get("n_best") is not None:
                    pairs = zip(outputs[output + "s"][i], outputs["scores"][i])
                    result.n_best = [(text.decode(), float(score)) for text, score in pairs]
                results.append(result)
        return results

    def _expect(self, method):
        if self.spec.client_method != method:
            raise SeqtasksError(f"{self.path}: a {self.task} model has no {method}(); use predict()")

    def _each(self, inputs, batch_size, convert):
        single, items = _as_list(inputs, self.binary_input)
        results = []
        for outputs, count in self._batches(items, batch_size):
            results += [convert(outputs, index) for index in range(count)]
        return results[0] if single else results

    def signatures(self):
        """Every signature of the model: `{name: {"inputs": {input: (dtype, shape)}, "outputs": ...}}`."""
        return self._predictor.describe()

    def run_signature(self, name, inputs):
        """Signature `name` (`serving_default`, `with_settings`, `attention`) on a dict of input arrays.

        Returns its outputs as NumPy arrays, as TensorFlow Serving would
        compute them; `seqtasks serve` answers predict requests so.
        """
        return self._predictor.run(name, inputs)

    def _batches(self, items, batch_size, settings=None, prefix=None):
        from seqtasks.decoding.settings import NAMES, filled, problems
        from seqtasks.export.signatures import ATTENTION_SIGNATURE, PREFIX_SIGNATURE, SETTINGS_SIGNATURE

        settings = {key: value for key, value in (settings or {}).items() if value is not None}
        prefixes = None
        if prefix is not None:
            if PREFIX_SIGNATURE not in self._predictor.signature_names:
                raise SeqtasksError(f"{self.path}: this export takes no prefix (export it again to add it)")
            prefixes = [prefix] * len(items) if isinstance(prefix, str) else list(prefix)
            if len(prefixes) != len(items) or not all(isinstance(text, str) for text in prefixes):
                raise SeqtasksError(f"prefix: expected a string, or one per input ({len(items)})")
            settings = filled(settings, self.decoding_defaults())
        unknown = sorted(set(settings) - set(NAMES))
        if unknown:
            raise SeqtasksError(f"{unknown[0]}: not a decoding setting; expected some of {list(NAMES)}")
        if settings and SETTINGS_SIGNATURE not in self._predictor.signature_names:
            raise SeqtasksError(f"{self.path}: this export takes no decoding settings (export it again to add them)")
        if settings:
            accepted = self.settings_accepted()
            missing = [key for key in NAMES if key in settings and key not in accepted]
            if missing:
                raise SeqtasksError(f"{missing[0]}: this export takes only the settings {list(accepted)} "
                                    "(it was made before the others existed; export it again to add them)")
            settings = filled(settings, self.decoding_defaults())
            # Checked here as the graph checks them, before a value too large for its dtype reaches a tensor.
            wrong = problems(settings, attends=ATTENTION_SIGNATURE in self._predictor.signature_names)
            if wrong:
                raise SeqtasksError(wrong[0][1])
            settings = {key: settings[key] for key in accepted}
        for start in range(0, len(items), _positive(batch_size)):
            batch = items[start : start + batch_size]
            if not settings:
                yield self._predictor.outputs(batch), len(batch)
                continue
            inputs = {self._predictor.input_name: self._predictor.inputs(batch)}
            inputs.update({key: [value] for key, value in settings.items()})
            if prefixes is None:
                yield self._predictor.run(SETTINGS_SIGNATURE, inputs), len(batch)
            else:
                inputs["prefix"] = prefixes[start : start + batch_size]
                yield self._predictor.run(PREFIX_SIGNATURE, inputs), len(batch)

    def settings_accepted(self):
        """The decoding settings the `with_settings` signature takes, in declaration order (older exports: four)."""
        from seqtasks.decoding.settings import NAMES
        from seqtasks.export.signatures import SETTINGS_SIGNATURE

        inputs = self.signatures().get(SETTINGS_SIGNATURE, {}).get("inputs", {})
        return tuple(key for key in NAMES if key in inputs)

    def decoding_defaults(self):
        """Every decoding setting's value when a call leaves it out: the export's own (the recipe's `model.decoding`,
        kept in the SavedModel; an export made before it kept them: its `recipe.yaml`'s)."""
        from seqtasks.decoding.settings import values_of
        from seqtasks.encoder_decoder.settings_inputs import DEFAULTS_ATTRIBUTE, read_defaults

        kept = getattr(self._predictor.loaded, DEFAULTS_ATTRIBUTE, None) if self._runner is None else None
        if kept is not None:
            return values_of(read_defaults(kept))
        recipe = self.recipe() if self.spec.decodes else None
        if recipe is None:
            raise SeqtasksError(f"{self.path}: a {self.task} model has no decoding settings")
        return values_of(recipe.model.decoding)

    def label_names(self):
        """A classifier's class names in the order of its `probabilities`; None for other tasks."""
        if self._runner is not None:
            return self._runner.task.label_names()
        names = getattr(self._predictor.loaded, "label_names", None)
        return [name.decode() for name in names.numpy()] if names is not None else None

    def recipe(self):
        """The recipe the model was trained with (an export's copy in `assets.extra/`), or None if absent."""
        from seqtasks.export.saved_model import AUDIT_FOLDER
        from seqtasks.recipe import load_recipe

        if self._runner is not None:
            return self._runner.recipe
        file = Path(self.path) / AUDIT_FOLDER / "recipe.yaml"
        return load_recipe(file) if file.is_file() else None


def _as_list(inputs, images=False):
    """`(True, [x])` for one string or path (or image bytes), `(False, list)` for a list or tuple of them."""
    kinds = (str, Path, bytes) if images else (str, Path)
    if isinstance(inputs, kinds):
        return True, [_item(inputs)]
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(item, kinds) for item in inputs):
        raise SeqtasksError("expected a string or a list of strings (texts, or image paths or bytes for captioning)")
    return False, [_item(item) for item in inputs]


def _is_text_or_tokens(item):
    return isinstance(item, str) or (isinstance(item, (list, tuple)) and all(isinstance(t, str) for t in item))


def _item(value):
    return value if isinstance(value, bytes) else str(value)


def _positive(batch_size):
    if not isinstance(batch_size, int) or batch_size < 1:
        raise SeqtasksError(f"batch_size: expected a positive integer; got {batch_size!r}")
    return batch_size


def attention_rows(outputs):
    """The `attention` signature's outputs (NumPy arrays by name) as one plain dict per input, padding cut off.

    Takes the outputs of `SeqtasksModel.run_signature("attention", ...)`:
    the values a caller sent, never paths (`seqtasks serve` calls it so).
    """
    import numpy as np

    count = len(next(iter(outputs.values())))
    return [_attention_row({key: value[index] for key, value in outputs.items()}, np) for index in range(count)]


def _attention_row(row, np):
    """One input's `attention` outputs without padding: tokens cut at the first "", weights to match."""

    def plain(value):
        return value.decode() if isinstance(value, bytes) else value.item() if hasattr(value, "item") else value

    def tokens(key):
        kept = [token.decode() for token in row[key]]
        return kept[: kept.index("")] if "" in kept else kept

    result = {key: plain(value) for key, value in row.items() if np.ndim(value) == 0}
    if "probabilities" in row:
        result["probabilities"] = [float(p) for p in row["probabilities"]]
    if "grid" in row:
        result["grid"] = [int(size) for size in row["grid"]]
    weights = np.asarray(row["attention"], np.float32)
    if "source_tokens" in row:
        source, target = tokens("source_tokens"), tokens("target_tokens")
        result.update(source_tokens=source, target_tokens=target, attention=weights[: len(target), : len(source)])
    else:
        kept = tokens("tokens")
        result.update(tokens=kept, attention=weights[: len(kept)])
    return result

