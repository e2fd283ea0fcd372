"""docs/commands.md has a row for every command `seqtasks --help` lists, and none for a command it does not."""

import re

import click

from seqtasks.cli import main
from tests.conftest import REPO


def command_paths(group, prefix=()):
    """Every command of the click group, a group's subcommands as `convert tfa`."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))
        else:
            yield " ".join((*prefix, name))


def documented_paths(page, group):
    """The command of each table row `| \\`seqtasks NAME [SUBNAME] ...\\` | ... |` of the page."""
    for row in re.findall(r"^\| `seqtasks ([^`]*)` \|", page, flags=re.MULTILINE):
        words = row.split()
        path = [words[0]]
        command = group.commands.get(words[0])
        while isinstance(command, click.Group) and len(words) > len(path):
            path.append(words[len(path)])
            command = command.commands.get(path[-1])
        yield " ".join(path)


def test_every_command_and_subcommand_has_a_row_on_the_commands_page():
    page = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    commands = sorted(command_paths(main))
    assert {"run", "eval", "score", "average", "convert tfa", "convert opennmt"} <= set(commands)
    rows = list(documented_paths(page, main))
    assert len(rows) == len(set(rows)), f"a command with two rows: {rows}"
    assert sorted(rows) == commands


def test_a_command_without_a_row_is_reported():
    page = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    without_score = "\n".join(line for line in page.splitlines() if not line.startswith("| `seqtasks score "))
    assert "score" not in set(documented_paths(without_score, main))
    assert "convert tfa" in set(documented_paths(page, main))
    # A subcommand is the group's name and its own: a row naming the group alone is not a subcommand's.
    assert list(documented_paths("| `seqtasks convert CHECKPOINT` | x |\n", main)) == ["convert CHECKPOINT"]
