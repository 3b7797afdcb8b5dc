"""The ``lb`` client against a live site: login and config, validate, submit, status, publish."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboard.accounts.models import ApiToken
from leaderboard.accounts.services import do_create_token, do_revoke_token
from leaderboard_cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def logged_in(live_server, owner, lb_config, capsys):
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    capsys.readouterr()
    return lb_config


def test_login_stores_server_and_token_privately_and_the_environment_wins(live_server, owner, lb_config, capsys,
                                                                        outsider, monkeypatch):
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    assert "as alice" in capsys.readouterr().out
    assert json.loads(lb_config.read_text())["server"] == live_server.url
    assert stat.S_IMODE(lb_config.stat().st_mode) == 0o600
    monkeypatch.setenv("LB_TOKEN", do_create_token(outsider))
    assert main(["whoami"]) == 0 and capsys.readouterr().out.startswith("charlie")


def test_a_revoked_token_fails_with_the_reason(logged_in, owner, capsys):
    do_revoke_token(ApiToken.objects.get(user=owner))
    assert main(["whoami"]) == 1
    assert "revoked" in capsys.readouterr().err


def test_an_unreachable_server_is_a_clear_error(lb_config, monkeypatch, capsys):
    monkeypatch.setenv("LB_SERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("LB_TOKEN", "lb_x_y")
    assert main(["status", "1"]) == 1
    assert "Cannot reach http://127.0.0.1:9" in capsys.readouterr().err


def test_validate_uses_the_servers_validator_offline_with_the_public_manifest(logged_in, sqa3d_split, sqa3d_files,
                                                                            tmp_path, capsys, monkeypatch):
    assert main(["validate", "--track", "sqa3d", str(sqa3d_files["predictions"])]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question_id": 1, "answer": "x"}]')
    assert main(["validate", "--track", "sqa3d", "--split", "test", str(bad)]) == 4
    assert "bad.json: invalid" in capsys.readouterr().err
    monkeypatch.setenv("LB_SERVER", "http://127.0.0.1:9")  # offline: the cached manifest serves
    assert main(["validate", "--track", "sqa3d", "--split", "test", str(sqa3d_files["predictions"])]) == 0


def test_submit_in_parts_through_the_site_then_status(logged_in, sqa3d_split, sqa3d_files, small_parts, sent_tasks,
                                                      capsys):
    assert main(["-q", "submit", "--track", "sqa3d", "--method", "CliNet", str(sqa3d_files["predictions"])]) == 0
    out = capsys.readouterr().out
    assert "sqa3d/test CliNet (team alice): queued" in out
    submission_id = out.split("#")[1].split()[0]
    assert main(["status", submission_id]) == 0
    assert main(["results", submission_id]) == 1, "no scores yet"


def test_a_rejected_file_exits_3_with_the_message(logged_in, sqa3d_split, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert main(["-q", "submit", "--track", "sqa3d", "--method", "Bad", str(bad)]) == 3
    assert "invalid input: bad.json" in capsys.readouterr().out


@pytest.mark.parametrize("in_parts", [False, True])
def test_a_refused_request_exits_1_with_the_servers_message(logged_in, sqa3d_split, sqa3d_files, settings, capsys,
                                                            in_parts):
    """A 400 that is not a failed submission (an unknown split) prints the server's message, not a
    traceback: in one request (it was a KeyError there) and in parts."""
    settings.UPLOAD_DIRECT_MAX_BYTES = 1024 if in_parts else 1 << 30
    args = ["-q", "submit", "--track", "sqa3d", "--split", "val", "--method", "X", str(sqa3d_files["predictions"])]
    assert main(args) == 1
    assert "Unknown track/split sqa3d/val. sqa3d takes submissions on: test." in capsys.readouterr().err


def test_a_folder_is_named_as_a_folder_before_anything_is_sent(logged_in, sqa3d_split, tmp_path, capsys):
    for command in (["validate", "--track", "sqa3d", "--split", "test"], ["submit", "--track", "sqa3d", "--method", "F"]):
        assert main(["-q", *command, str(tmp_path)]) == 1
        assert capsys.readouterr().err == f"lb: {tmp_path} is a folder: give the predictions file itself\n"
    assert main(["-q", "validate", "--track", "sqa3d", str(tmp_path / "missing.json")]) == 1
    assert capsys.readouterr().err == f"lb: No such file: {tmp_path / 'missing.json'}\n"


def test_convert_names_an_output_folder_that_does_not_exist_before_converting(lb_config, tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text("[]")
    out = tmp_path / "no" / "out.json"
    assert main(["convert", "--track", "sqa3d", "--from", "leo", str(results), str(out)]) == 1
    assert capsys.readouterr().err == f"lb: OUT {out}: no folder {out.parent} to write it in\n"


def test_the_console_script_is_installed():
    lb = Path(sys.executable).parent / "lb"
    if not lb.exists():
        pytest.skip("install distributions/cli (deploy/venv.sh does)")
    result = subprocess.run([str(lb), "--help"], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "LB_CONFIG": "/nonexistent/config.json"})
    assert result.returncode == 0 and "submit" in result.stdout
    result = subprocess.run([sys.executable, "-m", "leaderboard_cli", "status", "1"], capture_output=True,
                            text=True, cwd=ROOT, env={**os.environ, "LB_CONFIG": "/nonexistent/config.json"})
    assert result.returncode == 1 and "No API token" in result.stderr


@pytest.mark.live
def test_submit_wait_then_describe_and_publish_reaches_the_leaderboard(live_server, live_pipeline, logged_in,
                                                                      sqa3d_split, sqa3d_files, method_details,
                                                                      capsys, client):
    from evaluation_workers.tracks import get_track

    expected = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    assert main(["-q", "submit", "--track", "sqa3d", "--split", "test", "--method", "WaitNet", "--wait",
                 str(sqa3d_files["predictions"])]) == 0
    out = capsys.readouterr().out
    assert "WaitNet (team alice): finished" in out
    assert f"{expected['metrics']['EM'] * 100:6.2f}" in out
    submission_id = out.split("#")[1].split()[0]

    assert main(["publish", submission_id]) == 1
    assert "Describe the method 'WaitNet' before publishing" in capsys.readouterr().err
    assert main(["method", "set", "WaitNet", "--description", "Waits well.", "--authors", "A. Lice",
                 "--extra-data", "no", "--paper-url", "https://example.org/p"]) == 0
    assert "ready to publish" in capsys.readouterr().out
    assert main(["publish", submission_id]) == 0
    board = client.get("/api/v1/leaderboards/sqa3d?split=test").json()
    [row] = [r for r in board["rows"] if r["method"] == "WaitNet"]
    assert row["scores"]["EM"] == expected["metrics"]["EM"]


def test_submit_never_uploads_a_pickle_and_prints_the_convert_command(lb_config, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LB_SERVER", "http://127.0.0.1:9")  # nothing is sent: no server is needed
    (tmp_path / "submission.pkl").write_bytes(b"\x80\x02}q\x00.")
    assert main(["submit", "--track", "mmscan-vg", "--method", "M", str(tmp_path / "submission.pkl")]) == 2
    err = capsys.readouterr().err
    assert "needs unpickling, which the leaderboard never does" in err
    assert f"lb convert --track mmscan-vg --from embodiedscan-pkl {tmp_path / 'submission.pkl'} submission.npz" in err


def test_convert_validates_against_the_servers_manifest(logged_in, sqa3d_split, sqa3d_files, tmp_path, capsys):
    questions = json.loads(next(sqa3d_files["labels"].glob("v1_balanced_questions_*"))
                           .read_text())["questions"][:5]
    (tmp_path / "q.json").write_text(json.dumps({"questions": questions}))
    results = [{"scene_id": q["scene_id"], "situation": q["situation"],
                "instruction": f"USER: {q['question']} ASSISTANT:", "response_pred": "left"} for q in questions]
    (tmp_path / "results.json").write_text(json.dumps(results))
    out = tmp_path / "answers.json"
    assert main(["convert", "--track", "sqa3d", "--from", "leo", "--questions", str(tmp_path / "q.json"),
                 str(tmp_path / "results.json"), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "5 LEO answers" in printed and '"answered": 5' in printed
    assert [a["question_id"] for a in json.loads(out.read_text())] == [q["question_id"] for q in questions]


# The command line agrees with the server (issue 27)


def test_validate_refuses_a_name_the_server_refuses_before_reading_or_asking(lb_config, sqa3d_files, tmp_path,
                                                                           monkeypatch, capsys):
    """``predictions.txt`` was called valid, then refused by the server for its extension."""
    monkeypatch.setenv("LB_SERVER", "http://127.0.0.1:9")  # never asked: the name alone decides
    renamed = tmp_path / "predictions.txt"
    renamed.write_bytes(sqa3d_files["predictions"].read_bytes())
    assert main(["validate", "--track", "sqa3d", str(renamed)]) == 4
    assert capsys.readouterr().err == "predictions.txt: invalid: expected a file ending in .json or .jsonl.\n"
    pickled = tmp_path / "results.pkl"
    pickled.write_bytes(b"\x80\x02.")
    assert main(["validate", "--track", "mmscan-vg", str(pickled)]) == 4
    assert "lb convert --track mmscan-vg --from embodiedscan-pkl" in capsys.readouterr().err


def test_validate_applies_the_size_limit_the_server_reports_for_the_split(logged_in, sqa3d_split, sqa3d_files,
                                                                         settings, tmp_path, capsys):
    size = sqa3d_files["predictions"].stat().st_size
    settings.UPLOAD_MAX_BYTES = {"sqa3d": 1000}
    assert main(["validate", "--track", "sqa3d", str(sqa3d_files["predictions"])]) == 4
    assert capsys.readouterr().err == (f"predictions.json: invalid: expected at most 1,000 bytes for SQA3D, but got "
                                       f"{size:,} bytes.\n")
    # The manifest saved from the server carries the limit offline too; a bare manifest gets the track's.
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"max_upload_bytes": 1000, "manifest": sqa3d_split.active_labels.manifest}))
    assert main(["validate", "--track", "sqa3d", "--manifest", str(answer), str(sqa3d_files["predictions"])]) == 4
    bare = tmp_path / "manifest.json"
    bare.write_text(json.dumps(sqa3d_split.active_labels.manifest))
    assert main(["validate", "--track", "sqa3d", "--manifest", str(bare), str(sqa3d_files["predictions"])]) == 0


def test_the_manifest_answer_carries_the_splits_upload_rules(client, sqa3d_split, settings):
    settings.UPLOAD_MAX_BYTES = {"sqa3d": 1234}
    body = client.get("/api/v1/tracks/sqa3d/test/manifest").json()
    assert body["upload_suffixes"] == [".json", ".jsonl"] and body["max_upload_bytes"] == 1234


def _help_texts(parser) -> dict[str, str]:
    import argparse

    texts = {parser.prog: parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                texts.update(_help_texts(sub))
    return texts


def test_every_help_text_is_plain_without_markup():
    from leaderboard_cli.main import parser

    texts = _help_texts(parser())
    assert {"lb", "lb publish", "lb validate", "lb submit", "lb convert"} <= set(texts)
    marked = {prog: [line for line in text.splitlines() if "`" in line] for prog, text in texts.items()}
    assert {prog: lines for prog, lines in marked.items() if lines} == {}


def _closed_pipe(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``args`` with its output read by nobody (``... | head`` once head has gone): its exit status and stderr."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), err


def test_a_closed_pipe_ends_quietly(live_server, sqa3d_split, sqa3d_files, tmp_path):
    """``lb tracks | head`` ended in a BrokenPipe traceback; it ends quietly, as a program killed by SIGPIPE."""
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(sqa3d_split.active_labels.manifest))
    env = {**os.environ, "LB_CONFIG": "/nonexistent/config.json", "LB_SERVER": live_server.url}
    for command in (["tracks"], ["validate", "--track", "sqa3d", "--manifest", str(manifest),
                                 str(sqa3d_files["predictions"])]):
        code, err = _closed_pipe([sys.executable, "-m", "leaderboard_cli", *command], env)
        assert (code, err) == (141, ""), command
