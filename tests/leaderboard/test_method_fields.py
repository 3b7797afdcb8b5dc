"""Method fields (issue 40): what a benchmark's bundle asks of every method (its input, whether it
uses an LLM, ...), answered on the method form, the API and `lb method set`, required before
publishing where declared so, and shown on method pages, as the board's column and filter and in
its exports; paper rows carry them too."""

from __future__ import annotations

import csv
import io
import json

import pytest

from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.benchmarks.bundles import BundleError, read_bundle
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import services
from leaderboard.submissions.models import Method
from leaderboard_cli.main import main
from tests.leaderboard.metric_tracks import submit_scored, write_bundle

FIELDS = """method_fields:
- {name: input, label: Input, type: choice, choices: [points, rgbd, multiview], required: true, column: true,
   filter: true, help: What the method reads.}
- {name: llm, label: Uses an LLM, type: bool, filter: true}
- {name: params, label: Parameters (M), type: number}
- {name: weights, label: Weights, type: url}
"""


@pytest.fixture
def bundle(error_track, owner, tmp_path, settings):
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # the checking child process does not know the fixture's track
    settings.PAGE_CACHE_SECONDS = 0
    path = write_bundle(tmp_path / "bundle", board=FIELDS, paper_fields="{input: points, llm: false}")
    load_bundle(path, allow_rescore=True)
    return path


@pytest.fixture
def best(bundle, owner, tmp_path, sent_tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return submit_scored(owner, [0.06, 0.1, 0.2, 0.3], "Best", tmp_path, publish=False)


def rows(client, query: str = "") -> list[str]:
    return [r["method"] for r in client.get(f"/api/v1/leaderboards/example-error{query}").json()["rows"]]


def test_a_bundle_declares_them_within_the_rules(error_track, tmp_path, db):
    with pytest.raises(BundleError) as refused:
        read_bundle(write_bundle(tmp_path / "a", board=FIELDS.replace("type: number}", "type: number, filter: true}")
                                 + "- {name: input, label: Again, type: text}\n- {name: size, label: Size, "
                                   "type: choice}\n",
                                 paper_fields="{input: lidar, nope: 1}"))
    problems = "\n".join(refused.value.problems)
    assert "method_fields[2].filter: expected a choice or bool field to be a filter, but 'params' is number" in problems
    assert "method_fields[4].name: field 'input' is declared twice" in problems
    assert "method_fields[5].choices: missing; a choice field lists its choices" in problems
    assert ("paper_rows[0].rows[0].fields.input: Expected Input (input) to be one of points, rgbd, multiview, "
            "but got 'lidar'") in problems
    assert "paper_rows[0].rows[0].fields.nope: unknown field 'nope'; method_fields declares: input" in problems
    with pytest.raises(BundleError, match=r"method_fields\[0\]\.type: 'photo' is not one of"):
        read_bundle(write_bundle(tmp_path / "b", board=FIELDS.replace("type: choice", "type: photo")))


def test_they_are_asked_before_publishing_and_shown_on_the_board(client, best, owner, tmp_path,
                                                                   django_capture_on_commit_callbacks):
    with pytest.raises(services.SubmissionRejected, match=r"missing Input \(Example error\)"):
        services.check_publish(owner, best)
    client.force_login(owner)
    form = client.get(f"/submissions/methods/{best.method_id}/").content.decode()
    assert "Input (Example error)" in form and "Needed before publishing: Input (Example error)" in form
    assert 'name="field__example-error__input"' in form and "What the method reads." in form
    saved = client.post(f"/submissions/methods/{best.method_id}/", {
        "name": "Best", "description": "A test method.", "authors": "A. Researcher", "uses_extra_data": "false",
        "field__example-error__input": "rgbd", "field__example-error__llm": "true",
        "field__example-error__params": "7", "field__example-error__weights": "nope"})
    assert "Expected Weights (weights) to be an http(s) URL" in saved.content.decode() or \
        "Enter a valid URL" in saved.content.decode()
    saved = client.post(f"/submissions/methods/{best.method_id}/", {
        "name": "Best", "description": "A test method.", "authors": "A. Researcher", "uses_extra_data": "false",
        "field__example-error__input": "rgbd", "field__example-error__llm": "true",
        "field__example-error__params": "7"})
    assert saved.status_code == 302
    assert Method.objects.get(pk=best.method_id).fields == {"example-error": {"input": "rgbd", "llm": True,
                                                                             "params": 7}}
    with django_capture_on_commit_callbacks(execute=True):
        services.check_publish(owner, best)
    client.logout()

    page = client.get("/benchmarks/example-error/").content.decode()
    assert '<th class="field" data-field="input">Input</th>' in page and '<td class="field" data-label="Input">rgbd' in page
    assert '<select name="field.input"' in page and '<select name="field.llm"' in page
    assert rows(client) == ["Best", "PaperNet"]
    assert rows(client, "?field.input=points") == ["PaperNet"] and rows(client, "?field.llm=yes") == ["Best"]
    assert rows(client, "?field.llm=no&field.input=rgbd") == [] and rows(client, "?field.input=lidar") == [
        "Best", "PaperNet"]  # not one of its choices: no filter
    assert "No row matches the filters" in client.get("/benchmarks/example-error/?field.llm=no&field.input=rgbd"
                                                      ).content.decode()
    body = client.get("/api/v1/leaderboards/example-error").json()
    assert body["rows"][0]["fields"] == {"input": "rgbd", "llm": True, "params": 7}
    assert [f["name"] for f in body["method_fields"]] == ["input", "llm", "params", "weights"]

    exported = list(csv.DictReader(io.StringIO(client.get("/benchmarks/example-error/export.csv?field.llm=yes")
                                               .content.decode())))
    assert [(r["method"], r["field.input"], r["field.llm"], r["field.params"]) for r in exported] == [
        ("Best", "rgbd", "yes", "7")]
    exported = json.loads(client.get("/benchmarks/example-error/export.json").content)
    assert [(r["method"], r["fields"]) for r in exported["rows"]] == [
        ("Best", {"input": "rgbd", "llm": True, "params": 7}), ("PaperNet", {"input": "points", "llm": False})]
    method_page = client.get(f"/methods/{best.method_id}/").content.decode()
    assert "<dt>Input</dt><dd>rgbd</dd>" in method_page and "<dt>Uses an LLM</dt><dd>yes</dd>" in method_page
    paper = LeaderboardEntry.objects.get(name="PaperNet")
    assert "<dt>Input</dt><dd>points</dd>" in client.get(f"/entries/{paper.pk}/").content.decode()
    assert client.get(f"/api/v1/methods/{best.method_id}").json()["results"][0]["fields"]["input"] == "rgbd"


def test_the_api_changes_them_and_the_row_follows(client, best, owner, django_capture_on_commit_callbacks):
    token = {"Authorization": f"Token {do_create_token(owner)}"}
    url = f"/api/v1/my/methods/{best.method_id}"
    refused = client.patch(url, {"fields": {"example-error": {"input": "lidar"}}}, content_type="application/json",
                           headers=token)
    assert refused.status_code == 400 and refused.json()["error"]["message"] == (
        "Invalid method details: fields.example-error.input: Expected Input (input) to be one of points, rgbd, "
        "multiview, but got 'lidar'")
    assert client.patch(url, {"fields": {"sqa3d": {"input": "rgbd"}}}, content_type="application/json",
                        headers=token).json()["error"]["message"].startswith(
        "Invalid method details: fields.sqa3d: 'Best' answers the fields of example-error")
    method = client.get(url, headers=token).json()
    assert method["missing_for_publishing"] == ["Input (Example error)"]
    assert [f["name"] for f in method["declared_fields"]["example-error"]] == ["input", "llm", "params", "weights"]
    changed = client.patch(url, {"fields": {"example-error": {"input": "multiview", "llm": "no"}}},
                           content_type="application/json", headers=token).json()
    assert changed["fields"] == {"example-error": {"input": "multiview", "llm": False}}
    assert changed["missing_for_publishing"] == []
    with django_capture_on_commit_callbacks(execute=True):
        services.check_publish(owner, best)
    with django_capture_on_commit_callbacks(execute=True):  # a published row follows its method's answers
        client.patch(url, {"fields": {"example-error": {"input": "points", "llm": None}}},
                     content_type="application/json", headers=token)
    assert LeaderboardEntry.objects.get(method_id=best.method_id).fields == {"input": "points"}
    assert rows(client, "?field.input=points") == ["Best", "PaperNet"]


def test_lb_method_set_answers_them(live_server, bundle, owner, tmp_path, lb_config, sent_tasks, capsys):
    submit_scored(owner, [0.06, 0.1, 0.2, 0.3], "Best", tmp_path, publish=False)
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    assert main(["method", "set", "Best", "--field", "input=rgbd", "--field", "llm=yes", "--field", "params=7.5"]) == 0
    out = capsys.readouterr().out
    assert "input (example-error) rgbd  (required)" in out and "llm (example-error) yes" in out
    assert "ready to publish" in out
    assert Method.objects.get(name="Best").fields == {"example-error": {"input": "rgbd", "llm": True, "params": 7.5}}
    assert main(["method", "set", "Best", "--field", "input=lidar"]) == 1
    assert "Expected Input (input) to be one of points, rgbd, multiview, but got 'lidar'" in capsys.readouterr().err
    assert main(["method", "set", "Best", "--field", "colour=red"]) != 0
    assert "--field colour: no benchmark it entered declares it (fields: input (example-error)" in capsys.readouterr().err
