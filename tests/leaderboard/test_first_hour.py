"""A researcher's first hour (issue 14): the stumbles of a new user, each as a test."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest

from tests.leaderboard.test_rankings import add, split  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]


# Error pages


def test_a_403_page_says_why_and_offers_a_sign_in_and_logs_one_line(client, outsider, caplog):
    caplog.set_level(logging.WARNING, logger="django.request")
    body = client.get("/moderation/").content.decode()
    assert "maintainers" in body and 'href="/accounts/login/?next=/moderation/"' in body
    assert '<link rel="stylesheet"' in body, "the page is styled (extends base.html)"
    client.force_login(outsider)
    response = client.get("/moderation/")
    assert response.status_code == 403
    body = response.content.decode()
    assert "signed in as <strong>charlie</strong>" in body and 'href="/"' in body
    forbidden = [r for r in caplog.records if r.name == "django.request" and r.getMessage().startswith("Forbidden")]
    assert len(forbidden) == 2 and all(r.exc_info is None for r in forbidden)


def test_a_404_page_is_styled_and_leads_home_while_the_api_keeps_json(client, db):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "There is no page at <code>/no-such-page/</code>" in body and 'href="/"' in body
    api = client.get("/api/v1/nope")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_the_500_page_renders_without_a_request_database_or_context_processors():
    from django.template import loader

    html = loader.get_template("500.html").render()  # what handler500 does: no request, no context
    assert "Something broke on our side" in html and 'href="/"' in html


# Leaderboards


def test_switching_the_metric_keeps_rows_without_it_and_says_why(client, split):  # noqa: F811
    from leaderboard.rankings.models import LeaderboardEntry

    add(split, "scored", 0.5)
    LeaderboardEntry.objects.create(split=split, name="EM-only paper", is_paper=True, scores={"EM": 0.9},
                                    primary_score=0.9)
    rows = client.get("/api/v1/leaderboards/sqa3d?metric=EM_R").json()["rows"]
    assert [(r["method"], r["rank"], r["scores"]["EM_R"]) for r in rows] == [("scored", 1, 0.51),
                                                                           ("EM-only paper", None, None)]
    page = client.get("/benchmarks/sqa3d/?metric=EM_R").content.decode()
    assert "1 row reported in a paper has no EM_R: shown as — and ranked last." in page
    assert "EM-only paper" in page and '<td class="num" data-label="Overall">—</td>' in page
    assert "missing-note" not in client.get("/benchmarks/sqa3d/").content.decode()


def test_the_best_over_time_agrees_with_the_table_paper_rows_included(client, split):  # noqa: F811
    add(split, "first", 0.3, days=30)
    add(split, "paper", 0.9, paper=True, days=40)
    add(split, "better", 0.5, days=10)
    best = client.get("/api/v1/leaderboards/sqa3d").json()["rows"][0]
    points = client.get("/api/v1/leaderboards/sqa3d/progress").json()["points"]
    assert points[-1]["best"] == best["scores"]["EM"] == 0.9 and points[-1]["method"] == best["method"]
    hidden = client.get("/api/v1/leaderboards/sqa3d/progress?paper=0").json()["points"]
    assert [(p["method"], p["best"]) for p in hidden] == [("first", 0.3), ("better", 0.5)]


def test_one_record_is_one_labelled_dot_over_one_date():
    from datetime import datetime

    from leaderboard.rankings.charts import progress

    svg = str(progress([(datetime(2026, 3, 1, tzinfo=UTC), 0.901, "Human (amateur)")], "Best EM"))
    assert svg.count("2026-03-01") == 2, "one date label (and the dot's tooltip)"
    assert "<path" not in svg and svg.count("<circle") == 1 and "Human (amateur) 90.1" in svg
    sizes = [int(s) for s in re.findall(r'font-size="(\d+)"', svg)]
    width = int(re.search(r'viewBox="0 0 (\d+)', svg).group(1))
    assert min(sizes) * 350 / width >= 10, "text stays >= 10 px when a phone draws the chart 350 px wide"


def test_an_empty_board_says_why_and_what_to_do(client, db):
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    load_bundled_benchmarks()
    page = client.get("/benchmarks/mmscan-vg/").content.decode()
    assert "No results on MMScan" in page and "is not open yet (labels not loaded yet" in page  # no labels loaded
    filtered = client.get("/benchmarks/mmscan-vg/?extra=only").content.decode()
    assert "No row matches the filters (extra data only)" in filtered and 'id="clear-filters"' in filtered


# Home page


def test_home_cards_show_the_task_in_a_line_the_leaders_and_counts(client, split,  # noqa: F811
                                                                   django_capture_on_commit_callbacks):
    from leaderboard.lib.pagecache import bump

    add(split, "second", 0.4)
    add(split, "leader", 0.6)
    add(split, "paper row", 0.5, paper=True)
    page = client.get("/").content.decode()
    card = page.split('data-track="sqa3d"')[1].split("</section>")[0]
    task = card.split('class="task">')[1].split("</p>")[0]
    assert task.startswith("Situated question answering") and task.endswith(")."), task
    about = client.get("/benchmarks/sqa3d/").content.decode()
    assert "<code>clean_answer</code>" in about and "`clean_answer`" not in about
    assert "2 scored entries · 1 reported in papers" in card
    leaders = re.findall(r"<li><span class=\"name\"><span class=\"rank\">(\d)\.</span> ([^<]+?)(?: <|</span>)", card)
    assert leaders == [("1", "leader"), ("2", "paper row"), ("3", "second")]
    # A tie is numbered alike, as the board ranks it (issue 35).
    with django_capture_on_commit_callbacks(execute=True):
        add(split, "tied", 0.5)
        bump()  # a row added behind the services' back: the cached home page is stale
    card = client.get("/").content.decode().split('data-track="sqa3d"')[1].split("</section>")[0]
    leaders = re.findall(r"<li><span class=\"name\"><span class=\"rank\">(\d)\.</span> ([^<]+?)(?: <|</span>)", card)
    assert leaders == [("1", "leader"), ("2", "paper row"), ("2", "tied")]


def test_descriptions_show_backticked_words_as_code():
    from leaderboard.benchmarks.templatetags.text import inline_code

    assert str(inline_code("LEO's `clean_answer` <b>")) == "LEO&#x27;s <code>clean_answer</code> &lt;b&gt;"


# Moderation


def test_moderation_confirmations_say_what_happened_and_what_it_means(client, maintainer, sqa3d_split,
                                                                      sqa3d_files, owner, sent_tasks):
    from leaderboard.submissions import services

    sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="MyNet",
                                           file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                           file_name="p.json")
    client.force_login(maintainer)
    response = client.post(f"/moderation/submissions/{sub.pk}/verify/", {"on": "1"}, follow=True)
    assert f"Submission #{sub.pk} (MyNet) is verified: its row shows a verified badge." in \
        response.content.decode()
    response = client.post(f"/moderation/submissions/{sub.pk}/flag/", {"on": "1", "reason": "odd"}, follow=True)
    assert "(MyNet) is flagged for review" in response.content.decode()


def test_each_reason_box_has_its_own_label_before_the_buttons(client, maintainer, sqa3d_split, sqa3d_files,
                                                               owner, sent_tasks):
    from leaderboard.submissions import services

    sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="MyNet",
                                           file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                           file_name="p.json")
    client.force_login(maintainer)
    page = client.get(f"/moderation/submissions/{sub.pk}/").content.decode()
    form = page.split('id="moderate"')[1].split("</form>")[0]
    assert form.count('name="reason"') == 1 and '<label for="reason">' in form
    assert form.index('name="reason"') < form.index("<button"), "the reason comes before the button group"


# Submissions


def test_a_file_refused_for_its_extension_records_the_size_sent(owner, sqa3d_split, sent_tasks):
    from leaderboard.submissions import services
    from leaderboard.submissions.models import RefusedUpload

    with pytest.raises(services.FileRefused):
        services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="M",
                                         file=io.BytesIO(b"x" * 1234), file_name="preds.txt")
    assert RefusedUpload.objects.get().file_size == 1234


def test_a_team_history_lists_its_submissions_for_members_only(client, owner, member, outsider, sqa3d_split,
                                                               sqa3d_files, sent_tasks):
    from evaluation_workers.tracks import get_track
    from leaderboard.accounts.services import personal_team
    from leaderboard.submissions import lifecycle, services

    sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="HistNet",
                                           file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                           file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
    services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="HistNet",
                                     file=io.BytesIO(b"not json"), file_name="bad.json")
    url = f"/submissions/teams/{personal_team(owner).slug}/"
    client.force_login(member)
    page = client.get(url).content.decode()
    assert page.count("HistNet") == 2 and f"{result['metrics']['EM'] * 100:.1f}" in page and "failed" in page
    client.force_login(outsider)
    assert client.get(url).status_code == 404


# lb


def test_lb_help_is_plain_text_and_lists_list_and_status(capsys):
    from leaderboard_cli.main import main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "list" in out and "status" in out


def test_lb_validate_names_the_file_once(tmp_path, capsys, sqa3d_split):
    from leaderboard_cli.main import main

    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(sqa3d_split.active_labels.manifest))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question_id": 1, "answer": "x"}]')
    assert main(["validate", "--track", "sqa3d", "--manifest", str(manifest), str(bad)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("bad.json: invalid: ") and err.count("bad.json") == 1, err


# The API page and its document


def test_the_api_page_shows_example_requests(client, db):
    page = client.get("/api/").content.decode()
    assert "<pre><code>" in page and 'curl -s -H "Authorization: Token $TOKEN"' in page


def test_the_openapi_document_is_valid_and_its_schemas_describe_real_answers(client, owner, sqa3d_split,
                                                                             sqa3d_files, sent_tasks):
    import jsonschema
    from openapi_spec_validator import validate

    from evaluation_workers.tracks import get_track
    from leaderboard.submissions import lifecycle, services
    from tests.leaderboard.conftest import describe_method

    doc = client.get("/api/v1/openapi.json").json()
    validate(doc)
    assert {"Submission", "Result", "LeaderboardRow", "Upload", "Method", "Error"} <= set(doc["components"]["schemas"])
    sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="SchemaNet",
                                           file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                           file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
    describe_method(sub.method)
    services.check_publish(owner, sub)
    client.force_login(owner)
    registry = {"components": doc["components"]}
    checked = 0
    for path, url in [("/api/v1/tracks", "/api/v1/tracks"), ("/api/v1/leaderboards/{track}",
                                                            "/api/v1/leaderboards/sqa3d"),
                      ("/api/v1/submissions", "/api/v1/submissions"),
                      ("/api/v1/submissions/{id}", f"/api/v1/submissions/{sub.pk}"),
                      ("/api/v1/my/methods/{id}", f"/api/v1/my/methods/{sub.method_id}"),
                      ("/api/v1/methods/{id}", f"/api/v1/methods/{sub.method_id}"),
                      ("/api/v1/leaderboards/{track}/progress", "/api/v1/leaderboards/sqa3d/progress"),
                      ("/api/v1/me", "/api/v1/me"),
                      ("/api/v1/tracks/{track}/{split}/manifest", "/api/v1/tracks/sqa3d/test/manifest")]:
        schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        body = client.get(url).json()
        jsonschema.validate(body, {**schema, **registry})
        checked += 1
    assert checked == 9


# Deploy


def test_the_env_example_can_be_sourced_and_sets_only_variables_that_are_read():
    env = {"PATH": "/usr/bin:/bin"}
    before = subprocess.run(["bash", "-c", "env -0"], capture_output=True, env=env, cwd=ROOT).stdout
    sourced = subprocess.run(["bash", "-ec", "set -a; . deploy/.env.example; env -0"], capture_output=True,
                             env=env, cwd=ROOT)
    assert sourced.returncode == 0 and sourced.stderr == b"", sourced.stderr.decode()
    names = {kv.split(b"=", 1)[0].decode() for kv in sourced.stdout.split(b"\0") if kv} - \
        {kv.split(b"=", 1)[0].decode() for kv in before.split(b"\0") if kv}
    assert "SITE_NAME" in names and "EVAL_GPU_TRACKS" not in names
    sources = "\n".join(p.read_text() for pattern in ("leaderboard/**/*.py", "evaluation_workers/**/*.py",
                                                      "deploy/*.py", "deploy/*.sh", "deploy/compose.yaml")
                        for p in ROOT.glob(pattern))
    unread = {n for n in names if not re.search(rf"""["']{n}["']|\${{?{n}\b""", sources)}
    assert unread == set()


def test_createsuperuser_works_as_the_readme_says_in_a_fresh_shell(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/python manage.py createsuperuser" in readme
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DATA_DIR": str(tmp_path / "data"),
           "DJANGO_SUPERUSER_PASSWORD": "a long and good password"}
    python = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
    for args in (["migrate", "-v", "0"], ["createsuperuser", "--noinput", "--username", "root",
                                          "--email", "root@example.org"]):
        done = subprocess.run([python, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert "Superuser created successfully." in done.stdout
