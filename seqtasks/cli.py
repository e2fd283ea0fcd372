"""The `seqtasks` command: parses arguments and reports; the parts of floor 6 and below do the work.

`run`, `eval`, `export`, `compare` and `average` work on run folders (`seqtasks.lifecycle`, `training`,
`evaluation`); `predict` and `score` read an export (`seqtasks.inference`); `serve` is `seqtasks.serving`;
`convert` is `seqtasks.convert`; `recipes` lists the shipped recipes.

TensorFlow is imported only by the commands that need it, so `--help` and `recipes` stay fast.
"""

import sys
from pathlib import Path

import click

from seqtasks import __version__
from seqtasks.errors import SeqtasksError


class UserError(click.ClickException):
    """A mistake in the user's input: one line on stderr, exit status 2."""

    exit_code = 2


def builtin_recipes():
    """Maps each built-in recipe's name to its path.

    A wheel carries the top-level `recipes/` as `seqtasks/recipes/`; a source
    checkout (or an editable install) has it beside the package.
    """
    package = Path(__file__).resolve().parent
    for folder in (package / "recipes", package.parent / "recipes"):
        if folder.is_dir():
            return {path.stem: path for path in sorted(folder.glob("*.yaml"))}
    return {}


def resolve_recipe(recipe):
    path = Path(recipe)
    if path.exists():
        return path
    builtins = builtin_recipes()
    name = path.stem if path.suffix in (".yaml", ".yml") and len(path.parts) == 1 else recipe
    if name in builtins:
        return builtins[name]
    raise SeqtasksError(
        f"{recipe}: no such recipe file, and no built-in recipe of that name "
        f"(built-in: {', '.join(builtins)})"
    )


@click.group()
@click.version_option(__version__, prog_name="seqtasks")
@click.option("--verbose", is_flag=True, help="Show TensorFlow's start-up and C++ log lines, hidden by default.")
def main(verbose):
    """Sequence tasks with RNN encoder-decoders and attention, from recipes."""
    if not verbose:
        from seqtasks.utils.quiet import quiet_tensorflow

        quiet_tensorflow()


def _overrides_option(text):
    return click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=text)


@main.command()
@click.argument("recipe")
@_overrides_option("Override a recipe field by its dotted path, e.g. training.epochs=3 (repeatable).")
@click.option(
    "--output-dir",
    default="runs",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where run folders are made: DIR/<recipe name>/<timestamp>/.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Start a new run folder even where an unfinished run of the same recipe could be resumed.",
)
def run(recipe, overrides, output_dir, fresh):
    """Train, evaluate and export the task described by RECIPE (a file or a built-in name).

    A run that was stopped before it finished (killed, preempted) is resumed
    from its last checkpoint when the same command is given again.
    """
    from seqtasks.lifecycle.backends import select_backend
    from seqtasks.recipe import load_recipe
    from seqtasks.lifecycle.runner import Runner

    try:
        loaded = load_recipe(resolve_recipe(recipe), overrides)
        select_backend(loaded)
        runner = Runner.start(loaded, output_dir, fresh, log=click.echo)
        metrics = runner.train()
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"Metrics: {runner.run_dir / 'metrics.json'}")
    for split in ("validation", "heldout"):
        for key, value in metrics.get(split, {}).items():
            click.echo(f"  {split} {key}: {value:.4f}")
    if "export" in metrics:
        click.echo(f"SavedModel: {metrics['export']}")


_OVERRIDES = _overrides_option(
    "Override a field of the run's recipe, e.g. model.decoding.beam_width=10 (repeatable)."
)
_CHECKPOINT = click.option(
    "--checkpoint",
    default=None,
    metavar="final|best|latest|STEP|FILE",
    help="The weights to use: the final model (the default; only a finished run has one), the best or the "
    "latest checkpoint, the kept checkpoint of training step STEP, or a .weights.h5 file.",
)


def _open_run(target, output_dir, overrides):
    """The `Runner` of the run folder `target` names (a run folder, or a recipe's newest finished run)."""
    from seqtasks.training.run_folders import find_run, newer_unfinished_runs
    from seqtasks.lifecycle.runner import Runner

    run_dir = find_run(target, output_dir, resolve_recipe)
    if Path(target).is_dir():
        click.echo(f"Run folder: {run_dir}")
    else:
        click.echo(f"Run folder: {run_dir} (the newest finished run of {target})")
        for folder in newer_unfinished_runs(run_dir):
            click.echo(f"  skipped {folder}: it has not finished (give its folder and --checkpoint to use it)")
    return Runner.open(run_dir, overrides, log=click.echo)


_ENSEMBLE = click.option(
    "--ensemble", is_flag=True, help="Decode with the models of every run given together: the mean of their "
    "step log-probabilities (runs of one encoder-decoder task that share vocabularies)."
)


def _runs(targets, ensemble):
    """The one target, or with --ensemble the first and the others; a wrong count is a `SeqtasksError`."""
    if ensemble and len(targets) < 2:
        raise SeqtasksError(f"--ensemble: expected at least two runs; got {len(targets)}")
    if not ensemble and len(targets) != 1:
        raise SeqtasksError(f"expected one run (give --ensemble to decode with several together); got {len(targets)}")
    return targets[0], targets[1:]


@main.command("eval")
@click.argument("targets", nargs=-1, required=True, metavar="RECIPE_OR_RUN...")
@click.option(
    "--data",
    "data_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="A file in the recipe's data format (its columns, label format or CoNLL scheme) to evaluate on.",
)
@_OVERRIDES
@_CHECKPOINT
@click.option(
    "--output-dir",
    default="runs",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where a recipe's runs are looked up: its newest finished run in DIR/<recipe name>/.",
)
@_ENSEMBLE
def evaluate(targets, data_path, overrides, checkpoint, output_dir, ensemble):
    """Metrics of a trained model on another data file.

    RECIPE_OR_RUN is a run folder, or a recipe whose newest finished run is
    used. Outputs (predictions, metrics.json) go to RUN/eval/<file name>/.
    With --ensemble, the runs decode together, with the first's recipe, and
    the outputs go to the first run's folder.
    """
    from seqtasks.training.run_folders import eval_folder, find_run

    try:
        target, others = _runs(targets, ensemble)
        runner = _open_run(target, output_dir, overrides)
        others = [find_run(other, output_dir, resolve_recipe) for other in others]
        metrics = runner.evaluate(data_path, checkpoint, others)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"Metrics: {eval_folder(runner.run_dir, data_path) / 'metrics.json'}")
    for key, value in metrics["validation"].items():
        click.echo(f"  {key}: {value:.4f}")


@main.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(), metavar="RUN...")
@click.option(
    "--output", "figure", required=True, type=click.Path(dir_okay=False), help="The figure to write (.png); the "
    "numbers go beside it with .csv."
)
@click.option("--metric", default=None, help="The score to draw (default: BLEU for translation, sequence accuracy "
              "for the toy).")
@click.option("--label", "labels", multiple=True, help="A name for each run, in order (default: the recipe name).")
def compare(runs, figure, metric, labels):
    """Draw finished runs' scores by source length, a line per run (Bahdanau et al.'s figure 2 for your models).

    RUN is a translation or toy run folder (or its metrics.json). The buckets
    are evaluation.length_buckets; the CSV file has every score and count.
    """
    from seqtasks.evaluation.compare import compare_by_length

    try:
        figure_path, csv_path = compare_by_length(runs, figure, metric, labels)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"Figure: {figure_path}")
    click.echo(f"Numbers: {csv_path}")


@main.command("export")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@_OVERRIDES
@_CHECKPOINT
@click.option(
    "--force", is_flag=True, help="Export a new version even if the newest one has the same weights and recipe."
)
@_ENSEMBLE
def export(run_dirs, overrides, checkpoint, force, ensemble):
    """Export RUN_DIR's model as a SavedModel again, from its final model or a checkpoint.

    The SavedModel goes to the next version folder of
    <export.directory>/<recipe name>/, as after training; `--set
    export.directory=DIR` puts it elsewhere. When the newest version there has
    the same weights and recipe, nothing is exported (unless --force) and its
    folder is printed. With --ensemble, one SavedModel decodes with every
    run's model together, with the first run's recipe, as <recipe name>-ensemble.
    """
    try:
        run_dir, others = _runs(run_dirs, ensemble)
        for folder in run_dirs:
            if not Path(folder).is_dir():
                raise SeqtasksError(f"{folder}: no such run folder")
        exported = _open_run(run_dir, None, overrides).export(checkpoint, force, others)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"SavedModel: {exported}")


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--last", required=True, type=int, metavar="N", help="How many of the newest kept step checkpoints "
              "to average (at least 2).")
@click.option("--output", default=None, type=click.Path(dir_okay=False), help="The .weights.h5 file to write "
              "(default: RUN_DIR/checkpoints/average-N-to-step-LAST.weights.h5).")
def average(run_dir, last, output):
    """Average the weights of RUN_DIR's last N kept checkpoints into one checkpoint.

    Give the file it prints to `eval` or `export` as --checkpoint FILE. The
    mean of the last checkpoints of a run usually scores better than any
    one of them (Vaswani et al., 2017; OpenNMT's `average_checkpoints`).
    """
    from seqtasks.lifecycle.runner import Runner
    from seqtasks.training.averaging import average_checkpoints

    try:
        if not Path(run_dir).is_dir():
            raise SeqtasksError(f"{run_dir}: no such run folder")
        path, steps = average_checkpoints(Runner.open(run_dir, log=click.echo), last, output)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"Averaged the checkpoints of steps {', '.join(map(str, steps))}")
    click.echo(f"Checkpoint: {path}")


def _decoding_options(command):
    """`predict`'s flags for the decoding settings of `with_settings`, one per declared setting (`--n-best` has its
    own), named as the recipe's fields; the export checks the bounds, so a flag says them as the recipe does."""
    from seqtasks.decoding.settings import SETTINGS

    for setting in reversed(SETTINGS):
        if setting.name == "n_best":
            continue
        flag = "--" + setting.name.replace("_", "-")
        text = f"{setting.meaning} {setting.low}..{setting.high}. Default: the export's (its recipe's)."
        command = click.option(flag, setting.name, type=setting.python_type, default=None, help=text)(command)
    return click.option("--prefix", default=None, help="Every output starts with this text (its tokens forced; the "
                        "search continues them).")(command)


@main.command()
@click.argument("saved_model", type=click.Path(file_okay=False))
@click.argument("inputs", nargs=-1)
@click.option(
    "--input",
    "input_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read inputs from this file, one per line (- for standard input); image paths for captioning.",
)
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1), help="Inputs per call.")
@click.option("--json", "as_json", is_flag=True, help="Print every output of the model as one JSON object per input.")
@click.option(
    "--n-best",
    type=click.IntRange(min=1),
    help="Print the K best translations or captions per input, `score<TAB>text` each, best first "
    "(an export made with model.decoding.n_best of at least K).",
)
@_decoding_options
def predict(saved_model, inputs, input_file, batch_size, as_json, n_best, prefix, **settings):
    """Run an exported SAVED_MODEL on INPUTS (texts, or image files for captioning) and print its outputs.

    SAVED_MODEL is a version folder, or a base folder of numbered versions
    (as TensorFlow Serving is given), whose newest version is used. One line
    per input: the translation, caption or label; `token/TAG` pairs for NER.
    The decoding options replace the recipe's `model.decoding` settings for
    this call (through the export's `with_settings` signature); those not
    given are the export's own (its recipe's).
    """
    from seqtasks.inference.api import SeqtasksModel
    from seqtasks.inference.predict import Predictor, read_inputs

    try:
        if inputs and input_file:
            raise SeqtasksError("give inputs as arguments or with --input, not both")
        if not inputs and not input_file:
            raise SeqtasksError("nothing to predict: give inputs as arguments or with --input FILE")
        items = list(inputs) if inputs else read_inputs(input_file)
        predictor = Predictor.load(saved_model)
        if predictor.path != Path(saved_model):
            click.echo(f"SavedModel: {predictor.path} (the newest version)", err=True)
        settings = {key: value for key, value in settings.items() if value is not None}
        outputs = None
        if settings or prefix is not None:
            if n_best is not None:
                settings["n_best"] = n_best
            model = SeqtasksModel(predictor)
            model.decoding_defaults()  # a model that does not decode says so before any work

            def outputs(batch):
                return next(model._batches(batch, len(batch), settings, prefix))[0]

        for line in predictor.lines(items, batch_size, as_json, n_best, outputs):
            click.echo(line)
    except SeqtasksError as error:
        raise UserError(str(error)) from None


@main.command()
@click.argument("model_path", metavar="SAVED_MODEL", type=click.Path(file_okay=False))
@click.option("--input", "input_file", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Tab-separated pairs, one per line: the input (a text, or an image file for captioning), then "
              "the output to score (- for standard input).")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(min=1), help="Pairs per call.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per pair, with the per-token "
              "log-probabilities.")
def score(model_path, input_file, batch_size, as_json):
    """Score given outputs with SAVED_MODEL (forced decoding): how likely it finds each target for its input.

    One line per pair: the length-normalised score (as the beam search
    scores its hypotheses), the total log-probability, and the target.
    SAVED_MODEL is an export (its newest version) or a run folder.
    """
    import json

    import seqtasks
    from seqtasks.inference.predict import read_inputs

    try:
        pairs = []
        for number, line in enumerate(read_inputs(input_file), 1):
            fields = line.split("\t")
            if len(fields) != 2:
                where = "standard input" if input_file == "-" else input_file
                raise SeqtasksError(f"{where}, line {number}: expected an input and a target separated by a tab; "
                                    f"got {len(fields)} field(s)")
            pairs.append(fields)
        model = seqtasks.load(model_path)
        scored = model.score([source for source, _ in pairs], [target for _, target in pairs], batch_size)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    for (source, target), result in zip(pairs, scored):
        if as_json:
            click.echo(json.dumps({"input": source, "target": target, "score": result.score,
                                   "log_prob": result.log_prob, "tokens": result.tokens,
                                   "token_log_probs": result.token_log_probs}, ensure_ascii=False))
        else:
            click.echo(f"{result.score:.4f}\t{result.log_prob:.4f}\t{target}")


@main.command()
@click.argument("path", required=False, type=click.Path(file_okay=False))
@click.option(
    "--model", "named", multiple=True, metavar="NAME=PATH", help="Serve another model under NAME (repeatable)."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8501, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A Host header name to answer besides 127.0.0.1, localhost, [::1] and --host (repeatable; "
                   "'*' answers any, behind a proxy that checks it).")
@click.option("--max-batch-size", default=32, show_default=True, type=click.IntRange(min=1),
              help="Most examples in one model call; concurrent requests are merged up to it, larger ones split.")
@click.option("--batch-timeout-ms", default=5.0, show_default=True, type=click.FloatRange(min=0),
              help="How long a request waits for others to share its batch.")
@click.option("--max-queued", default=64, show_default=True, type=click.IntRange(min=1),
              help="Most requests waiting for one model; more are answered 503 with Retry-After.")
@click.option("--request-timeout-s", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Longest a request waits for its answer; then 504 and its work is dropped. A model with work that "
              "finishes no call for this long is reported stuck by /healthz (503).")
@click.option("--max-concurrent-requests", default=128, show_default=True, type=click.IntRange(min=1),
              help="Most HTTP requests handled at once; more are answered 503 with Retry-After.")
@click.option("--header-timeout-s", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="How long a connection may take to send a request's headers; then it is closed.")
@click.option("--body-timeout-s", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="How long a request's body may take to arrive; then 408.")
@click.option("--health-timeout-s", default=5.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="How long /healthz waits for an idle model to answer a one-example request; then 503. A busy model "
              "is judged by its progress, without waiting.")
@click.option("--max-body-bytes", default=16 * 1024**2, show_default=True, type=click.IntRange(min=1),
              help="Largest request body read.")
@click.option("--max-instances", default=64, show_default=True, type=click.IntRange(min=1),
              help="Most examples (and values of any one input) in one request.")
@click.option("--max-text-characters", default=10_000, show_default=True, type=click.IntRange(min=1),
              help="Longest text in a request.")
@click.option("--max-image-bytes", default=8 * 1024**2, show_default=True, type=click.IntRange(min=1),
              help="Largest encoded image in a request.")
@click.option("--max-image-pixels", default=40_000_000, show_default=True, type=click.IntRange(min=1),
              help="Most pixels an image's header may declare.")
@click.option("--log-batches", is_flag=True, help="Log each model call: its signature, examples and requests.")
def serve(path, named, host, port, allowed_hosts, log_batches, **options):
    """Serve exports or run folders over HTTP: TensorFlow Serving's REST API and a page to try them.

    PATH is an export's base path (its newest version is served), a version
    folder or a run folder; its name is the export's (or the run's) name.
    Requests over a limit are answered 413 naming it; a full queue 503, a
    request past its deadline 504. Only requests naming an allowed host,
    and POST bodies of type application/json, are answered. Stops on Ctrl-C
    or SIGTERM once the requests in flight are answered.
    """
    from dataclasses import fields

    from seqtasks.serving.limits import Capacity, Limits
    from seqtasks.serving.server import serve as run_server

    def pick(cls):
        return cls(**{field.name: options[field.name] for field in fields(cls)})

    try:
        run_server(path, named, host, port, pick(Limits), pick(Capacity), allowed_hosts, log_batches, log=click.echo)
    except SeqtasksError as error:
        raise UserError(str(error)) from None


@main.group()
def convert():
    """Convert a trained tfa.seq2seq or OpenNMT-tf model into a seqtasks run (docs/migrating.md)."""


def _conversion_options(command):
    for decorator in reversed(
        [
            click.argument("checkpoint", type=click.Path()),
            click.option("--source-vocab", required=True, type=click.Path(dir_okay=False),
                         help="The source vocabulary file (line N: the token of id N)."),
            click.option("--target-vocab", required=True, type=click.Path(dir_okay=False),
                         help="The target vocabulary file (line N: the token of id N)."),
            click.option("--output", required=True, type=click.Path(), help="The run folder to write (must not exist)."),
            click.option("--data", "data_path", default=None, type=click.Path(dir_okay=False),
                         help="Sentence pairs (TSV) the run evaluates on (default: OUTPUT/pairs.tsv)."),
            click.option("--cased", is_flag=True, help="The model was trained on cased text (default: lower-cased)."),
        ]
    ):
        command = decorator(command)
    return command


def _converted(convert_fn, **arguments):
    try:
        run_dir = convert_fn(**arguments)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"Run folder: {run_dir}")
    click.echo(f"Next: seqtasks export {run_dir}")


@convert.command("tfa")
@_conversion_options
@click.option("--start-token", default="<start>", show_default=True, help="The token that starts a target sentence.")
@click.option("--end-token", default="<end>", show_default=True, help="The token that ends a target sentence.")
@click.option("--unk-token", default=None, help="The out-of-vocabulary token, if the tokenizers had one.")
@click.option("--name", "names", multiple=True, metavar="ROLE=VARIABLE", help="A checkpoint variable name where "
              "the model's differs from the NMT tutorial's, e.g. output_layer=decoder/projection (repeatable).")
def convert_tfa(checkpoint, source_vocab, target_vocab, output, data_path, cased, start_token, end_token, unk_token,
                names):
    """Convert a tf.keras 2 / tfa.seq2seq AttentionWrapper encoder-decoder CHECKPOINT (a prefix such as ckpt-5)."""
    from seqtasks.convert import from_tfa

    pairs = {}
    for item in names:
        role, sep, variable = item.partition("=")
        if not sep or not role or not variable:
            raise UserError(f"--name {item!r}: expected ROLE=VARIABLE")
        pairs[role] = variable
    _converted(
        from_tfa, checkpoint=checkpoint, source_vocab=source_vocab, target_vocab=target_vocab, output=output,
        start_token=start_token, end_token=end_token, unk_token=unk_token, names=pairs, data_path=data_path,
        lower_case=not cased,
    )


@convert.command("opennmt")
@_conversion_options
@click.option("--model", "model_type", default=None, help="The catalogue entry the checkpoint was trained as "
              "(LuongAttention, NMTSmallV1); it says the bridge and the attention layer's activation.")
@click.option("--bridge", type=click.Choice(["copy", "zero"]), default=None,
              help="A custom model's bridge: CopyBridge or ZeroBridge.")
@click.option("--attention-layer-activation", type=click.Choice(["tanh", "none"]), default=None,
              help="A custom model's AttentionalRNNDecoder attention_layer_activation.")
def convert_opennmt(checkpoint, source_vocab, target_vocab, output, data_path, cased, model_type, bridge,
                    attention_layer_activation):
    """Convert an OpenNMT-tf RNN model CHECKPOINT (a ckpt-N prefix, or the model_dir for its newest)."""
    from seqtasks.convert import from_opennmt

    _converted(
        from_opennmt, checkpoint=checkpoint, source_vocab=source_vocab, target_vocab=target_vocab, output=output,
        model=model_type, bridge=bridge, attention_layer_activation=attention_layer_activation, data_path=data_path,
        lower_case=not cased,
    )


@main.command("recipes")
def list_recipes():
    """List the built-in recipes with their descriptions."""
    from seqtasks.recipe import load_recipe

    recipes = builtin_recipes()
    width = max((len(name) for name in recipes), default=0) + 2
    for name, path in recipes.items():
        try:
            description = load_recipe(path).description
        except SeqtasksError as error:
            description = f"(invalid: {error})"
        click.echo(f"{name:<{width}}{description}")


if __name__ == "__main__":
    sys.exit(main())
