"""Who may take part (issue 39): a bundle's participation section gates uploads by terms, approval,
e-mail domains and verified addresses; each refusal says what to do in the API, on the form and in
``lb``; the desk approves, denies and bans, audited. Without the section, nothing changes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from leaderboard.accounts.emails import do_mark_verified
from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.bundles import BUNDLES_DIR, BundleError, parse_bundle
from leaderboard.moderation.models import AuditEntry
from leaderboard.participation.models import Participant, Rules, Terms
from leaderboard.participation.terms import short, version_of
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions.models import Submission
from tests.leaderboard import permission_world
from tests.leaderboard.conftest import publish, scored_submission

fast_passwords = pytest.fixture(autouse=True)(permission_world.fast_passwords)

SQA3D = (BUNDLES_DIR / "sqa3d.yaml").read_text()
TERMS = "# Terms of use\n\nUse the test questions for research only. <script>alert(1)</script>\n"


def gated(tmp_path: Path, section: str, terms: str | None = TERMS, extra: str = "") -> Path:
    """The repository's SQA3D bundle with a ``participation`` section (and terms.md beside it)."""
    if terms is not None:
        (tmp_path / "terms.md").write_text(terms)
    path = tmp_path / "sqa3d.yaml"
    path.write_text(SQA3D + "participation:\n" + "".join(f"  {line}\n" for line in section.splitlines()) + extra)
    return path


def load(path: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("load_benchmark", str(path), *args, stdout=out)
    return out.getvalue()


def auth(user) -> dict[str, str]:
    return {"Authorization": f"Token {do_create_token(user)}"}


def upload(client, user, files, method: str = "GateNet"):
    with open(files["predictions"], "rb") as f:
        return client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": method,
                                                   "file": f}, headers=auth(user))


def participation(client, user, body: dict | None = None):
    url = "/api/v1/benchmarks/sqa3d/participation"
    if body is None:
        return client.get(url, headers=auth(user))
    return client.post(url, json.dumps(body), content_type="application/json", headers=auth(user))


def test_without_a_participation_section_anyone_signed_in_submits_as_before(client, owner, sqa3d_split,
                                                                           sqa3d_files, sent_tasks):
    state = participation(client, owner).json()
    assert state | {"email_verified": None} == {
        "track": "sqa3d", "registration": "open", "terms_version": None, "terms_url": None,
        "terms_accepted": False, "accepted_version": None, "accepted_at": None, "state": "approved",
        "verified_email_required": False, "email_domains": [], "email_verified": None, "banned": False,
        "may_submit": True, "refusal": None}
    assert upload(client, owner, sqa3d_files).status_code == 201
    assert "Anyone signed in may submit" in client.get("/benchmarks/sqa3d/terms/").content.decode()
    assert participation(client, owner, {"accept_terms": "abc"}).json()["error"]["message"] == \
        "SQA3D has no terms of use to accept."


def _check_schema(client, body: dict, method: str = "get") -> None:
    """``body`` is what the OpenAPI document says the participation endpoint answers."""
    import jsonschema

    doc = client.get("/api/v1/openapi.json").json()
    operation = doc["paths"]["/api/v1/benchmarks/{track}/participation"][method]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    jsonschema.validate(body, {**schema, "components": doc["components"]})


def test_terms_are_accepted_once_per_version_and_new_terms_ask_again(client, owner, sqa3d_split, sqa3d_files,
                                                                    sent_tasks, tmp_path):
    path = gated(tmp_path, "terms: terms.md")
    version = version_of(TERMS)
    dry = load(path, "--dry-run")
    assert f"participation of sqa3d: registration open; terms {short(version)} from terms.md" in dry
    assert not Rules.objects.exists()
    load(path)
    refused = upload(client, owner, sqa3d_files)
    error = refused.json()["error"]
    assert refused.status_code == 403 and error["code"] == "terms_not_accepted"
    assert error["terms_version"] == version and error["terms_url"] == "http://127.0.0.1:8000/benchmarks/sqa3d/terms/"
    assert error["message"] == (f"Accept the terms of use of SQA3D (version {short(version)}) before submitting: "
                                "read them at http://127.0.0.1:8000/benchmarks/sqa3d/terms/ and accept them there, "
                                "or with `lb participate sqa3d`.")
    assert not Submission.objects.exists(), "refused before anything is stored or counted"
    state = participation(client, owner).json()
    assert (state["terms_version"], state["terms_accepted"], state["may_submit"]) == (version, False, False)
    assert state["refusal"] == {"code": "terms_not_accepted", "message": error["message"],
                                "terms_url": error["terms_url"], "terms_version": version}
    mismatch = participation(client, owner, {"accept_terms": "0" * 64})
    assert mismatch.status_code == 409 and mismatch.json()["error"]["code"] == "terms_version_mismatch"
    assert mismatch.json()["error"]["terms_version"] == version
    accepted = participation(client, owner, {"accept_terms": version}).json()
    assert accepted["terms_accepted"] and accepted["may_submit"] and accepted["accepted_version"] == version
    _check_schema(client, state)
    _check_schema(client, accepted, "post")
    assert upload(client, owner, sqa3d_files).status_code == 201
    # New terms: every participant accepts them again; the earlier acceptance stays on record.
    (tmp_path / "terms.md").write_text(TERMS + "\nCite the SQA3D paper.\n")
    new = version_of(TERMS + "\nCite the SQA3D paper.\n")
    assert (f"terms {short(version)} -> {short(new)} (from terms.md): every participant accepts them again"
            in load(path))
    again = upload(client, owner, sqa3d_files).json()["error"]
    assert again["code"] == "terms_not_accepted" and again["terms_version"] == new
    assert again["message"].startswith("The terms of use of SQA3D changed since you accepted them on ")
    assert Participant.objects.get(user=owner).terms_version == version and Terms.objects.count() == 2
    assert load(path) == "sqa3d: up to date; nothing changed.\n"


def test_the_form_says_the_refusal_before_the_upload_and_the_terms_page_accepts(client, owner, sqa3d_split,
                                                                               sqa3d_files, sent_tasks, tmp_path):
    load(gated(tmp_path, "terms: terms.md"))
    client.force_login(owner)
    page = client.get("/submissions/new/sqa3d/").content.decode()
    assert 'id="participation-refusal" data-code="terms_not_accepted"' in page
    assert "<code>lb participate sqa3d</code>" in page and "disabled" in page
    with open(sqa3d_files["predictions"], "rb") as f:
        posted = client.post("/submissions/new/sqa3d/", {"split": "test", "method_name": "FormNet", "file": f})
    assert posted.status_code == 200 and "Accept the terms of use of SQA3D" in posted.content.decode()
    assert not Submission.objects.exists()
    terms = client.get("/benchmarks/sqa3d/terms/").content.decode()
    assert "<h1>Terms of use</h1>" in terms and "&lt;script&gt;" in terms and "<script>alert" not in terms
    done = client.post("/benchmarks/sqa3d/terms/", {"version": version_of(TERMS)}, follow=True).content.decode()
    assert "You may submit now." in done and 'id="accepted"' in done
    assert 'id="participation-refusal"' not in client.get("/submissions/new/sqa3d/").content.decode()


def test_approval_and_denial_on_the_desk(client, owner, outsider, track_maintainer, sqa3d_split, sqa3d_files,
                                         sent_tasks, tmp_path):
    load(gated(tmp_path, "registration: approval", terms=None))
    first = upload(client, owner, sqa3d_files).json()["error"]
    assert first["code"] == "participation_pending" and "ask to take part at" in first["message"]
    assert participation(client, owner).json()["state"] == "not_requested"
    for user in (owner, outsider):
        assert participation(client, user, {"join": True}).json()["state"] == "pending"
    waiting = upload(client, owner, sqa3d_files).json()["error"]
    assert waiting["code"] == "participation_pending" and "waits for its maintainers' approval" in waiting["message"]
    client.force_login(track_maintainer)
    desk = client.get("/moderation/tracks/sqa3d/participants/").content.decode()
    assert "Requests waiting (2)" in desk
    requests = {p.user_id: p.pk for p in Participant.objects.all()}
    client.post("/moderation/tracks/sqa3d/participants/", {"action": "approve", "participant": requests[owner.pk]})
    no_reason = client.post("/moderation/tracks/sqa3d/participants/",
                            {"action": "deny", "participant": requests[outsider.pk]}, follow=True)
    assert "A reason is required to deny a request" in no_reason.content.decode()
    client.post("/moderation/tracks/sqa3d/participants/",
                {"action": "deny", "participant": requests[outsider.pk], "reason": "not a lab of the challenge"})
    assert upload(client, owner, sqa3d_files).status_code == 201
    denied = upload(client, outsider, sqa3d_files).json()["error"]
    assert denied == {"code": "participation_denied", "message": "The maintainers of SQA3D denied your request to "
                      "take part: not a lab of the challenge. Ask them if you think this is a mistake."}
    assert list(AuditEntry.objects.filter(track="sqa3d", action__in=["approve", "deny"]).order_by("id")
                .values_list("action", "actor_name", "reason")) == [
        ("approve", "trackie", ""), ("deny", "trackie", "not a lab of the challenge")]


def test_domains_and_verified_addresses(client, owner, outsider, sqa3d_split, sqa3d_files, sent_tasks, tmp_path):
    path = gated(tmp_path, "email_domains: {allow: [lab.example.org], block: [spam.example.org]}\n"
                           "verified_email: true", terms=None)
    load(path)
    none = upload(client, owner, sqa3d_files).json()["error"]
    assert none["code"] == "email_domain_not_allowed" and "lab.example.org (or their subdomains) only" in \
        none["message"] and "your account has none" in none["message"]
    owner.email = "alice@inf.lab.example.org"
    owner.save()
    unverified = upload(client, owner, sqa3d_files).json()["error"]
    assert unverified["code"] == "email_not_verified"
    assert "Your address alice@inf.lab.example.org is not verified yet" in unverified["message"]
    do_mark_verified(owner, owner.email)
    assert upload(client, owner, sqa3d_files).status_code == 201
    # A blocked domain is refused, verified or not; with only verified_email an unverified address is not.
    load(gated(tmp_path, "email_domains: {block: [spam.example.org]}", terms=None))
    do_mark_verified(outsider, "charlie@spam.example.org")
    blocked = upload(client, outsider, sqa3d_files).json()["error"]
    assert blocked == {"code": "email_domain_not_allowed", "message": "SQA3D does not accept addresses at "
                       "spam.example.org. Use another address (change it at http://127.0.0.1:8000/accounts/email/, "
                       "then open the link mailed to it)."}
    load(gated(tmp_path, "verified_email: true", terms=None))
    outsider.email = "charlie@elsewhere.example.org"
    outsider.save()
    assert upload(client, outsider, sqa3d_files).json()["error"]["code"] == "email_not_verified"
    assert participation(client, outsider).json()["verified_email_required"] is True


def test_bans_refuse_uploads_and_hide_rows_until_lifted(client, owner, outsider, maintainer, track_maintainer,
                                                        sqa3d_split, sqa3d_files, sent_tasks,
                                                        django_capture_on_commit_callbacks, tmp_path):
    submission = scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "BannedNet")
    publish(owner, submission, django_capture_on_commit_callbacks)
    assert LeaderboardEntry.objects.filter(method=submission.method).exists()
    client.force_login(track_maintainer)
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/moderation/tracks/sqa3d/participants/",
                    {"action": "ban", "username": "alice", "reason": "shared the hidden test answers"})
    assert not LeaderboardEntry.objects.filter(method=submission.method).exists()
    assert "BannedNet" not in client.get("/benchmarks/sqa3d/").content.decode()
    banned = upload(client, owner, sqa3d_files).json()["error"]
    assert banned["code"] == "banned" and "You are banned from SQA3D: shared the hidden test answers." in \
        banned["message"]
    assert client.get("/moderation/bans/").status_code == 403, "every benchmark: staff only"
    client.force_login(maintainer)
    client.post("/moderation/bans/", {"action": "ban", "username": "charlie", "reason": "spam accounts"})
    assert "banned from every benchmark of this site: spam accounts" in upload(client, outsider, sqa3d_files) \
        .json()["error"]["message"]
    ban = owner.bans.get()
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/moderation/tracks/sqa3d/participants/", {"action": "unban", "ban": ban.pk, "reason": "appeal"})
    assert LeaderboardEntry.objects.filter(method=submission.method).exists()
    assert list(AuditEntry.objects.filter(action__in=["ban", "unban"]).order_by("id")
                .values_list("action", "track", "actor_name")) == [
        ("ban", "sqa3d", "trackie"), ("ban", "", "mallory"), ("unban", "sqa3d", "mallory")]
    assert "spam accounts" in client.get("/moderation/audit/").content.decode()
    # The bundle bans too (by username or address), and lifts what it no longer lists.
    banning = gated(tmp_path, "banned: [alice]", terms=None)
    with pytest.raises(CommandError, match=r"would re-score or hide published results .*\n  - participation of "
                                           r"sqa3d: .*banned: alice: 1 published result: BannedNet"):
        load(banning)
    with django_capture_on_commit_callbacks(execute=True):
        assert "banned: alice" in load(banning, "--allow-rescore")
    assert not LeaderboardEntry.objects.filter(method=submission.method).exists()
    assert upload(client, owner, sqa3d_files).json()["error"]["code"] == "banned"
    with django_capture_on_commit_callbacks(execute=True):
        load(gated(tmp_path, "banned: []", terms=None))
    assert LeaderboardEntry.objects.filter(method=submission.method).exists()


def test_a_bad_section_is_named_with_its_line(tmp_path):
    (tmp_path / "outside.md").write_text("x")
    bundle = tmp_path / "b" / "b.yaml"
    bundle.parent.mkdir()
    text = SQA3D + "participation:\n  terms: ../outside.md\n  registration: lottery\n"
    with pytest.raises(BundleError) as caught:
        parse_bundle(text, bundle)
    [problem] = caught.value.problems
    assert problem.startswith("b.yaml:") and "participation.registration" in problem and "lottery" in problem
    text = SQA3D + "participation:\n  terms: ../outside.md\n  invited: [bob]\n"
    with pytest.raises(BundleError) as caught:
        parse_bundle(text, bundle)
    first, second = caught.value.problems
    assert first.startswith(f"b.yaml:{text.splitlines().index('  terms: ../outside.md') + 1}: participation.terms: "
                            "../outside.md (which resolves to ")
    assert "is outside the bundle's folder" in first and "LABELS_SOURCE_ROOTS" in first
    assert "participation.invited: invitations need registration: invite" in second


def test_lb_submit_says_the_refusal_and_lb_participate_accepts_the_terms(live_server, owner, lb_config, capsys,
                                                                        sqa3d_split, sqa3d_files, sent_tasks,
                                                                        tmp_path):
    from leaderboard_cli.main import main

    load(gated(tmp_path, "terms: terms.md"))
    version = short(version_of(TERMS))
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    capsys.readouterr()
    submit = ["-q", "submit", "--track", "sqa3d", "--method", "CliNet", str(sqa3d_files["predictions"])]
    assert main(submit) == 1
    assert capsys.readouterr().err == (f"lb: Accept the terms of use of SQA3D (version {version}) before submitting: "
                                       "read them at http://127.0.0.1:8000/benchmarks/sqa3d/terms/ and accept them "
                                       "there, or with `lb participate sqa3d`.\n")
    assert main(["participate", "sqa3d"]) == 1, "not a terminal: nothing is accepted without --yes"
    captured = capsys.readouterr()
    assert f"(version {version}): http://127.0.0.1:8000/benchmarks/sqa3d/terms/" in captured.out
    assert "accept them with `lb participate sqa3d --yes`" in captured.err
    assert main(["participate", "sqa3d", "--yes"]) == 0
    assert capsys.readouterr().out.endswith(f"Accepted version {version}.\nYou may submit to sqa3d.\n")
    assert main(submit) == 0 and "CliNet (team alice): queued" in capsys.readouterr().out


def test_the_readmes_participation_example_loads_as_a_new_host_writes_it(db, sqa3d_split, sent_tasks, tmp_path):
    readme = (BUNDLES_DIR.parents[2] / "README.md").read_text()
    example = readme.split("### Who may take part, and reaching them")[1].split("```yaml\n")[1].split("```")[0]
    (tmp_path / "terms.md").write_text(TERMS)
    path = tmp_path / "sqa3d.yaml"
    path.write_text(SQA3D + example)
    out = load(path)
    assert (f"participation of sqa3d: registration approval; terms {short(version_of(TERMS))} from terms.md; "
            "verified e-mail addresses only; addresses at ethz.ch, mit.edu only; no addresses at mailinator.com; "
            "banned: spammer, someone@example.org") in out
    assert "announce 'deadline-moved' on sqa3d: 'The deadline moves to 15 June', shown until 2030-06-15" in out
    assert "webhook of sqa3d: post events to https://hooks.example.org/leaderboard" in out


def test_invitations_from_the_bundle_and_the_desk(client, owner, member, outsider, track_maintainer, sqa3d_split,
                                                  sqa3d_files, sent_tasks, tmp_path):
    load(gated(tmp_path, "registration: invite\ninvited: [bob, Charlie@Lab.example.org]", terms=None))
    assert participation(client, member).json()["may_submit"] is True  # bob, by username
    outsider.email = "charlie@lab.example.org"  # typed in, not verified: an address invites nobody then
    outsider.save()
    refused = upload(client, outsider, sqa3d_files).json()["error"]
    assert refused == {"code": "participation_denied", "message": "SQA3D takes part by invitation only, and you are "
                       "not invited: ask its maintainers for an invitation."}
    do_mark_verified(outsider, outsider.email)
    assert upload(client, outsider, sqa3d_files).status_code == 201
    assert participation(client, owner).json()["state"] == "not_invited"
    client.force_login(track_maintainer)
    client.post("/moderation/tracks/sqa3d/participants/", {"action": "invite", "username": "alice"})
    assert upload(client, owner, sqa3d_files).status_code == 201
    assert AuditEntry.objects.filter(action="invite", target="alice in sqa3d", actor_name="trackie").exists()
