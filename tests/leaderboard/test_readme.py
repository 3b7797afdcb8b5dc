"""The README's terminal sessions say what the commands print today."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from leaderboard_cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def readme_session(command: str) -> str:
    """What the README shows under ``$ <command>``, up to the next prompt."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"^\$ {re.escape(command)}\n(.*?)(?=^\$ |^```)", text, flags=re.S | re.M)
    assert match, f"the README shows no `$ {command}`"
    return match[1]


def test_lb_tracks_prints_what_the_readme_shows_for_the_demo_site(live_server: Any, lb_config: Path,
                                                                  settings: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    settings.DATA_DIR = tmp_path  # load_demo writes its demo labels and predictions there
    call_command("load_demo", stdout=io.StringIO())
    monkeypatch.setenv("LB_SERVER", live_server.url)  # no token: lb tracks reads anonymously
    assert main(["tracks"]) == 0
    assert capsys.readouterr().out == readme_session("lb tracks")
