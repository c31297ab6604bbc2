"""The README's lint example prints what the README shows: its `model.py`, linted with the
commands the README gives, and the words on what the default confidence reports."""

from __future__ import annotations

import re
from pathlib import Path

from nanguard.lint.cli import main

REPO = Path(__file__).resolve().parents[2]


def _blocks() -> list[tuple[str, str]]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", readme, re.S | re.M)]


def _lines(text: str) -> list[str]:
    """The lines as a reader sees them: trailing blanks (a diff's blank context line) dropped."""
    return [line.rstrip() for line in text.splitlines()][:len(text.rstrip().splitlines())]


def test_readme_lint_example_prints_what_it_shows(tmp_path, monkeypatch, capsys):
    blocks = _blocks()
    i = next(i for i, (lang, text) in enumerate(blocks) if lang == "console" and "nanguard lint" in text)
    source, console = blocks[i - 1][1], blocks[i][1]
    (tmp_path / "model.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    sessions = re.split(r"^\$ ", console, flags=re.M)[1:]
    assert len(sessions) == 2
    for session in sessions:
        command, _, shown = session.partition("\n")
        argv = command.split()
        assert argv[:2] == ["nanguard", "lint"]
        main(["--isolated", *argv[2:]])
        assert _lines(capsys.readouterr().out) == _lines(shown), command
    # the default reports only the certain findings: the README says which
    main(["--isolated", "-q", "model.py"])
    default = {line.split()[1] for line in capsys.readouterr().out.splitlines()}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    said = re.search(r"\*\*What the default reports:\*\*(.*?)\n- ", readme, re.S).group(1)
    assert "--confidence all" in said
    assert f"here {', '.join(sorted(default)[:-1])} and {sorted(default)[-1]}" in " ".join(said.split())
