"""What an export carries to say what it is: the files of its `assets.extra/` and its model card.

`audit_files` gives them as `{file name: text}`; the model card is a callable
of the version's folder, which is known only when the version is published
(`seqtasks.export.saved_model.export_saved_model`). Every line of the card comes from the
recipe, the run, the serving signature or the metrics: nothing is made up.
"""

import dataclasses
import json

from seqtasks import __version__
from seqtasks.export.signatures import ATTENTION_SIGNATURE, PREFIX_SIGNATURE, SCORE_SIGNATURE, SETTINGS_SIGNATURE
from seqtasks.recipe import dump_recipe
from seqtasks.recipe.tasks import task_table

CARD = "MODEL_CARD.md"


@dataclasses.dataclass
class Source:
    """Where an export's weights come from.

    Attributes:
        run_dir: the run folder (absolute).
        checkpoint: `final`, `best`, `latest`, `step N` or `file`.
        checkpoint_file: the file the weights were read from (the final
            `model/model.keras` or a `.weights.h5` checkpoint).
        weights_sha256: `seqtasks.export.saved_model.weights_sha256` of the model.
    """

    run_dir: str
    checkpoint: str
    checkpoint_file: str
    weights_sha256: str


def data_files(recipe):
    """`{dotted recipe key: path}` of the files and folders of the recipe's `data` section (resolved when loaded)."""
    found = {}

    def walk(section, prefix):
        if not dataclasses.is_dataclass(section):
            return
        for field in dataclasses.fields(section):
            value = getattr(section, field.name)
            if field.metadata.get("path") and value:
                found[prefix + field.name] = value
            walk(value, f"{prefix}{field.name}.")

    walk(recipe.data, "data.")
    return found


def identity_files(recipe, weights_sha256):
    """The files that make two exports the same (`seqtasks.export.saved_model.IDENTITY_FILES`): the recipe and the weights' hash."""
    return {"recipe.yaml": dump_recipe(recipe), "weights.sha256": weights_sha256 + "\n"}


def audit_files(recipe, signature, source, input_limits, metrics=None, metrics_recipe_differs=False, data_notes=()):
    """The files of an export's `assets.extra/`: `{name: text}`, the model card a callable of the version folder.

    Args:
        recipe: the merged `Recipe` the export was made with.
        signature: `seqtasks.export.saved_model.describe_signature` of its serving function.
        source: a `Source`.
        input_limits: the card's lines on what the export reads of an input
            (`seqtasks.tasks.Task.input_limits`).
        data_notes: the card's lines on what else the model learned from
            (`seqtasks.tasks.Task.data_notes`).
        metrics: the run's metrics (`metrics.json`) when they are those of
            these weights, else None.
        metrics_recipe_differs: whether the metrics were measured with the
            run's own recipe, which differs from `recipe` (a `--set` on export).
    """
    files = {
        **identity_files(recipe, source.weights_sha256),
        "source.json": json.dumps(
            {
                "seqtasks_version": __version__,
                **dataclasses.asdict(source),
                "data_files": data_files(recipe),
                "data_url": getattr(recipe.data, "url", ""),
                "signature": signature,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
    }
    if metrics is not None:
        files["metrics.json"] = json.dumps(metrics, indent=2, sort_keys=True) + "\n"
    files[CARD] = lambda version: model_card(
        recipe, signature, source, version, input_limits, metrics, metrics_recipe_differs, data_notes
    )
    return files


_SIGNATURES = {
    SETTINGS_SIGNATURE: "the same outputs, decoded with the decoding settings (below) as inputs, one value each, "
    "`[None]` shaped, instead of this export's own",
    ATTENTION_SIGNATURE: "the tokens read and written and the attention weights over them",
    PREFIX_SIGNATURE: "the outputs of `with_settings` given a `prefix` text per input, which every output starts "
    "with (forced; the search continues it)",
    SCORE_SIGNATURE: "given a `target` text per input, the log-probability the model gives it (`log_prob`), per token "
    "(`target_tokens`, `token_log_probs`) and length-normalised as the search scores (`score`)",
}


def _other_signatures(signature):
    others = [name for name in signature.get("signatures", []) if name != "serving_default"]
    if not others:
        return []
    described = "; ".join(f"`{name}`: {_SIGNATURES.get(name, 'see its inputs and outputs')}" for name in others)
    return [f"Other signatures (`signature_name` in TensorFlow Serving's predict API): {described}.", ""]


def model_card(
    recipe, signature, source, version, input_limits, metrics=None, metrics_recipe_differs=False, data_notes=()
):
    """The Markdown model card of the export in `version` (see `audit_files` for the arguments)."""
    spec = task_table()[recipe.task]
    (input_name,) = signature["inputs"]
    lines = [f"# {recipe.name}", "", spec.description]
    if recipe.description:
        lines += ["", recipe.description]
    lines += [
        "",
        f"Exported by seqtasks {__version__} from the run folder `{source.run_dir}`, {_checkpoint(source)}. "
        "Beside this card: `recipe.yaml` (the merged recipe), `source.json` (run, checkpoint, data files, "
        "signature, `weights.sha256`)" + (", `metrics.json` (the run's metrics)." if metrics is not None else "."),
        "",
        "## Calling it with TensorFlow alone",
        "",
        "```python",
        "import tensorflow as tf",
    ]
    if signature["custom_ops"]:
        lines.append("import tensorflow_text  # registers the tokenizer's operations the graph uses")
    example = '[open("image.jpg", "rb").read()]' if spec.binary_input else '["Your text here."]'
    lines += [
        f'serve = tf.saved_model.load("{version}").signatures["serving_default"]',
        f"outputs = serve({input_name}=tf.constant({example}))",
        *(f'print(outputs["{name}"].numpy())' for name in signature["outputs"]),
        "```",
        "",
        "| | name | dtype | shape |",
        "| --- | --- | --- | --- |",
        *(_row("input", name, tensor) for name, tensor in signature["inputs"].items()),
        *(_row("output", name, tensor) for name, tensor in signature["outputs"].items()),
        "",
        "One string per example: "
        + ("the bytes of a JPEG, PNG or BMP file." if spec.binary_input else "UTF-8 text."),
        "",
        *_other_signatures(signature),
        *_decoding(recipe, signature),
        "## Scores",
        "",
        *_scores(recipe, metrics, source, metrics_recipe_differs),
        "",
        "## Data",
        "",
        *_data(recipe, spec),
        *(["", *data_notes] if data_notes else []),
        "",
        "## Input limits",
        "",
        *(f"- {line}" for line in input_limits),
        "",
    ]
    return "\n".join(lines)


def _decoding(recipe, signature):
    """The decoding settings' table: this export's own values (`decoding_defaults`), the bounds a request may ask."""
    from seqtasks.decoding.settings import SETTINGS

    if not task_table()[recipe.task].decodes or SETTINGS_SIGNATURE not in signature.get("signatures", []):
        return []
    decoding = recipe.model.decoding
    lines = ["## Decoding settings", "",
             "`serving_default` decodes with this export's own values, which it keeps (`decoding_defaults`); "
             "`with_settings` and `with_prefix` take each as an input.", "",
             "| setting | dtype | this export's | bounds | meaning |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| `{s.name}` | {s.dtype} | {getattr(decoding, s.name)} | {s.low}..{s.high} | {s.meaning} |"
              for s in SETTINGS]
    return [*lines, ""]


def _checkpoint(source):
    if source.checkpoint == "final":
        return f"its final model (`{source.checkpoint_file}`)"
    return f"its checkpoint {source.checkpoint} (`{source.checkpoint_file}`)"


def _row(kind, name, tensor):
    shape = ", ".join("batch" if index == 0 and size is None else "any" if size is None else str(size)
                      for index, size in enumerate(tensor["shape"]))
    return f"| {kind} | `{name}` | {tensor['dtype']} | [{shape}] |"


def _scores(recipe, metrics, source, metrics_recipe_differs):
    validation = (metrics or {}).get("validation")
    if not validation:
        return [
            f"None: seqtasks did not evaluate the {source.checkpoint} weights. "
            f"`seqtasks eval {source.run_dir} --checkpoint ... --data FILE` measures them."
        ]
    lines = ["On the run's validation data:", "", "| metric | value |", "| --- | --- |"]
    lines += [f"| {key} | {value:.4f} |" if isinstance(value, float) else f"| {key} | {value} |"
              for key, value in validation.items()]
    averaging = (metrics or {}).get("averaging")
    if averaging and "metric" in averaging:  # training.average_last: which weights these are
        # Run folders of before 2026-12-02 name the best epoch's weights "final".
        best = averaging["best"] if "best" in averaging else averaging["final"]
        kept = ("these weights are that average" if averaging["kept"] == "average"
                else "these are the best epoch's weights, which scored higher")
        lines += ["", f"Checkpoint averaging (`training.average_last`): the average of the last {averaging['last']} "
                  f"step checkpoints (steps {', '.join(map(str, averaging['steps']))}) scored {averaging['metric']} "
                  f"{averaging['average']:.4f} on the validation data against {best:.4f} for the best "
                  f"epoch's weights (those of the best `training.monitor` value); {kept}."]
    heldout = (metrics or {}).get("heldout")
    if heldout:  # data.heldout_documents: unlike validation, these chose nothing
        lines += ["", "On the documents set aside from the training data (`data.heldout_documents`):", "",
                  "| metric | value |", "| --- | --- |"]
        lines += [f"| {key} | {value:.4f} |" for key, value in heldout.items()]
    if metrics_recipe_differs:
        lines += ["", "Measured with the run's own recipe; this export's `recipe.yaml` differs from it."]
    return lines


def _data(recipe, spec):
    files = data_files(recipe)
    if not spec.reads_data_files:
        lines = [f"Generated by seqtasks from the recipe (seed {recipe.seed}); no data files."]
    else:
        lines = ["The model and its vocabularies were learned from the training examples of these files:", ""]
        lines += [f"- `{key}`: `{path}`" for key, path in files.items()]
    url = getattr(recipe.data, "url", "")
    if spec.reads_data_files:
        lines += ["", f"- Source: {url}" if url else "- Source: not recorded in the recipe (`data.url`)."]
        lines.append("- Licence: not recorded in the recipe; check the data's source before sharing this model "
                     "or its outputs.")
    return lines
