"""The reference (docs/reference.md) is checked against the code it documents, and README.md's first block.

* Every command's option table (``## Commands and options`` > ``### `<command>```) lists exactly
  the options its parser defines, with the parser's metavar or choices and its default.
* The case-file tables (``## Case-file format``) list exactly the keys the parsers accept.
* The first fenced block of README.md is exactly the two commands a newcomer runs.

Links and anchors of README.md and docs/ are checked in tests/test_docs_links.py.
Plain text parsing, no network; the parser is built from the checkout under test.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from glasskit_eval.arms.spec import ARM_KEYS
from glasskit_eval.cases import checks, evaldir, parse, streams
from glasskit_eval.cli import COMMAND_NAMES, build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
REFERENCE = README.parent / "docs" / "reference.md"

FIRST_BLOCK = [
    "python3 -m pip install . && python3 -m glasskit_eval run --eval-dir fixtures/demo/eval",
    "python3 -m pip install '.[test]' && python3 -m pytest",
]

#: The value column's mark for an option that takes no value.
FLAG = "—"


# --- reading the reference ---------------------------------------------------------------


def reference_lines() -> list[str]:
    """The reference's lines with fenced code blocks blanked out (a `#` in a shell block is no heading)."""
    lines = REFERENCE.read_text(encoding="utf-8").splitlines()
    out = []
    fenced = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line number, level, text) of every ATX heading outside code blocks."""
    found = []
    for number, line in enumerate(lines):
        match = HEADING.match(line)
        if match:
            found.append((number, len(match[1]), match[2]))
    return found


def section(lines: list[str], title: str, level: int) -> list[str]:
    """The lines under the heading ``title`` of ``level``, up to the next heading of that level or above."""
    marks = headings(lines)
    starts = [(n, lv) for n, lv, text in marks if lv == level and text == title]
    assert len(starts) == 1, f"docs/reference.md needs exactly one {'#' * level} {title} heading, found {len(starts)}"
    start = starts[0][0]
    end = next((n for n, lv, _text in marks if n > start and lv <= level), len(lines))
    return lines[start + 1:end]


def subsections(lines: list[str], level: int) -> dict[str, list[str]]:
    """Heading text (backticks dropped) -> its lines, for every heading of ``level`` in ``lines``."""
    marks = [(n, text) for n, lv, text in headings(lines) if lv == level]
    out: dict[str, list[str]] = {}
    for i, (start, text) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(lines)
        name = text.replace("`", "").strip()
        assert name not in out, f"docs/reference.md has two {'#' * level} {text} headings in one section"
        out[name] = lines[start + 1:end]
    return out


def split_row(line: str) -> list[str]:
    """The cells of a Markdown table row; ``\\|`` inside a cell is not a separator."""
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [cell.strip().replace("\\|", "|") for cell in cells]


def first_table(lines: list[str], where: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``lines`` (header and rule dropped)."""
    rows: list[list[str]] = []
    started = False
    for line in lines:
        if line.lstrip().startswith("|"):
            started = True
            rows.append(split_row(line))
        elif started:
            break
    assert len(rows) >= 2 and set(rows[1][0]) <= set("-: "), f"{where}: no Markdown table found"
    return rows[2:]


def code_word(cell: str, where: str) -> str:
    """The first backticked word of a table cell: `--eval-dir`, `OUTPUT.pyz`, `every_s`."""
    match = re.match(r"`([^`\s]+)(?:\s[^`]*)?`", cell)
    assert match, f"{where}: the first column must start with a backticked name, got {cell!r}"
    return match[1]


# --- the parser -----------------------------------------------------------------------------


def skipped(action: argparse.Action) -> bool:
    return isinstance(action, argparse._HelpAction)


def spelling(action: argparse.Action) -> str:
    """How a table names an argument: its long option, or a positional's metavar."""
    if action.option_strings:
        longs = [o for o in action.option_strings if o.startswith("--")]
        assert longs, f"option {action.option_strings} has no long spelling to document"
        return longs[0]
    return str(action.metavar or action.dest)


def parsers(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by README heading ("run", "video-store pull"), plus the top level."""
    # Defaults must not depend on the environment the test runs in.
    monkeypatch.delenv("GLASSKIT_EVAL_CHECKPOINT_DIR", raising=False)
    found: dict[str, argparse.ArgumentParser] = {"Top level": build_parser()}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")

    for command in COMMAND_NAMES:
        top = build_parser(command)
        sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
        walk(sub.choices[command], command)
    return found


def arguments(parser: argparse.ArgumentParser, *, subcommands: bool = True) -> dict[str, argparse.Action]:
    """What a command's table must list: its options and positionals, and subcommands by name.

    The top level's subcommands are the commands themselves, each with a table of its own.
    """
    out: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if skipped(action):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name in action.choices if subcommands else ():
                out[name] = action
            continue
        out[spelling(action)] = action
    return out


def common_options(all_parsers: dict[str, argparse.ArgumentParser]) -> set[str]:
    """Options every command (and the top level) defines: documented once, under "Every command"."""
    sets = [{k for k in arguments(p) if k.startswith("--")} for p in all_parsers.values()]
    return set.intersection(*sets)


def default_text(value: object) -> str | None:
    """The default a table must show, or None when the parser has no meaningful one."""
    if value is None or value is False or value == [] or value == argparse.SUPPRESS:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_row(where: str, action: argparse.Action, row: list[str]) -> list[str]:
    """Problems of one table row against its parser action (value and default columns)."""
    assert len(row) >= 4, f"{where}: rows need 4 columns (option, value, default, meaning): {row}"
    value, default = row[1], row[2]
    problems = []
    if isinstance(action, argparse._SubParsersAction):
        if value != "subcommand":
            problems.append(f"{where}: a subcommand's value column must say 'subcommand', got {value!r}")
        return problems
    if action.nargs == 0:
        if value != FLAG:
            problems.append(f"{where}: {row[0]} takes no value; its value column must be {FLAG}, got {value!r}")
    elif not action.option_strings:
        if not value.startswith("positional"):
            problems.append(f"{where}: {row[0]} is positional; say so in the value column, got {value!r}")
    elif action.choices is not None:
        missing = [c for c in action.choices if f"`{c}`" not in value]
        if missing:
            problems.append(f"{where}: {row[0]}'s value column lacks the choices {missing}: {value!r}")
    elif action.metavar is None or str(action.metavar) not in value:
        problems.append(f"{where}: {row[0]}'s value column must show the metavar {action.metavar!r}, got {value!r}")
    wanted = default_text(action.default)
    if wanted is not None and f"`{wanted}`" not in default:
        problems.append(f"{where}: {row[0]} defaults to {wanted!r}; its default column says {default!r}")
    if action.required and "required" not in default:
        problems.append(f"{where}: {row[0]} is required; its default column must say so, got {default!r}")
    return problems


# --- commands and options --------------------------------------------------------------------


def command_tables() -> dict[str, list[str]]:
    commands = section(reference_lines(), "Commands and options", 2)
    return subsections(commands, 3)


def test_every_command_has_an_option_table(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = set(parsers(monkeypatch)) | {"Every command"}
    documented = set(command_tables())
    assert documented == expected, (
        f"### headings under 'Commands and options' must be exactly one per command and subcommand; "
        f"missing: {sorted(expected - documented)}, not a command: {sorted(documented - expected)}")


def test_option_tables_match_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    all_parsers = parsers(monkeypatch)
    tables = command_tables()
    common = common_options(all_parsers)
    problems = []

    shared_rows = {code_word(r[0], "Every command"): r for r in first_table(tables["Every command"], "Every command")}
    if set(shared_rows) != common:
        problems.append(f"'Every command' must list exactly the options every command defines {sorted(common)}; "
                        f"stale: {sorted(set(shared_rows) - common)}, missing: {sorted(common - set(shared_rows))}")
    top_actions = arguments(all_parsers["Top level"])
    for name, row in shared_rows.items():
        if name in top_actions:
            problems += check_row(f"Every command {name}", top_actions[name], row)

    for name, parser in all_parsers.items():
        actions = arguments(parser, subcommands=name != "Top level")
        wanted = set(actions) - common
        rows = first_table(tables[name], name) if name in tables else []
        listed: dict[str, list[str]] = {}
        for row in rows:
            word = code_word(row[0], name)
            if word in listed:
                problems.append(f"{name}: {word} is listed twice")
            listed[word] = row
        missing = sorted(wanted - set(listed))
        stale = sorted(set(listed) - wanted)
        if missing:
            problems.append(f"{name}: the parser defines {missing}, which the reference's table lacks")
        if stale:
            problems.append(f"{name}: the reference lists {stale}, which the parser does not define"
                            + (" (options every command takes belong under 'Every command')"
                               if set(stale) & common else ""))
        for word in sorted(wanted & set(listed)):
            problems += check_row(f"{name} {word}", actions[word], listed[word])
    assert not problems, "the reference's option tables disagree with the parser:\n" + "\n".join(problems)


def test_commands_overview_names_every_command() -> None:
    overview = section(reference_lines(), "Commands and options", 2)
    rows = first_table(overview, "Commands and options overview")
    named = [code_word(r[0], "overview") for r in rows]
    assert sorted(named) == sorted(COMMAND_NAMES), f"the overview table lists {named}, commands: {COMMAND_NAMES}"


# --- case-file format --------------------------------------------------------------------------


#: Heading under "Case-file format" -> the keys the code accepts there.
KEY_TABLES: dict[str, set[str]] = {
    "Case file keys": parse._CASE_KEYS,
    "Target keys": parse._TARGET_KEYS,
    "Sample block keys": parse._BLOCK_KEYS,
    "events keys": streams._EVENT_KEYS,
    "stream keys": streams._STREAM_KEYS,
    "sample_defaults keys": checks._DEFAULTS_KEYS,
    "compare keys": checks._COMPARE_KEYS,
    "clip keys": checks._CLIP_KEYS,
    "Cloud video keys": parse._CLOUD_VIDEO_KEYS,
    "thresholds keys": parse._THRESHOLD_KEYS | parse._RUN_THRESHOLD_KEYS,
    "config.yaml keys": evaldir._CONFIG_KEYS,
    "run keys": evaldir._RUN_KEYS,
    "video_stores keys": evaldir._STORE_KEYS,
    "arms keys": set(ARM_KEYS),
}


def key_tables() -> dict[str, list[list[str]]]:
    fmt = section(reference_lines(), "Case-file format", 2)
    return {name: first_table(lines, name) for name, lines in subsections(fmt, 3).items()
            if name in KEY_TABLES or name == "adapter.yaml"}


@pytest.mark.parametrize("title", sorted(KEY_TABLES))
def test_case_file_keys_match_the_parser(title: str) -> None:
    tables = key_tables()
    assert title in tables, f"docs/reference.md's Case-file format needs a '### {title}' table"
    documented = [code_word(row[0], title) for row in tables[title]]
    expected = KEY_TABLES[title]
    assert len(documented) == len(set(documented)), f"{title}: a key is listed twice: {documented}"
    assert set(documented) == expected, (
        f"{title}: the parser accepts {sorted(expected)}; the reference lacks {sorted(expected - set(documented))}, "
        f"the reference lists stale {sorted(set(documented) - expected)}")


def test_run_wide_thresholds_are_marked_config_only() -> None:
    rows = key_tables()["thresholds keys"]
    config_only = {code_word(r[0], "thresholds") for r in rows if "config.yaml only" in r[1]}
    assert config_only == parse._RUN_THRESHOLD_KEYS, (
        f"thresholds keys only config.yaml accepts are {sorted(parse._RUN_THRESHOLD_KEYS)}; "
        f"the reference marks {sorted(config_only)} 'config.yaml only'")


def test_adapter_yaml_is_documented_as_a_free_mapping() -> None:
    fmt = section(reference_lines(), "Case-file format", 2)
    text = " ".join(subsections(fmt, 3)["adapter.yaml"])
    assert "free" in text and "passed to the adapter" in text


def test_http_adapter_keys_match_the_parser() -> None:
    from glasskit_eval.adapters import _http as http
    documented = {code_word(row[0], "adapter.yaml") for row in key_tables()["adapter.yaml"]}
    assert documented == set(http._KEYS), (
        f"adapter.yaml `adapter:` keys: the HTTP adapter accepts {sorted(http._KEYS)}, the reference lists {sorted(documented)}")


# --- README.md's first block ---------------------------------------------------------------------


def test_first_fenced_block_is_the_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# glasskit_eval"
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    assert lines[start] == "```sh", f"the first code block must be a sh block, got {lines[start]!r}"
    assert lines[start + 1:end] == FIRST_BLOCK
    assert all(not line.strip() for line in lines[1:start]), "nothing may come between the title and the block"
