"""The `seqtasks` command. TensorFlow is imported only by the commands that train."""

import sys
import time
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
def main():
    """Sequence tasks with RNN encoder-decoders and attention, from recipes."""


@main.command()
@click.argument("recipe")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a recipe field by its dotted path, e.g. training.epochs=3 (repeatable).",
)
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
    from seqtasks.distribute import make_strategy
    from seqtasks.io_utils import make_run_dir, write_json_atomic, write_text_atomic
    from seqtasks.recipe import dump_recipe, load_recipe
    from seqtasks.run_folders import unfinished_run
    from seqtasks.tasks import TASKS

    try:
        loaded = load_recipe(resolve_recipe(recipe), overrides)
        # Before any other TensorFlow work: multi-worker collectives are configured at start-up.
        make_strategy(loaded.distribute)
        recipe_text = dump_recipe(loaded)
        run_dir = None if fresh else unfinished_run(output_dir, loaded.name, recipe_text)
        if run_dir is not None:
            click.echo(f"Resuming the unfinished run in {run_dir} (--fresh starts a new one)")
        else:
            run_dir = make_run_dir(output_dir, loaded.name, time.strftime("%Y%m%d-%H%M%S"))
            write_text_atomic(run_dir / "recipe.yaml", recipe_text)
        click.echo(f"Run folder: {run_dir}")
        metrics = TASKS[loaded.task].load_runner()(loaded, run_dir)
        write_json_atomic(run_dir / "metrics.json", metrics)
    except SeqtasksError as error:
        raise UserError(str(error)) from None
    click.echo(f"Metrics: {run_dir / 'metrics.json'}")
    for key, value in metrics.get("validation", {}).items():
        click.echo(f"  validation {key}: {value:.4f}")
    if "export" in metrics:
        click.echo(f"SavedModel: {metrics['export']}")


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
