"""Recipes: YAML files loaded into typed dataclasses, with strict validation."""

from seqtasks.recipe.loader import dump_recipe, load_recipe
from seqtasks.recipe.schema import Recipe

__all__ = ["Recipe", "dump_recipe", "load_recipe"]
