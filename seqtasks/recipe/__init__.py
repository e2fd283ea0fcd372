"""Recipes: YAML files loaded into typed dataclasses, with strict validation."""

from seqtasks.recipe.loader import Recipe, dump_recipe, load_recipe

__all__ = ["Recipe", "dump_recipe", "load_recipe"]
