"""Benchmark bundles: one YAML file declares a benchmark; ``manage.py load_benchmark`` loads it,
idempotently, audited, refusing what would re-score or hide published results unless asked."""

from __future__ import annotations

import io
import json
import re
import shutil
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from evaluation_workers.tracks import names
from leaderboard.benchmarks.bundles import (
    BUNDLES_DIR,
    BundleError,
    bundled_paths,
    parse_bundle,
    read_bundle,
    schema,
)
from leaderboard.benchmarks.models import Benchmark, LabelSet, Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.selectors import LeaderboardView
from leaderboard.submissions.models import SplitLimit
from tests.leaderboard.conftest import publish

SQA3D = (BUNDLES_DIR / "sqa3d.yaml").read_text()
SYNTHETIC = "  labels:\n    synthetic: true\n"


def load(path, *args):
    out = io.StringIO()
    call_command("load_benchmark", str(path), *args, stdout=out)
    return out.getvalue()


def problems(text, tmp_path, name="b.yaml"):
    with pytest.raises(BundleError) as caught:
        parse_bundle(text, tmp_path / name)
    return caught.value.problems


def line_of(text, needle):
    return text.splitlines().index(needle) + 1


@pytest.fixture
def bundle(tmp_path, sqa3d_files):
    """The repository's SQA3D bundle with real labels (a folder beside it) and team limits."""
    shutil.copytree(sqa3d_files["labels"], tmp_path / "labels")
    text = SQA3D.replace(SYNTHETIC, "  labels:\n    source: labels\n  limits:\n    team:\n      per_day: 3\n")
    path = tmp_path / "sqa3d.yaml"
    path.write_text(text)
    return path


def test_the_repositorys_bundles_validate_against_the_schema_and_the_tracks():
    bundles = [read_bundle(p) for p in bundled_paths()]
    assert sorted(b.track for b in bundles) == sorted(names())
    mmscan = read_bundle(BUNDLES_DIR / "mmscan-vg.yaml")
    assert [(s.name, s.default, s.labels.kind) for s in mmscan.splits] == [
        ("val", True, "synthetic"), ("test", False, "pending")]
    assert mmscan.description.startswith("3D visual grounding")  # absent: the track's own


def test_a_bundle_loaded_twice_changes_nothing_the_second_time(db, bundle):
    first = load(bundle)
    assert "create benchmark sqa3d" in first and "add paper row 'Human (amateur)'" in first
    split = Split.objects.get(benchmark__track="sqa3d", name="test")
    assert split.is_default and split.active_labels is not None
    assert SplitLimit.objects.get(split=split, scope="team").per_day == 3
    assert LeaderboardEntry.objects.filter(split=split, is_paper=True).count() == 11
    entry = AuditEntry.objects.get(action="load_benchmark")
    assert entry.track == "sqa3d" and entry.actor_name == "manage.py load_benchmark"
    assert "create split sqa3d/test" in entry.details["changes"]
    assert load(bundle) == "sqa3d: up to date; nothing changed.\n"
    assert AuditEntry.objects.count() == 1 and LabelSet.objects.count() == 1


def test_dry_run_prints_the_changes_and_writes_nothing(db, bundle):
    out = load(bundle, "--dry-run")
    assert "would change (dry run, nothing written)" in out and "create split sqa3d/test" in out
    assert not Benchmark.objects.exists() and not LabelSet.objects.exists() and not AuditEntry.objects.exists()


def test_a_wrong_key_is_named_with_its_line(tmp_path):
    text = SQA3D.replace("  default: true\n", "  default: true\n  deadline: 2030-01-01\n")
    [problem] = problems(text, tmp_path)
    assert problem.startswith(f"b.yaml:{line_of(text, '  deadline: 2030-01-01')}: splits[0].deadline: unknown key "
                              f"'deadline'; expected one of: name, description, default, labels")


def test_dates_in_the_wrong_order_are_refused(tmp_path):
    text = SQA3D.replace(SYNTHETIC, SYNTHETIC + "  phases:\n    starts_at: 2030-03-01\n"
                                                "    freeze_at: 2030-02-01T12:00:00Z\n    deadline: 2030-04-01\n")
    [problem] = problems(text, tmp_path)
    assert problem == (f"b.yaml:{line_of(text, '    freeze_at: 2030-02-01T12:00:00Z')}: splits[0].phases.freeze_at: "
                       f"expected freeze_at after starts_at (starts_at < freeze_at <= deadline), but got starts_at "
                       f"2030-03-01 00:00 and freeze_at 2030-02-01 12:00 UTC")


def test_an_unknown_track_names_the_installed_ones(tmp_path):
    [problem] = problems(SQA3D.replace("track: sqa3d", "track: scanqa"), tmp_path)
    assert problem == f"b.yaml:{line_of(SQA3D, 'track: sqa3d')}: track: unknown track 'scanqa'; installed: " + \
        ", ".join(names())


def test_a_split_without_labels_and_other_mistakes_are_each_named(tmp_path):
    text = SQA3D.replace(SYNTHETIC, "").replace("splits:\n", "splits:\n- name: val\n  default: true\n  labels:\n"
                                                            "    source: nowhere\n")
    found = problems(text, tmp_path)
    assert found == [f"b.yaml:{line_of(text, '- name: test')}: splits[1].labels: missing; it is required here "
                     f"(split 'test')"]
    text = text.replace("- name: test\n", "- name: test\n  labels:\n    pending: true\n")
    found = problems(text.replace("- split: test", "- split: dev"), tmp_path)
    assert found == [f"b.yaml:{line_of(text, '    source: nowhere')}: splits[0].labels.source: "
                     f"{tmp_path / 'nowhere'} does not exist",
                     f"b.yaml:{line_of(text, '- name: test') + 3}: splits[1].default: two default splits: val, test; "
                     f"expected one",
                     f"b.yaml:{line_of(text, '- split: test')}: paper_rows[0].split: split 'dev' is not declared in "
                     f"splits (test, val)"]


def test_a_change_that_would_hide_or_rescore_published_results_is_refused_with_them(
        owner, bundle, scored, sent_tasks, django_capture_on_commit_callbacks):
    load(bundle)
    publish(owner, scored, django_capture_on_commit_callbacks)
    later = bundle.read_text().replace("  limits:\n", "  results_visible_after: 2099-01-01\n  labels_public: false\n"
                                                      "  limits:\n")
    bundle.write_text(later)
    annotations = next((bundle.parent / "labels").glob("*annotations*"))
    data = json.loads(annotations.read_text())
    data["annotations"][0]["answers"][0]["answer"] = "a different answer"
    annotations.write_text(json.dumps(data))
    with pytest.raises(CommandError) as refused:
        load(bundle)
    message = str(refused.value)
    assert "refused: these changes would re-score or hide published results" in message
    assert "split sqa3d/test: results_visible_after None -> 2099-01-01 00:00 UTC: 1 published result: CacheNet" \
        in message
    assert "split sqa3d/test: load labels " in message and message.count("1 published result: CacheNet") == 2
    split = Split.objects.get(benchmark__track="sqa3d", name="test")
    assert split.results_visible_after is None and LabelSet.objects.filter(split=split).count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        out = load(bundle, "--allow-rescore")
    split.refresh_from_db()
    assert split.results_visible_after == datetime(2099, 1, 1, tzinfo=UTC)
    assert LabelSet.objects.filter(split=split).count() == 2 and "1 submissions queued to be re-scored" in out
    assert AuditEntry.objects.filter(action="load_benchmark").first().details["allow_rescore"] is True


def test_a_dropped_split_without_submissions_is_removed_and_the_board_view_is_the_bundles(db, tmp_path):
    # Its splits and paper rows; not its demo challenge, pages and method fields (a challenge names the test split).
    text = re.sub(r"\n    fields: \{.*\}", "", (BUNDLES_DIR / "mmscan-vg.yaml").read_text().split("# A small challenge")[0])
    path = tmp_path / "mmscan-vg.yaml"
    path.write_text(text + "board:\n  metric: gTop-1@0.5\n  sort: OR/gTop-1@0.5\n")
    load(path)
    split = Split.objects.select_related("benchmark").get(benchmark__track="mmscan-vg", name="val")
    view = LeaderboardView.from_query(split, {})
    assert (view.metric, view.sort) == ("gTop-1@0.5", "OR/gTop-1@0.5")
    assert LeaderboardView.from_query(split, {"metric": "AR@0.25"}).sort == "AR@0.25"
    path.write_text(text.replace("- name: test\n  labels:\n    pending: true\n", ""))
    out = load(path)
    assert "remove split mmscan-vg/test (no submissions" in out and "board {'metric': 'gTop-1@0.5', 'sort': 'OR/gTop-1@0.5'} -> {}" in out
    assert list(Split.objects.filter(benchmark__track="mmscan-vg").values_list("name", flat=True)) == ["val"]


def test_the_board_shows_the_bundles_group_columns_and_chart(db, client, tmp_path):
    path = tmp_path / "sqa3d.yaml"
    path.write_text(SQA3D + "board:\n  groups: [Is, What]\n  chart: radar\n")
    load(path)
    split = Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")
    view = LeaderboardView.from_query(split, {"iou": "x"})
    assert view.columns == ["EM", "Is/EM", "What/EM"] and view.headers == ["Overall", "Is", "What"]
    assert LeaderboardView.from_query(split, {"metric": "EM_R"}).columns == ["EM_R", "Is/EM_R", "What/EM_R"]
    assert split.benchmark.chart == "radar"
    page = client.get("/benchmarks/sqa3d/").content.decode()
    assert ">Is<" in page and ">Which<" not in page
    assert problems(SQA3D + "board:\n  groups: [Is, Where]\n", tmp_path) == [
        f"b.yaml:{SQA3D.count(chr(10)) + 2}: board.groups: unknown group 'Where'; sqa3d has: What, Is, How, Can, "
        "Which, Others"]
    assert problems(SQA3D + "board:\n  chart: pie\n", tmp_path) == [
        f"b.yaml:{SQA3D.count(chr(10)) + 2}: board.chart: 'pie' is not one of ['bars', 'radar']"]


def test_the_schema_is_served_at_a_stable_address(client):
    response = client.get("/schemas/benchmark-bundle.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/schema+json"
    assert json.loads(response.content) == schema()
    assert schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_readmes_example_bundle_validates(tmp_path):
    readme = (BUNDLES_DIR.parents[2] / "README.md").read_text()
    example = readme.split("## Host a benchmark")[1].split("```yaml\n")[1].split("```")[0]
    bundle = parse_bundle("\n".join(line[3:] for line in example.splitlines()), tmp_path / "example.yaml")
    [split] = bundle.splits
    assert (split.labels.kind, split.limits["team"]["per_day"], bundle.board["sort"]) == ("pending", 3, "What/EM")


def test_as_names_the_actor_and_must_maintain_the_track(db, bundle, maintainer, outsider):
    with pytest.raises(CommandError, match="No user 'nobody'"):
        load(bundle, "--as", "nobody")
    with pytest.raises(CommandError, match=f"{outsider.username} is neither staff nor a maintainer of sqa3d"):
        load(bundle, "--as", outsider.username)
    load(bundle, "--as", maintainer.username)
    entry = AuditEntry.objects.get(action="load_benchmark")
    assert (entry.actor, entry.actor_name) == (maintainer, maintainer.username)
    assert Split.objects.get(benchmark__track="sqa3d").active_labels.loaded_by == maintainer.username


def test_load_demo_leaves_a_benchmark_it_may_not_change_and_loads_the_rest(db, settings, tmp_path, owner,
                                                                          scored, django_capture_on_commit_callbacks):
    settings.DATA_DIR = tmp_path
    publish(owner, scored, django_capture_on_commit_callbacks)
    Split.objects.filter(benchmark__track="sqa3d").update(labels_public=True)  # switched on on the desk
    err = io.StringIO()
    call_command("load_demo", stdout=io.StringIO(), stderr=err)
    assert "split sqa3d/test: labels_public True -> False: 1 published result: CacheNet" in err.getvalue()
    assert Split.objects.get(benchmark__track="sqa3d").labels_public
    assert Split.objects.get(benchmark__track="openscan").active_labels is not None
