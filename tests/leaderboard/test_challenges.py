"""A challenge walked through its phases (issue 40), the clock moved as the phase tests move it (each
split's dates set relative to now): a development phase on dev with a live board, a test phase on
test whose board stays hidden until it ends and where a team may publish one row, the final board
archived by the beat at the end (once), unchanged by later submissions and re-scores, and the split
going on as a post-challenge board whose new rows are marked."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.benchmarks.bundles import BundleError, read_bundle
from leaderboard.benchmarks.models import Challenge, Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.archive import do_archive_due
from leaderboard.rankings.models import ChallengeArchive
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Submission
from tests.leaderboard.metric_tracks import TRUTH, submit_scored

HOUR = timedelta(hours=1)
BUNDLE = """\
track: example-error
title: Example error
splits:
- {{name: dev, labels: {{source: labels.json}}}}
- {{name: test, labels: {{source: labels.json}}}}
paper_rows:
- split: test
  source: A paper
  paper: {{url: 'https://example.org/paper', venue: Example 2024, published: '2024-01-10'}}
  rows:
  - {{method: PaperNet, note: Table 1, scores: {{error: 0.5}}}}
challenges:
- name: loc-2026
  title: Localisation Challenge 2026
  top: 2
  phases:
  - {{name: development, split: dev, starts_at: '{dev_start}', deadline: '{dev_end}'}}
  - {{name: test, split: test, starts_at: '{test_start}', deadline: '{test_end}', board: hidden, max_published: 1}}
"""
GOOD, FAIR, LATE = [0.06, 0.1, 0.2, 0.3], [0.2, 0.3, 0.2, 0.3], [0.0, 0.1, 0.2, 0.35]  # 1.5, 10 and 1.25 cm


def at(offset: timedelta) -> str:
    return f"{timezone.now() + offset:%Y-%m-%dT%H:%M:%SZ}"


def write(folder, **offsets: timedelta):
    folder.mkdir(exist_ok=True)
    (folder / "labels.json").write_text(str(TRUTH))
    path = folder / "example-error.yaml"
    path.write_text(BUNDLE.format(**{k: at(v) for k, v in offsets.items()}))
    return path


def schedule(name: str, **offsets: timedelta | None) -> Split:
    """Move a split's dates to now + each offset (the clock, as tests/leaderboard/test_challenge_phases.py)."""
    now = timezone.now()
    Split.objects.filter(benchmark__track="example-error", name=name).update(
        **{k: (now + v if v is not None else None) for k, v in offsets.items()})
    return Split.objects.get(benchmark__track="example-error", name=name)


def board(client, split: str, query: str = "") -> dict:
    return client.get(f"/api/v1/leaderboards/example-error?split={split}{query}").json()


@pytest.fixture
def challenge(error_track, owner, outsider, tmp_path, settings, sent_tasks):
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # the checking child process does not know the fixture's track
    settings.PAGE_CACHE_SECONDS = 0
    settings.QUOTA_IN_FLIGHT = 10
    path = write(tmp_path / "bundle", dev_start=-HOUR, dev_end=3 * HOUR, test_start=HOUR, test_end=3 * HOUR)
    load_bundle(path, allow_rescore=True)
    return path


def test_a_challenge_runs_through_its_phases_to_an_archive_that_later_changes_leave_alone(
        client, challenge, owner, outsider, member, tmp_path, django_capture_on_commit_callbacks):
    run = django_capture_on_commit_callbacks
    # Development phase: a live board on dev; test opens later.
    [track] = [t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "example-error"]
    [state] = track["challenges"]
    assert (state["name"], state["state"], state["current_phase"]) == ("loc-2026", "running", "development")
    assert [(p["name"], p["split"], p["board"], p["max_published_per_team"]) for p in state["phases"]] == [
        ("development", "dev", "live", None), ("test", "test", "hidden", 1)]
    splits = {s["name"]: s for s in track["splits"]}
    assert splits["test"]["phase"] == "upcoming" and splits["dev"]["challenge"]["phase"] == "development"
    with run(execute=True):
        submit_scored(owner, GOOD, "Good", tmp_path, split="dev")
    assert [r["method"] for r in board(client, "dev")["rows"]] == ["Good"]  # live
    page = client.get("/benchmarks/example-error/?split=dev").content.decode()
    assert "Development phase of" in page and "Localisation Challenge 2026</a>: development phase on dev" in page
    with pytest.raises(services.PhaseClosed, match="example-error/test opens for submissions at"):
        submit_scored(owner, GOOD, "Good", tmp_path, split="test")

    # Test phase: its board hidden until the deadline; one row a team.
    schedule("test", starts_at=-HOUR, deadline=HOUR)
    with run(execute=True):
        good = submit_scored(owner, GOOD, "Good", tmp_path, split="test")
        fair = submit_scored(outsider, FAIR, "Fair", tmp_path, split="test")
    body = board(client, "test")
    assert body["board"] == "hidden" and [r["method"] for r in body["rows"]] == ["PaperNet"]  # paper rows only
    assert "The board is hidden until then" in client.get("/benchmarks/example-error/?split=test").content.decode()
    client.force_login(owner)
    assert ">1.50<" in client.get(f"/submissions/{good.pk}/").content.decode()  # a team sees its own score
    client.logout()
    second = submit_scored(member, FAIR, "Second", tmp_path, split="test", publish=False)  # owner's team
    answer = client.post(f"/api/v1/submissions/{second.pk}/publish",
                         headers={"Authorization": f"Token {do_create_token(member)}"})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "too_many_published"
    assert answer.json()["error"]["message"] == (
        "alice may have at most 1 published row on example-error/test, the rule of its challenge phase, and has "
        "1: Good. Withdraw one first, or submit under one of those methods.")

    # The end: the beat archives the final board once, without a page being read.
    Submission.objects.update(created_at=timezone.now() - 90 * timedelta(minutes=1))  # sent during the phases
    schedule("dev", starts_at=-4 * HOUR, deadline=-2 * HOUR)
    schedule("test", starts_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    with run(execute=True):
        assert do_archive_due() == 1
    assert do_archive_due() == 0
    archive = ChallengeArchive.objects.get(challenge__name="loc-2026")
    rows = [(r["method"], r["rank"], r["top"]) for r in archive.rows]
    assert rows == [("PaperNet", 1, None), ("Good", 2, 1), ("Fair", 3, 2)]  # lower is better; papers not placed
    kept = json.dumps(archive.rows, sort_keys=True)
    page = client.get("/benchmarks/example-error/challenges/loc-2026/").content.decode()
    assert 'data-state="archived"' in page and "1st place" in page and "2nd place" in page and ">1.50<" in page
    assert page.index("Good") < page.index("Fair")
    final = json.loads(client.get("/benchmarks/example-error/challenges/loc-2026/export.json").content)
    assert [r["method"] for r in final["rows"]] == ["PaperNet", "Good", "Fair"]
    assert final["url"] == "http://testserver/benchmarks/example-error/challenges/loc-2026/"
    exported = list(csv.DictReader(io.StringIO(
        client.get("/benchmarks/example-error/challenges/loc-2026/export.csv").content.decode())))
    assert [(r["method"], r["top"], r["error"]) for r in exported] == [("PaperNet", "", "0.5"), ("Good", "1", "1.5"),
                                                                        ("Fair", "2", "10.0")]
    bibtex = client.get("/benchmarks/example-error/challenges/loc-2026/bibtex").content.decode()
    assert bibtex.startswith("@misc{exampleerrorloc2026final,") and "Localisation Challenge 2026" in bibtex
    assert "\\url{http://testserver/benchmarks/example-error/challenges/loc-2026/}" in bibtex
    board_page = client.get("/benchmarks/example-error/").content.decode()
    assert 'href="/benchmarks/example-error/challenges/loc-2026/"' in board_page and "(final)</a>" in board_page
    detail = client.get("/api/v1/leaderboards/example-error/challenges/loc-2026").json()
    assert detail["state"] == "archived" and detail["final_board"]["rows"][1]["top"] == 1

    # After the challenge: the board goes on; new rows are marked; the archive does not move.
    body = board(client, "test")
    assert body["phase"] == "after" and body["accepting_submissions"] and body["next_phase"] is None
    assert [r["method"] for r in body["rows"]] == ["PaperNet", "Good", "Fair"]  # revealed at the end
    with run(execute=True):
        submit_scored(outsider, LATE, "Late", tmp_path, split="test")
        services.check_publish(outsider, fair, publish=False)  # the selection is free again
        lifecycle.do_enqueue(good.pk)
        lifecycle.record_result(submission_id=good.pk, attempt=2, result=dict(
            good.results.get().as_json(), track="example-error", metrics={"error": 9.0, "hit_rate": 0.5}))
    body = board(client, "test")
    assert [(r["method"], r["after_challenge"]) for r in body["rows"]] == [
        ("PaperNet", False), ("Late", True), ("Good", False)]
    assert body["rows"][2]["scores"]["error"] == 9.0  # re-scored on the live board
    assert "after the challenge</span>" in client.get("/benchmarks/example-error/?split=test").content.decode()
    archive = ChallengeArchive.objects.get(pk=archive.pk)
    assert json.dumps(archive.rows, sort_keys=True) == kept
    with pytest.raises(PermissionError):
        archive.save()
    with pytest.raises(PermissionError):
        archive.delete()

    # Its phases are what the archive was taken of: a bundle changing them is refused.
    with pytest.raises(BundleError, match="'loc-2026' was archived; its phases cannot change|whose board was "
                                          "archived"):
        load_bundle(write(tmp_path / "bundle", dev_start=-4 * HOUR, dev_end=-2 * HOUR, test_start=-2 * HOUR,
                          test_end=HOUR), allow_rescore=True)


def admin_form_data(page, changes: dict[tuple[int, str], datetime]) -> dict[str, object]:
    """The benchmark admin's change form as the page fills it, with ``changes`` ((split id, field): new value)."""
    def put(data, name, value):
        if isinstance(value, datetime):  # the admin's split date and time widget
            value = timezone.localtime(value).replace(microsecond=0)
            data[f"{name}_0"], data[f"{name}_1"] = value.date().isoformat(), value.strftime("%H:%M:%S")
        elif value is not None:
            data[name] = json.dumps(value) if isinstance(value, (dict, list)) else value

    data: dict[str, object] = {}
    for name, value in page.context["adminform"].form.initial.items():
        put(data, name, value)
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        data.update({formset.management_form.add_prefix(k): v for k, v in formset.management_form.initial.items()})
        for form in formset.forms:
            for name, value in form.initial.items():
                put(data, form.add_prefix(name), changes.get((form.instance.pk, name), value))
            data[form.add_prefix("id")], data[form.add_prefix("benchmark")] = form.instance.pk, form.instance.benchmark_id
    return data


def test_an_archived_challenges_phases_move_neither_on_the_desk_nor_in_the_admin(
        client, challenge, maintainer, django_user_model, django_capture_on_commit_callbacks):
    """The archive is what a workshop report cites: the phases it was taken of stay as they were, whichever
    way a maintainer tries to change them (a bundle is refused in the test above)."""
    schedule("dev", starts_at=-4 * HOUR, deadline=-2 * HOUR)
    ended = schedule("test", starts_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert do_archive_due() == 1
    later = timezone.now() + 3 * HOUR

    client.force_login(maintainer)
    page = client.post("/moderation/tracks/example-error/", {
        "action": "phases", "split": "test", "starts_at": f"{ended.starts_at:%Y-%m-%dT%H:%M}",
        "deadline": f"{later:%Y-%m-%dT%H:%M}", "reveal_at_deadline": "1", "reason": "one more week"},
        follow=True).content.decode()
    assert ("The schedule of example-error/test was not changed: split example-error/test is a phase of "
            "&#x27;loc-2026&#x27;, whose board was archived; its deadline cannot change (declare a new challenge for a new round).") in page
    assert Split.objects.get(pk=ended.pk).deadline == ended.deadline
    assert not AuditEntry.objects.filter(action="set_phases").exists()

    root = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(root)
    url = f"/admin/benchmarks/benchmark/{ended.benchmark_id}/change/"
    response = client.post(url, admin_form_data(client.get(url), {(ended.pk, "deadline"): later}))
    assert response.status_code == 200  # the form again, with the refusal
    assert "whose board was archived; its deadline cannot change" in response.content.decode()
    assert Split.objects.get(pk=ended.pk).deadline == ended.deadline
    # The other fields of an archived phase's split still change.
    response = client.post(url, {**admin_form_data(client.get(url), {}),
                                 **{f"splits-{i}-description": "the hidden test split" for i in range(2)}})
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert Split.objects.get(pk=ended.pk).description == "the hidden test split"
    assert Split.objects.get(pk=ended.pk).deadline == ended.deadline


def test_phases_are_checked_and_a_splits_phases_are_a_one_phase_challenge(error_track, tmp_path, db):
    bad = BUNDLE.replace("split: test, starts_at", "split: dev, starts_at") \
        + "- name: loc-2026\n  title: Again\n  phases: [{{name: x, split: nope, starts_at: 2030-01-01, deadline: 2029-01-01}}]\n"
    (tmp_path / "labels.json").write_text(str(TRUTH))
    (tmp_path / "b.yaml").write_text(bad.format(dev_start="2030-01-01", dev_end="2030-02-01",
                                                test_start="2029-12-01", test_end="2030-03-01"))
    with pytest.raises(BundleError) as refused:
        read_bundle(tmp_path / "b.yaml")
    problems = "\n".join(refused.value.problems)
    assert ("challenges[0].phases[1].split: split 'dev' is already the split of challenges.0.phases.0; a split "
            "runs one phase") in problems
    assert ("challenges[0].phases[1].starts_at: expected the phases in order: starts_at on or after the previous "
            "phase's (2030-01-01 00:00 UTC), but got 2029-12-01 00:00 UTC") in problems
    assert "challenges[1].name: challenge 'loc-2026' is declared twice" in problems
    assert "challenges[1].phases[0].split: split 'nope' is not declared in splits (dev, test)" in problems
    assert "challenges[1].phases[0].deadline: expected deadline after starts_at" in problems

    (tmp_path / "c.yaml").write_text("track: example-error\ntitle: Example error\nsplits:\n- name: test\n"
                                     "  labels: {source: labels.json}\n"
                                     "  phases: {starts_at: 2030-01-01, deadline: 2030-02-01}\n")
    load_bundle(tmp_path / "c.yaml", allow_rescore=True)
    challenge = Challenge.objects.get(benchmark__track="example-error")
    assert (challenge.name, challenge.title, [(p.name, p.split.name) for p in challenge.phases.all()]) == (
        "test", "Example error test", [("test", "test")])
    out = io.StringIO()
    call_command("load_benchmark", str(tmp_path / "c.yaml"), stdout=out)
    assert "up to date; nothing changed" in out.getvalue()  # loading it again changes nothing


def test_the_readmes_challenge_example_is_a_valid_bundle(db, tmp_path):
    """README, "A challenge, pages and method fields": its YAML, with a bundle's head and the pages it names."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = readme.split("### A challenge, pages and method fields")[1].split("```yaml\n")[1].split("```")[0]
    (tmp_path / "vg").mkdir()
    (tmp_path / "vg" / "overview.md").write_text("# Overview")
    (tmp_path / "vg" / "rules.md").write_text("# Rules")
    head = "track: mmscan-vg\ntitle: MMScan VG\nsplits:\n- {name: val, labels: {pending: true}}\n" \
           "- {name: test, labels: {pending: true}}\n"
    (tmp_path / "b.yaml").write_text(head + example)
    bundle = read_bundle(tmp_path / "b.yaml")
    [challenge] = bundle.challenges
    assert [p.split for p in challenge.phases] == ["val", "test"] and list(bundle.pages) == ["overview", "rules"]
    test = next(s for s in bundle.splits if s.name == "test")
    assert test.board_hidden and test.max_published_per_team == 1 and test.limits["team"]["per_day"] == 2
    assert [f["name"] for f in bundle.method_fields] == ["input", "llm"] and bundle.board == {"precision": 2}
