"""The world the permission tests try every route and every hidden row on (``test_permissions``,
``test_hidden_rows``): six roles, published, private, queued and anonymous submissions, a paper row,
an upload in progress, teams and tokens, a host page and an archived challenge.

Test modules take the fixtures with ``world = pytest.fixture(permission_world.world)`` and
``fast_passwords = pytest.fixture(autouse=True)(permission_world.fast_passwords)``.
"""

from __future__ import annotations

import io
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from evaluation_workers.tracks import get_track
from leaderboard.accounts.models import ApiToken, Membership
from leaderboard.accounts.services import do_create_team, do_create_token
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services, uploads
from leaderboard.submissions.models import Method, Submission

ROLES = ("anonymous", "outsider", "staff", "track_maintainer", "member", "owner")
# Who is behind the anonymous entry HiddenNet: none of it may reach a public page, API answer or export.
SECRET = {"team": "Zeta Secret Lab", "slug": "zeta-secret-lab", "authors": "Ada Zetauthor",
          "paper": "https://example.org/zeta-paper", "code": "https://example.org/zeta-code"}
FIXTURE_OF = {"staff": "maintainer"}  # conftest's staff user is called "maintainer" (mallory)


class World:
    """The objects every route is tried on; alice (owner) and bob (member) share alice's team."""

    def __init__(self, users: dict[str, AbstractBaseUser], files: dict[str, Any], django_user_model: Any) -> None:
        from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows
        from tests.leaderboard.conftest import describe_method

        owner = users["owner"]
        self.users, self.predictions, self.n = users, files["predictions"].read_bytes(), 0
        result = get_track("sqa3d").score(files["labels"], files["predictions"], lambda f, m="": None)

        def scored(name: str) -> Submission:
            s = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                                 file=io.BytesIO(self.predictions), file_name="p.json")
            lifecycle.record_result(submission_id=s.pk, attempt=1, result=result)
            describe_method(s.method)
            return Submission.objects.select_related("method").get(pk=s.pk)

        self.published, self.finished = scored("PublicNet"), scored("PrivateNet")
        type(self.published.method).objects.filter(pk=self.published.method_id).update(
            paper_url="https://example.org/paper")
        services.check_publish(owner, self.published)
        self.entry = LeaderboardEntry.objects.get(method=self.published.method)
        load_bundled_paper_rows("sqa3d")
        self.paper_entry = LeaderboardEntry.objects.filter(is_paper=True).first()
        self.queued = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="Q",
                                                       file=io.BytesIO(self.predictions), file_name="p.json")
        self.upload = uploads.check_start_upload(user=owner, track="sqa3d", split="test", method_name="Big",
                                                 file_name="p.json", size=5000)
        self.part_url = self.signed_part_url(self.upload, 1)
        self.owner_token = ApiToken.objects.get(prefix=do_create_token(owner).split("_")[1])
        self.lab = do_create_team(owner, "Lab")
        self.dave = django_user_model.objects.create_user("dave", password="x")
        Membership.objects.create(team=self.lab, user=users["member"])
        Membership.objects.create(team=self.lab, user=self.dave)
        # HiddenNet: published by alice's "Zeta Secret Lab" (bob a member too) as Anonymous (under review).
        self.secret_lab = do_create_team(owner, SECRET["team"])
        Membership.objects.create(team=self.secret_lab, user=users["member"])
        hidden = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="HiddenNet",
                                                  file=io.BytesIO(self.predictions), file_name="p.json",
                                                  team=self.secret_lab)
        lifecycle.record_result(submission_id=hidden.pk, attempt=1, result=result)
        Method.objects.filter(pk=hidden.method_id).update(
            description="Under double-blind review.", authors=SECRET["authors"], uses_extra_data=False,
            paper_url=SECRET["paper"], code_url=SECRET["code"])
        services.check_publish(owner, hidden, anonymous=True)
        self.anonymous = Submission.objects.select_related("method").get(pk=hidden.pk)
        self.anonymous_entry = LeaderboardEntry.objects.get(method=self.anonymous.method)
        self._challenge()

    def _challenge(self) -> None:
        """A host page and a challenge on sqa3d/test whose final board was archived (with HiddenNet on it),
        the split open again afterwards for the other routes."""
        from datetime import timedelta

        from django.utils import timezone

        from leaderboard.benchmarks.models import Benchmark, Challenge, Phase, Split
        from leaderboard.rankings.archive import do_archive

        split = Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")
        Benchmark.objects.filter(pk=split.benchmark_id).update(pages={"rules": "# Rules\n\nBe fair."})
        self.challenge = Challenge.objects.create(benchmark=split.benchmark, name="sqa3d-2026", title="SQA3D 2026",
                                                  post_challenge=False)
        Phase.objects.create(challenge=self.challenge, order=0, name="test", title="Test", split=split)
        Split.objects.filter(pk=split.pk).update(deadline=timezone.now() - timedelta(hours=1))
        do_archive(self.challenge)
        Split.objects.filter(pk=split.pk).update(deadline=None)

    def counter(self) -> int:
        self.n += 1
        return self.n

    @staticmethod
    def signed_part_url(upload: Any, number: int) -> str:
        url = uploads.part_urls(upload, [number], lambda n, sig: f"/api/v1/uploads/{upload.submission_id}/parts/"
                                                                   f"{n}?signature={sig}")[0]["url"]
        return str(url)


def fast_passwords(settings):
    """Six users a test: a fast hasher keeps the matrix quick (passwords are not what it tests)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def world(request, owner, member, outsider, maintainer, track_maintainer, sqa3d_split, sqa3d_files,
          small_parts, sent_tasks, settings, django_user_model):
    settings.QUOTA_PER_DAY = settings.QUOTA_IN_FLIGHT = settings.QUOTA_TOTAL = 100
    users = {role: request.getfixturevalue(FIXTURE_OF.get(role, role)) for role in ROLES if role != "anonymous"}
    return World(users, sqa3d_files, django_user_model)


def client_for(w: World, role: str, api: bool) -> tuple[Client, dict[str, str]]:
    client = Client()
    if role == "anonymous":
        return client, {}
    if api:
        return client, {"Authorization": f"Token {do_create_token(w.users[role])}"}
    client.force_login(w.users[role])
    return client, {}


def still_anonymous(w: Any) -> bool:
    return bool(Method.objects.get(pk=w.anonymous.method_id).is_anonymous)
