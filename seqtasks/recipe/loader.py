"""Loads a recipe: defaults < the YAML file < `--set key=value` overrides.

YAML is read with the safe loader only (no tags that build objects), every key
is checked against the dataclasses, and every error names its source (the
file, or the `--set` flag) and the dotted path of the field.
"""

import dataclasses
import difflib
import math
import os
import re
import typing
from pathlib import Path
from typing import Any

import yaml

from seqtasks.errors import RecipeError, SeqtasksError
from seqtasks.recipe.schema import Recipe
from seqtasks.recipe.tasks import task_table
from seqtasks.utils.regular_files import describe_size, open_regular_file, reading_errors

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

# Values that YAML aliases (`*name`) may repeat in all, counted as nodes of the
# text. A recipe needs a handful; a "billion laughs" bomb, aliases of aliases,
# needs billions, which every walk of the document (building it, finding the
# line of each key, printing an error) would pay for in time and memory.
MAX_ALIASED_VALUES = 10_000

# Characters of a string value that an error message quotes.
_SHOWN_CHARACTERS = 40

# Levels of mappings and lists a recipe may nest, the top-level mapping counted: the
# deepest recipe key, a list such as model.backbone.filters, is on level 4. Checked
# as the text is parsed, so no deeper document ever reaches the recursive composer.
MAX_NESTING = 32

# Bytes a recipe file may have; the built-in ones have about a kilobyte.
MAX_RECIPE_BYTES = 1024 * 1024


class _SafeLoader(yaml.SafeLoader):
    """The safe loader, reading `1e-3` as a float as YAML 1.2 does (1.1 reads a string).

    It refuses nesting deeper than MAX_NESTING, and a scalar that its tag's
    constructor cannot read (`seed: 2001-13-40`, an integer of 5000 digits)
    is a YAML error with its line, not a Python exception.
    """

    def __init__(self, text, where):
        super().__init__(text)
        self.where = where
        self.nesting = 0

    def get_event(self):
        event = super().get_event()
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self.nesting += 1
            if self.nesting > MAX_NESTING:
                raise RecipeError(
                    f"{self.where}: YAML nested more than {MAX_NESTING} levels deep "
                    f"(line {event.start_mark.line + 1}); a recipe needs at most 4"
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self.nesting -= 1
        return event

    def construct_object(self, node, deep=False):
        try:
            # Depth-first whatever `deep` says, so that the first bad value in the file is the one reported.
            return super().construct_object(node, deep=True)
        except (ValueError, KeyError, AttributeError, OverflowError):
            kind = node.tag.rpartition(":")[2]
            shown = _describe(node.value) if isinstance(node, yaml.ScalarNode) else "the value"
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {shown} as {kind}", node.start_mark
            ) from None


_SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
        r"|[0-9][0-9_]*[eE][-+]?[0-9]+|\.(?:inf|Inf|INF)|[-+]\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _yaml_load(text, where):
    """`(value, root node)` of the YAML `text`; aliases are checked before anything is built.

    `where` starts the error messages: the file, or the `--set` flag.
    """
    loader = _SafeLoader(text, where)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        _check_aliases(root, where)
        return loader.construct_document(root), root
    finally:
        loader.dispose()


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return ()


def _check_aliases(root, where):
    """Refuses aliases that repeat more than MAX_ALIASED_VALUES nodes, or that contain themselves.

    An alias is the very node its anchor names, so the walk meets it again:
    each node is walked once, its size (nodes, aliases expanded) remembered,
    and each later meeting adds that size to the count of aliased values.
    """
    sizes = {}  # id of a walked node: its size
    open_ids = set()  # the nodes being walked, root to the current one
    aliased = 0
    stack = [[root, iter(_children(root)), 1]]
    open_ids.add(id(root))
    while stack:
        frame = stack[-1]
        child = next(frame[1], None)
        if child is None:
            stack.pop()
            open_ids.discard(id(frame[0]))
            sizes[id(frame[0])] = frame[2]
            if stack:
                stack[-1][2] += frame[2]
            continue
        key = id(child)
        if key in open_ids:
            raise RecipeError(
                f"{where}: a YAML alias refers to a value that contains it (line {child.start_mark.line + 1})"
            )
        if key in sizes:
            aliased += sizes[key]
            frame[2] += sizes[key]
            if aliased > MAX_ALIASED_VALUES:
                raise RecipeError(
                    f"{where}: YAML aliases expand to more than {MAX_ALIASED_VALUES} values "
                    f"(line {frame[0].start_mark.line + 1}); write the values out instead"
                )
            continue
        open_ids.add(key)
        stack.append([child, iter(_children(child)), 1])


class _Sources:
    """Says where the value at a dotted path came from, for error messages."""

    def __init__(self, path, key_lines, override_keys):
        self.path = path
        self.key_lines = key_lines
        self.override_keys = override_keys

    def _override_of(self, dotted):
        """The `--set` key that gave the value at `dotted`: the last one at or above it, else one below it."""
        for key in reversed(self.override_keys):
            if dotted == key or dotted.startswith(key + "."):
                return key
        for key in self.override_keys:
            if key.startswith(dotted + "."):
                return key
        return None

    def resolve_path(self, dotted, value):
        """A path from the recipe file is relative to its folder; from `--set`, to the current one.

        The result is absolute, so the merged recipe saved in a run folder
        still names the same file when it is loaded again from there.
        """
        path = Path(value).expanduser()
        if not path.is_absolute() and not self._override_of(dotted):
            path = self.path.parent / path
        return os.path.normpath(os.path.abspath(path))

    def error(self, dotted, message):
        key = self._override_of(dotted)
        if key and dotted.startswith(key + "."):  # a field inside a section given whole
            return RecipeError(f"--set {key}: {dotted}: {message}")
        if key:
            return RecipeError(f"--set {key}: {message}")
        line = self.key_lines.get(dotted)
        where = f" (line {line})" if line else ""
        return RecipeError(f"{self.path}: {dotted}: {message}{where}")


def load_recipe(path, overrides=()):
    """Reads the recipe at `path`, applies `KEY=VALUE` overrides, validates it."""
    path = Path(path)
    text = _read(path)
    try:
        raw, root = _yaml_load(text, path)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise RecipeError(f"{path}: invalid YAML: {problem}{line}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError(
            f"{path}: expected a mapping of sections at the top level; got {_describe(raw)}"
        )
    parsed = [_parse_override(item) for item in overrides]
    for key, value in parsed:
        _set_dotted(raw, key, value)
    _check_override_keys([key for key, _ in parsed], raw.get("task"))
    sources = _Sources(path, _key_lines(root), [key for key, _ in parsed])
    raw.setdefault("name", path.stem)
    return _build_recipe(raw, sources)


def dump_recipe(recipe):
    """The recipe as YAML text; loading it gives an equal recipe."""
    return yaml.safe_dump(dataclasses.asdict(recipe), sort_keys=False)


def _read(path):
    try:
        with reading_errors(path, "recipe file", "a recipe file", RecipeError):
            with open_regular_file(path, MAX_RECIPE_BYTES, "a recipe file") as handle:
                data = handle.read(MAX_RECIPE_BYTES + 1)
        if len(data) > MAX_RECIPE_BYTES:  # it grew after the size check
            raise RecipeError(f"{path}: more than the {describe_size(MAX_RECIPE_BYTES)} a recipe file may have")
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RecipeError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except SeqtasksError as error:  # not a regular file, or too big
        raise RecipeError(str(error)) from None


def _parse_override(item):
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
        raise RecipeError(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. training.epochs=3")
    try:
        value, _ = _yaml_load(text, f"--set {key}")
    except yaml.YAMLError:
        value = text
    return key, value


def _set_dotted(raw, key, value):
    node = raw
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise RecipeError(f"--set {key}: {prefix} is not a section")
        node = child
    node[parts[-1]] = value


def _check_override_keys(keys, task):
    """Every `--set` key must name a field of the schema (of `task`, when known)."""
    types, tasks = {}, task_table()
    if isinstance(task, str) and task in tasks:
        types = {"data": tasks[task].data_config, "model": tasks[task].model_config}
    for key in keys:
        cls = Recipe
        parts = key.split(".")
        for depth, part in enumerate(parts):
            prefix = ".".join(parts[: depth + 1])
            names = [f.name for f in dataclasses.fields(cls)]
            if part not in names:
                close = difflib.get_close_matches(part, names, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise RecipeError(
                    f"--set {key}: unknown key {prefix}; expected one of {', '.join(names)}{hint}"
                )
            hint_type = types.get(part) if cls is Recipe and part in types else typing.get_type_hints(cls)[part]
            if depth == len(parts) - 1:
                break
            if hint_type is Any:
                break  # data or model of an unknown task: the task error comes first
            if not dataclasses.is_dataclass(hint_type):
                raise RecipeError(f"--set {key}: {prefix} is a value, not a section")
            cls = hint_type


def _key_lines(root):
    """Maps every dotted key of the YAML document at `root` to its line number.

    Keys reached through aliases get the line of the anchored key; the
    aliases were checked when the document was read, so the walk is short.
    """
    lines = {}

    def walk(node, prefix):
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                dotted = f"{prefix}{key_node.value}"
                lines[dotted] = key_node.start_mark.line + 1
                walk(value_node, dotted + ".")

    walk(root, "")
    return lines


def _build_recipe(raw, sources):
    task, tasks = raw.get("task"), task_table()
    if task is None:
        raise sources.error("task", f"missing; expected one of {', '.join(tasks)}")
    if not isinstance(task, str) or task not in tasks:
        raise sources.error("task", f"expected one of {', '.join(tasks)}; got {_describe(task)}")
    spec_of_task = tasks[task]
    types = {"data": spec_of_task.data_config, "model": spec_of_task.model_config}
    for name in types:
        if raw.get(name) is None:
            raw[name] = {}  # so the section's defaults are checked too
    recipe = _build(Recipe, raw, "", sources, types)
    for relative, message in getattr(recipe.model, "check_data", lambda data: [])(recipe.data):
        raise sources.error(f"model.{relative}", message)
    if recipe.training.monitor not in spec_of_task.monitors:
        raise sources.error(
            "training.monitor",
            f"expected one of {', '.join(spec_of_task.monitors)} for task {task}; "
            f"got {_describe(recipe.training.monitor)}",
        )
    _check_averaging(recipe.training, spec_of_task, sources)
    if not _NAME_PATTERN.match(recipe.name):
        raise sources.error(
            "name", f"expected letters, digits, '.', '_' or '-' (a folder name); got {_describe(recipe.name)}"
        )
    return recipe


def _check_averaging(training, spec_of_task, sources):
    """`training.average_last`: what the average needs of the run (checkpoints, raw weights, a headline metric)."""
    last = training.average_last
    if not last:
        return
    problem = None
    if last == 1:
        problem = "an average of one checkpoint is that checkpoint; expected 0 (none) or at least 2"
    elif last > training.keep_checkpoints:
        problem = f"must not exceed training.keep_checkpoints ({training.keep_checkpoints}); got {last}"
    elif training.ema_momentum is not None:
        problem = "training.ema_momentum already averages the weights over steps; use one or the other"
    elif spec_of_task.headline is None:
        problem = f"task {spec_of_task.name} names no headline metric to choose the average by; expected 0"
    if problem:
        raise sources.error("training.average_last", problem)


def _build(cls, raw, prefix, sources, types=None):
    path = prefix.rstrip(".") or "(top level)"
    if not isinstance(raw, dict):
        raise sources.error(path, f"expected a mapping; got {_describe(raw)}")
    hints = typing.get_type_hints(cls)
    if types:
        hints.update(types)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise sources.error(
                f"{prefix}{key}", f"unknown key; expected one of {', '.join(names)}{hint}"
            )
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            dotted = f"{prefix}{f.name}"
            values[f.name] = _convert(hints[f.name], raw[f.name], dotted, f.metadata, sources)
            if f.metadata.get("path") and values[f.name]:
                values[f.name] = sources.resolve_path(dotted, values[f.name])
    obj = cls(**values)
    for relative, message in getattr(obj, "check", lambda: [])():
        raise sources.error(f"{prefix}{relative}", message)
    return obj


def _convert(hint, value, dotted, metadata, sources):
    raw_value = value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union and type(None) in args:
        if value is None:
            return None
        hint = next(arg for arg in args if arg is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, {} if value is None else value, dotted + ".", sources)
    if origin is typing.Literal:
        if value not in args:
            raise sources.error(dotted, f"expected one of {', '.join(map(str, args))}; got {_describe(value)}")
        return value
    if origin is list:
        item_type = args[0] if args else str
        if not isinstance(value, list) or not all(
            isinstance(item, item_type) and not (item_type is int and isinstance(item, bool)) for item in value
        ):
            kind = "integers" if item_type is int else "strings"
            raise sources.error(dotted, f"expected a list of {kind}; got {_describe(value)}")
        for item in value:
            _check_bounds(item, metadata, dotted, sources, "entries of ")
        return list(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise sources.error(dotted, f"expected true or false; got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise sources.error(dotted, f"expected an integer; got {_describe(value)}")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise sources.error(dotted, f"expected a number; got {_describe(value)}")
        try:
            value = float(value)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise sources.error(dotted, f"expected a finite number; got {_describe(raw_value)}")
    elif hint is str:
        if not isinstance(value, str):
            raise sources.error(dotted, f"expected a string; got {_describe(value)}")
        return value
    else:
        raise TypeError(f"unsupported recipe field type {hint} at {dotted}")
    _check_bounds(value, metadata, dotted, sources)
    return value


def _check_bounds(value, metadata, dotted, sources, entries=""):
    if "min" in metadata and value < metadata["min"]:
        raise sources.error(dotted, f"expected {entries}at least {metadata['min']}; got {value}")
    if "max" in metadata and value > metadata["max"]:
        raise sources.error(dotted, f"expected {entries}at most {metadata['max']}; got {value}")
    if "below" in metadata and value >= metadata["below"]:
        raise sources.error(dotted, f"expected {entries}less than {metadata['below']}; got {value}")


def _describe(value):
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"  # as YAML spells them
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    if isinstance(value, str):
        first_line = value.split("\n", 1)[0]
        if first_line != value or len(value) > _SHOWN_CHARACTERS:
            # errors are printed and logged: a whole file read as one string is not repeated
            return f"{first_line[:_SHOWN_CHARACTERS]!r}... ({len(value)} characters)"
    return f"{value!r}"
