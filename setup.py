"""Package discovery: every package under seqtasks/ is found, and seqtasks.recipes (the top-level recipes/ folder,
pyproject.toml's package-dir) is added; pyproject.toml's [tool.setuptools.packages.find] cannot add a package it
does not find where it lies. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["seqtasks", "seqtasks.*"]), "seqtasks.recipes"])
