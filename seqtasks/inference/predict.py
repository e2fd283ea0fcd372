"""`seqtasks predict`: any exported SavedModel of seqtasks, run on texts or image files, with TensorFlow alone."""

import json
import sys
from pathlib import Path

from seqtasks.errors import ModelFailure, SeqtasksError
from seqtasks.utils.quiet import dropped_native_stderr

MAX_IMAGE_BYTES = 64 * 1024**2


def read_inputs(path):
    """The lines of `path` (`-`: standard input), blank lines kept: each is one input."""
    from seqtasks.data.text_files import numbered_lines, reading, stream_lines

    if path == "-":
        return [line for _, line in stream_lines(sys.stdin.buffer, "standard input")]
    with reading(path):
        return [line for _, line in numbered_lines(path)]


class Predictor:
    """A SavedModel's `serving_default` with its one string input, `text` or `image` (encoded image bytes).

    The task tables (`seqtasks.recipe.tasks.task_table`) tell which task's export it
    is, by its input and output names, and so which output a line shows.
    `path` is the SavedModel's folder.
    """

    def __init__(self, loaded, serve, input_name, spec=None, path=None, signatures=None):
        self.loaded = loaded  # the signature needs the loaded object alive
        self.serve = serve
        self.input_name = input_name
        self.spec = spec
        self.path = path
        self._functions = dict(signatures or {"serving_default": serve})
        self._concrete = {}

    @property
    def signature_names(self):
        return sorted(self._functions)

    def signature(self, name):
        """Signature `name` as a concrete function (a run folder's is traced on first use), or None."""
        if name not in self._concrete and name in self._functions:
            function = self._functions[name]
            self._concrete[name] = getattr(function, "get_concrete_function", lambda: function)()
        return self._concrete.get(name)

    @classmethod
    def load(cls, path):
        """The SavedModel at `path`: a version folder, or a base folder whose newest version is loaded."""
        from seqtasks.export.saved_model import saved_model_folder

        from seqtasks.inference.runtime import serving_tensorflow

        path = saved_model_folder(path)
        tf = serving_tensorflow()  # with the tokenizers' ops
        try:
            loaded = tf.saved_model.load(str(path))
        except (OSError, ValueError, tf.errors.OpError) as error:
            raise SeqtasksError(f"{path}: cannot load the SavedModel: {str(error).splitlines()[0]}") from None
        serve = loaded.signatures.get("serving_default")
        if serve is None:
            raise SeqtasksError(f"{path}: the SavedModel has no serving_default signature")
        names = list(serve.structured_input_signature[1])
        if len(names) != 1 or names[0] not in ("text", "image"):
            raise SeqtasksError(f"{path}: expected one input named text or image; the model takes {names}")
        spec = _task_of(names[0], set(serve.structured_outputs), path)
        return cls(loaded, serve, names[0], spec, path, dict(loaded.signatures))

    def _tensor(self, items):
        import tensorflow as tf

        return tf.constant(self.inputs(items), tf.string)

    def inputs(self, items):
        """`items` as the signature's input values: texts as they are, image paths read (bytes as they are)."""
        if self.input_name == "text":
            return list(items)
        return [item if isinstance(item, bytes) else read_image(item) for item in items]

    def run(self, name, inputs):
        """Signature `name` on `inputs` (a dict of arrays by input name): its outputs as NumPy arrays.

        An unknown signature or input, or an input the model rejects, is a
        `SeqtasksError` naming it (TensorFlow's message for the last).
        """
        import tensorflow as tf

        function = self.signature(name)
        if function is None:
            raise SeqtasksError(f"no signature {name!r}; this model has {self.signature_names}")
        specs = _input_specs(function)
        missing = sorted(set(specs) - set(inputs))
        if missing:
            raise SeqtasksError(f"signature {name!r}: missing input {missing[0]!r}; it takes {sorted(specs)}")
        unknown = sorted(set(inputs) - set(specs))
        if unknown:
            raise SeqtasksError(f"signature {name!r}: unknown input {unknown[0]!r}; it takes {sorted(specs)}")
        tensors = {}
        for key, value in inputs.items():
            try:
                tensors[key] = tf.constant(value, specs[key].dtype)
            except (TypeError, ValueError):
                raise SeqtasksError(f"input {key!r}: expected {specs[key].dtype.name} values") from None
            if not specs[key].shape.is_compatible_with(tensors[key].shape):
                raise SeqtasksError(
                    f"input {key!r}: expected shape {_shape_text(specs[key].shape)}; got {_shape_text(tensors[key].shape)}"
                )
        try:
            with dropped_native_stderr():
                return {key: value.numpy() for key, value in _call(function, tensors).items()}
        except tf.errors.InvalidArgumentError as error:
            raise SeqtasksError(f"the model rejected the input: {failure_reason(error.message)}") from None
        except tf.errors.OpError as error:
            raise ModelFailure(f"the model failed: {failure_reason(error.message)}", type(error).__name__) from None

    def describe(self):
        """Every signature's inputs and outputs: `{name: {"inputs": {input: (dtype, shape)}, "outputs": ...}}`."""

        def specs(structure):
            return {key: (spec.dtype.name, spec.shape.as_list()) for key, spec in sorted(structure.items())}

        functions = {name: self.signature(name) for name in self.signature_names}
        return {
            name: {"inputs": specs(_input_specs(fn)), "outputs": specs(fn.structured_outputs)}
            for name, fn in functions.items()
        }

    def outputs(self, items):
        """The signature's outputs for `items` as NumPy arrays; an image the model refuses is named in the error."""
        import tensorflow as tf

        try:
            with dropped_native_stderr():
                outputs = _call(self.signature("serving_default"), {self.input_name: self._tensor(items)})
                return {key: value.numpy() for key, value in outputs.items()}
        except tf.errors.InvalidArgumentError as error:
            if self.input_name == "image" and len(items) > 1:
                for item in items:  # find the one that failed
                    self.outputs([item])
            what = f"{items[0]}: " if self.input_name == "image" and len(items) == 1 else ""
            raise SeqtasksError(f"{what}the model rejected the input: {failure_reason(error.message)}") from None
        except tf.errors.OpError as error:
            raise ModelFailure(f"the model failed: {failure_reason(error.message)}", type(error).__name__) from None

    def n_best(self):
        """How many hypotheses per input the export returns: its `model.decoding.n_best`."""
        plural = self.spec.n_best_outputs()[:1] if self.spec is not None else ()
        if not plural or plural[0] not in self.serve.structured_outputs:
            return 1
        return int(self.serve.structured_outputs[plural[0]].shape[1])

    def lines(self, items, batch_size, as_json=False, n_best=None, outputs=None):
        """One printable line per input, in order, batch by batch; with `n_best`, that many lines per input.

        `outputs(batch)`, when given, computes a batch's outputs instead of
        `serving_default` (the `with_settings` signature, for decoding settings).
        """
        import click

        if not as_json and self.spec is None:
            outputs = ", ".join(sorted(self.serve.structured_outputs))
            raise SeqtasksError(
                f"the model's outputs ({outputs}) are not those of a seqtasks task; --json prints them all"
            )
        if n_best is not None and outputs is None:
            self._check_n_best(n_best)
        outputs = outputs or self.outputs

        with click.progressbar(
            range(0, len(items), batch_size), label="Predicting", file=sys.stderr, hidden=len(items) <= batch_size
        ) as starts:
            for start in starts:
                batch = items[start : start + batch_size]
                answer = outputs(batch)
                for index in range(len(batch)):
                    if n_best is not None:
                        yield from _n_best_lines(self.spec, answer, index, n_best, as_json)
                    else:
                        yield _json_line(answer, index) if as_json else _text_line(self.spec, answer, index, batch[index])

    def _check_n_best(self, n_best):
        if self.spec is None or not self.spec.n_best_outputs():
            raise SeqtasksError("--n-best: only for the exports of translation and captioning")
        kept = self.n_best()
        if kept == 1 and n_best > 1:
            raise SeqtasksError(
                f"--n-best {n_best}: the export returns only the best hypothesis; export it with "
                f"model.decoding.n_best={n_best} (and a beam_width of at least {n_best})"
            )
        if n_best > kept:
            raise SeqtasksError(f"--n-best {n_best}: the export returns {kept} hypotheses per input (model.decoding.n_best)")


def _input_specs(function):
    """A concrete function's inputs by name: a loaded signature's keywords, or a traced method's named specs."""
    args, kwargs = function.structured_input_signature
    return dict(kwargs) if kwargs else {spec.name: spec for spec in args}


def _call(function, tensors):
    """`function` on tensors by input name: a loaded signature takes keywords, a traced method its specs in order."""
    args, kwargs = function.structured_input_signature
    if kwargs:
        return function(**tensors)
    return function(*[tensors[spec.name] for spec in args])


def _shape_text(shape):
    return "[" + ", ".join("None" if size is None else str(size) for size in shape.as_list()) + "]"


def read_image(path):
    """The bytes of the image file `path`, if it starts as a JPEG, PNG or BMP file does (a JPEG whole)."""
    from seqtasks.data.image_headers import BadImage, check_image
    from seqtasks.utils.regular_files import open_regular_file

    try:
        with open_regular_file(path, MAX_IMAGE_BYTES, "an image") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise SeqtasksError(f"{path}: no such image file") from None
    except OSError as error:
        raise SeqtasksError(f"{path}: cannot read: {error.strerror}") from None
    if not data:
        raise SeqtasksError(f"{path}: empty file, not an image")
    try:
        check_image(data)
    except BadImage as error:
        raise SeqtasksError(f"{path}: {error}") from None
    return data


def failure_reason(message):
    """The line of a TensorFlow error message that says what went wrong, not where.

    A graph's error starts `Graph execution error:`, then where the failing
    operation was defined, then the reason, then the node: `\t [[{{node ...}}]]`.
    """
    lines = message.splitlines()
    reason = lines[0] if lines else message
    for index, line in enumerate(lines[1:], start=1):
        if line.lstrip().startswith("[[{{node") and lines[index - 1].strip():
            reason = lines[index - 1].strip()
            break
    # The exports' own checks (tf.debugging.Assert) wrap their message so.
    if reason.startswith("assertion failed: [") and reason.endswith("]"):
        reason = reason[len("assertion failed: [") : -1]
    return reason


def _task_of(input_name, outputs, path=None):
    """The task table's row of the export's task: the one its recipe names (`assets.extra/recipe.yaml`) if
    its input and outputs are that task's, else the first row whose are; None if none. Outputs are a task's
    when they hold its first output and no other than it declares (an older export may lack later ones)."""
    from seqtasks.export.saved_model import AUDIT_FOLDER
    from seqtasks.recipe.tasks import task_table

    def fits(spec):
        # An export of before a task gained outputs has fewer of them (NER's entity outputs): its first one and
        # none the task does not declare.
        declared = set(spec.serving_outputs) | set(spec.n_best_outputs())
        return spec.serving_input == input_name and spec.serving_outputs[0] in outputs and outputs <= declared

    named = _recipe_task(Path(path) / AUDIT_FOLDER / "recipe.yaml") if path is not None else None
    tasks = task_table()
    if named in tasks and fits(tasks[named]):
        return tasks[named]
    return next((spec for spec in tasks.values() if fits(spec)), None)


def _recipe_task(file):
    """The `task` a recipe file names, or None (no file, or not a mapping with one)."""
    import yaml

    try:
        recipe = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return recipe.get("task") if isinstance(recipe, dict) else None



def _text_line(spec, outputs, index, item=None):
    """The task's first declared output for one input. Entities show in the text, as `[New York|LOC]`; a row
    of tags without entity outputs (an older export) as `token/TAG` pairs."""
    if "entity_count" in outputs and isinstance(item, str):
        return marked_entities(item, plain_outputs(outputs, index)["entities"])
    shown = outputs[spec.serving_outputs[0]][index]
    if "tokens" in outputs and shown.ndim == 1:
        pairs = zip(outputs["tokens"][index], shown)
        return " ".join(f"{token.decode()}/{tag.decode()}" for token, tag in pairs if token)
    return shown.decode()


def _n_best_lines(spec, outputs, index, n_best, as_json):
    """The `n_best` best hypotheses of input `index`: `score<TAB>text` lines, or one JSON object of lists."""
    first = spec.serving_outputs[0]
    if spec.n_best_outputs()[0] in outputs:
        texts, scores = outputs[spec.n_best_outputs()[0]][index][:n_best], outputs["scores"][index][:n_best]
    else:
        texts, scores = outputs[first][index : index + 1], outputs["score"][index : index + 1]
    if as_json:
        yield json.dumps({first: [t.decode() for t in texts], "score": [float(s) for s in scores]}, ensure_ascii=False)
        return
    for text, score in zip(texts, scores):
        yield f"{float(score):.4f}\t{text.decode()}"


def _json_line(outputs, index):
    return json.dumps(plain_outputs(outputs, index), ensure_ascii=False)


def plain_outputs(outputs, index):
    """Input `index`'s outputs as plain Python values, without padding.

    NER's `tokens` and `tags` come padded with empty strings to the longest
    input of the batch; a token is never empty, so the row is cut at its
    first empty token.
    """

    def plain(value):
        if isinstance(value, bytes):
            return value.decode()
        if hasattr(value, "tolist"):
            value = value.tolist()
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    row = {key: plain(value[index]) for key, value in outputs.items()}
    tokens = row.get("tokens")
    if isinstance(tokens, list):
        length = tokens.index("") if "" in tokens else len(tokens)
        for key, value in list(row.items()):
            if isinstance(value, list) and len(value) == len(tokens):
                row[key] = value[:length]
    if "entity_count" in row:
        count = row.pop("entity_count")
        fields = {name: row.pop(f"entity_{name}")[:count] for name in _ENTITY_FIELDS}
        row["entities"] = [dict(zip(fields, values)) for values in zip(*fields.values())]
    return row


# NER's per-entity outputs (`entity_<field>`, padded, with `entity_count`), as `plain_outputs` groups them.
_ENTITY_FIELDS = ("start", "end", "text", "type", "score")


def marked_entities(text, entities):
    """`text` with each entity bracketed and typed in place: "John lives in [New York|LOC]."."""
    pieces, position = [], 0
    for entity in entities:
        pieces += [text[position : entity["start"]], f"[{text[entity['start'] : entity['end']]}|{entity['type']}]"]
        position = entity["end"]
    return "".join(pieces + [text[position:]])
