"""The recipe key reference, `docs/recipe-reference.md`, written from the schema's dataclasses.

`python -m seqtasks.recipe.reference > docs/recipe-reference.md` regenerates
it; a test fails when the file and the schema disagree.
"""

import dataclasses
import typing

from seqtasks.recipe.loader import MAX_NESTING, MAX_RECIPE_BYTES
from seqtasks.recipe.schema import Recipe
from seqtasks.recipe.tasks import task_table
from seqtasks.utils.regular_files import MAX_DATA_FILE_BYTES, MAX_LINE_BYTES, describe_size


def _type_name(hint):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union and type(None) in args:
        inner = next(arg for arg in args if arg is not type(None))
        return f"{_type_name(inner)} or null"
    if origin is typing.Literal:
        return " \\| ".join(f"`{arg}`" for arg in args)
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    return {int: "integer", float: "number", bool: "true/false", str: "string"}.get(hint, getattr(hint, "__name__", str(hint)))


def _default(f):
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return ""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == "":
        return '""'
    return str(value)


def _bounds(metadata):
    parts = []
    if "min" in metadata:
        parts.append(f">= {metadata['min']}")
    if "max" in metadata:
        parts.append(f"<= {metadata['max']}")
    if "below" in metadata:
        parts.append(f"< {metadata['below']}")
    return ", ".join(parts)


def _rows(cls, prefix):
    hints = typing.get_type_hints(cls)
    rows, sections = [], []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if hint is typing.Any:  # `data` and `model`: documented per task below
            continue
        if dataclasses.is_dataclass(hint):
            sections.append((f"{prefix}{f.name}", hint, f.metadata.get("doc", "")))
            continue
        doc = f.metadata.get("doc", "").replace("|", "\\|")
        bounds = _bounds(f.metadata)
        if bounds and typing.get_origin(hint) is list:
            bounds = f"each {bounds}"
        kind = _type_name(hint) + (f" ({bounds})" if bounds else "")
        rows.append(f"| `{prefix}{f.name}` | {kind} | `{_default(f)}` | {doc} |")
    lines = []
    if rows:
        lines += ["| key | type | default | meaning |", "| --- | --- | --- | --- |", *rows, ""]
    for dotted, hint, doc in sections:
        lines += [f"#### `{dotted}`", "", doc, "", *_rows(hint, dotted + ".")]
    return lines


def reference():
    """The Markdown text of the reference."""
    lines = [
        "# Recipe reference",
        "",
        "Generated from `seqtasks/recipe/schema.py` and each task's `config.py` by `python -m seqtasks.recipe.reference`; do not edit by hand.",
        "Every key may be set in a recipe file or with `--set dotted.key=value`. Unknown keys, wrong types",
        "and values outside the bounds are errors naming the file, the key and the line.",
        "",
        f"A recipe file is a regular file of at most {describe_size(MAX_RECIPE_BYTES)}, nested at most "
        f"{MAX_NESTING} levels deep. Data files",
        f"(and `seqtasks predict --input`) are regular files, not devices or FIFOs, of at most "
        f"{describe_size(MAX_DATA_FILE_BYTES)} of text",
        f"(counted after gzip decompression) in lines of at most {describe_size(MAX_LINE_BYTES)}.",
        "",
        "## Top level and shared sections",
        "",
        *_rows(Recipe, ""),
    ]
    for task in task_table().values():
        lines += [f"## Task `{task.name}`", "", task.description, "", "### `data`", ""]
        lines += _rows(task.data_config, "data.")
        lines += ["### `model`", ""]
        lines += _rows(task.model_config, "model.")
    return "\n".join(line for line in lines).rstrip() + "\n"


if __name__ == "__main__":
    print(reference(), end="")
