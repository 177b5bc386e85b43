"""Checks that keep the docs true to the code and to themselves.

The docs quote dead-letter descriptions and log `error` fields as the worker writes them:
`TransientError (Cosmos DB) at timeouts.py:261 from ...`. The file and line in such a quote
must be a line of ours that raises, so an operator who follows it lands on the raise, not on
whatever code moved there since. Every page under docs/ is reachable from its index, and
configuration.md lists every setting with the default the code gives it."""

from __future__ import annotations

import re
from pathlib import Path

from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
QUOTED = re.compile(
    r"\b[A-Z][A-Za-z]*(?:Error|Exceeded|Lost|Found|Conflict)\s+(?:\([A-Za-z ]+\)\s+)?"
    r"at\s+([a-z_]+\.py):(\d+)"
)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def quoted_sites() -> list[tuple[str, str, int]]:
    found = []
    for doc in documents():
        for match in QUOTED.finditer(doc.read_text(encoding="utf-8")):
            found.append((str(doc.relative_to(ROOT)), match[1], int(match[2])))
    return found


def source(name: str) -> Path:
    matches = [p for pkg in ("worker", "handlers", "schemas") for p in (ROOT / pkg).rglob(name)]
    assert len(matches) == 1, f"{name} names {len(matches)} files of ours"
    return matches[0]


def test_the_scan_finds_the_quotes_across_line_breaks() -> None:
    docs = {doc for doc, _, _ in quoted_sites()}
    # delivery.md quotes on one line; operations.md breaks the line between `at` and the file.
    assert {"docs/contract/delivery.md", "docs/operations.md"} <= docs


def test_every_quoted_site_is_a_line_that_raises() -> None:
    for doc, name, line in quoted_sites():
        lines = source(name).read_text(encoding="utf-8").splitlines()
        assert line <= len(lines), f"{doc} quotes {name}:{line}, past its end"
        assert lines[line - 1].lstrip().startswith("raise "), (
            f"{doc} quotes {name}:{line}, which reads {lines[line - 1].strip()!r}"
        )


def test_the_docs_index_links_every_page_of_docs() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+\.md)\)", index))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages - {"README.md"} <= linked, sorted(pages - {"README.md"} - linked)


def cli_rows() -> list[str]:
    """The first cell of each row of cli.md's command table."""
    text = (ROOT / "docs" / "contract" / "cli.md").read_text(encoding="utf-8")
    table = text.split("## Commands", 1)[1].split("\n\n", 2)[1]
    cells = [re.split(r"(?<!\\)\|", line)[1] for line in table.splitlines()[2:]]
    return [cell.strip().strip("`").replace("\\|", "|") for cell in cells]


def test_every_command_of_cli_md_shows_its_documented_names_in_its_help() -> None:
    from click.testing import CliRunner

    from worker.cli import cli

    rows = cli_rows()
    assert "send FILE|-" in rows and any(row.startswith("exports get") for row in rows), rows
    for row in rows:
        words = row.split()
        path = [w for w in words[:2] if re.fullmatch(r"[a-z]+", w)]
        result = CliRunner().invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (row, result.output)
        # The usage line and the options, not the docstring between them (it may name FILE).
        first, rest = result.output.split("\n", 1)
        usage = first + rest.split("Options:", 1)[1]
        # Metavars (FILE, EXPORT_ID, PATH) and options (--output) as cli.md writes them.
        names = re.findall(r"\b[A-Z][A-Z_]*\b|--[a-z][a-z-]*", row)
        missing = [n for n in names if not re.search(rf"(?<![\w-]){n}(?![\w-])", usage)]
        assert not missing, f"`{row}`: --help does not show {missing}"


# --- configuration.md's tables and the settings' defaults ---------------------------------

_UNITS = {"MiB": 1024 * 1024, "KiB": 1024}


def configuration_rows() -> list[list[str]]:
    """The cells of each table row of configuration.md (other lines give one cell)."""
    text = (ROOT / "docs" / "contract" / "configuration.md").read_text(encoding="utf-8")
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines()
    ]


def documented_defaults() -> dict[str, str]:
    """Each variable of configuration.md's tables with the default written for it: the
    backticked values of its default cell in order (one per variable of the row), else the
    cell's plain number ("1,900,000", "192 KiB"), else "" (none)."""
    found: dict[str, str] = {}
    for cells in configuration_rows():
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([A-Z_]+)`", cells[0])
        values = re.findall(r"`([^`]*)`", cells[1])
        if not values:
            plain = re.match(r"([\d,]+)(?: (MiB|KiB))?", cells[1])
            values = [] if plain is None else [plain[0]]
        for at, name in enumerate(names):
            found[name] = values[at] if at < len(values) else ""
    return found


def as_documented(text: str, default: object) -> object:
    """The written default read as the setting's kind."""
    if text == "":
        return None
    if default is None:
        return text
    if isinstance(default, bool):
        return {"true": True, "false": False}[text]
    if isinstance(default, Path):
        return Path(text)
    if isinstance(default, int | float):
        number, _, unit = text.partition(" ")
        return type(default)(float(number.replace(",", "")) * _UNITS.get(unit, 1))
    return text


def test_configuration_md_lists_every_setting_with_its_default() -> None:
    documented = documented_defaults()
    settings = {name.upper(): setting.default for name, setting in Settings.fields().items()}
    assert sorted(documented) == sorted(settings)
    # LOG_LEVEL's default depends on the command ("info" for run): the setting holds none.
    wrong = {
        name: (documented[name], default)
        for name, default in settings.items()
        if name != "LOG_LEVEL" and as_documented(documented[name], default) != default
    }
    assert wrong == {}
    assert settings["LOG_LEVEL"] is None


def documented_bounds() -> dict[str, str]:
    """Each variable of configuration.md's "accepted" table with what it accepts."""
    found: dict[str, str] = {}
    for cells in configuration_rows():
        if len(cells) == 2 and cells[1].startswith(("an integer", "a number")):
            found.update(dict.fromkeys(re.findall(r"`([A-Z_]+)`", cells[0]), cells[1]))
    return found


def test_configuration_md_states_what_every_number_setting_accepts() -> None:
    accepted: dict[str, str] = {}
    for name, setting in Settings.fields().items():
        try:
            setting.parse("?")
        except ValueError as refused:  # the parser's own words for what it takes
            if str(refused).startswith(("an integer", "a number")):
                accepted[name.upper()] = str(refused)
    assert len(accepted) >= 16
    assert documented_bounds() == accepted
