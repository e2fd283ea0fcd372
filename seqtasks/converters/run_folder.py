"""A converted model written as a translation run folder: recipe, WordPiece vocabularies, `model/model.keras`."""

from pathlib import Path

import yaml

from seqtasks.errors import SeqtasksError
from seqtasks.tasks.translation.task import VOCABULARY_FILES


def converted_recipe(name, description, model_section, data_path, lower_case, max_length):
    """The recipe of a converted run: the model as converted, WordPiece vocabularies of whole tokens."""
    return {
        "task": "translation",
        "name": name,
        "description": description,
        "data": {
            "path": str(data_path),
            "tokenizer": "wordpiece",
            "lower_case": bool(lower_case),
            "max_length": int(max_length),
        },
        "model": model_section,
    }


def validated_recipe(fields, source_tokens, target_tokens):
    """The `Recipe` of `fields` (a dict), through `load_recipe`, so a converted model that breaks a recipe rule
    fails here, naming the field, before anything is written."""
    import tempfile

    from seqtasks.recipe import load_recipe

    data = {**fields["data"], "source_vocab_size": max(10, len(source_tokens)),
            "target_vocab_size": max(10, len(target_tokens))}
    with tempfile.TemporaryDirectory() as folder:
        draft = Path(folder) / "recipe.yaml"
        draft.write_text(yaml.safe_dump({**fields, "data": data}, sort_keys=False), encoding="utf-8")
        return load_recipe(draft)


def write_run(output, recipe, source_tokens, target_tokens, model):
    """Writes the run folder `output` (which must not exist yet) in one rename; returns its path."""
    import seqtasks.models  # noqa: F401 - registers the model classes for saving
    from seqtasks.recipe import dump_recipe
    from seqtasks.utils.io_utils import publish_folder

    output = Path(output)
    if output.exists():
        raise SeqtasksError(f"{output}: already exists; give a new folder for the converted run")

    def write(folder):
        folder = Path(folder)
        (folder / "recipe.yaml").write_text(dump_recipe(recipe), encoding="utf-8")
        for name, tokens in zip(VOCABULARY_FILES["wordpiece"], (source_tokens, target_tokens)):
            (folder / name).write_text("\n".join(tokens) + "\n", encoding="utf-8")
        (folder / "model").mkdir()
        model.save(str(folder / "model" / "model.keras"))

    return publish_folder(write, output)
