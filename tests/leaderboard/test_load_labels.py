"""load_labels: hidden labels go to the worker-only store, versioned by checksum."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from django.core.management import CommandError, call_command

from evaluation_workers.results import sha256_tree
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.benchmarks.models import LabelSet
from leaderboard.submissions.models import Submission
from tests.leaderboard.conftest import publish, scored_submission


@pytest.fixture(autouse=True)
def benchmarks(db):
    """The repository's benchmarks and splits (load_labels loads labels for a split that exists)."""
    load_bundled_benchmarks()


def answers_of(labels_dir) -> set[str]:
    [annotations] = labels_dir.glob("*annotations*")
    return {a["answer"] for q in json.loads(annotations.read_text())["annotations"] for a in q["answers"]}


def test_it_stores_labels_under_labels_dir_and_only_public_facts_in_the_database(db, sqa3d_files, settings,
                                                                                  capsys):
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    label_set = LabelSet.objects.get()
    assert label_set.is_active and label_set.sha256 == sha256_tree(sqa3d_files["labels"])
    stored = settings.LABELS_DIR / label_set.storage_key
    assert sha256_tree(stored) == label_set.sha256
    manifest_text = json.dumps(label_set.manifest)
    assert label_set.manifest["count"] == 300
    leaked = [a for a in answers_of(sqa3d_files["labels"]) if f'"{a}"' in manifest_text]
    assert leaked == []
    assert "Loaded labels" in capsys.readouterr().out


def test_new_labels_make_a_new_version_and_old_results_keep_theirs(db, sqa3d_files, tmp_path):
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    first = LabelSet.objects.get()
    changed = tmp_path / "labels"
    shutil.copytree(sqa3d_files["labels"], changed)
    [annotations] = changed.glob("*annotations*")
    data = json.loads(annotations.read_text())
    data["annotations"][0]["answers"][0]["answer"] = "a different answer"
    annotations.write_text(json.dumps(data))
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(changed))
    first.refresh_from_db()
    second = LabelSet.objects.get(is_active=True)
    assert not first.is_active and second.sha256 != first.sha256
    # Loading the first version again re-activates it rather than copying it twice.
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    assert LabelSet.objects.count() == 2 and LabelSet.objects.get(is_active=True).pk == first.pk


def test_it_refuses_an_unknown_split_or_a_bad_folder(db, tmp_path):
    with pytest.raises(CommandError, match="No split sqa3d/nope"):
        call_command("load_labels", "--track", "sqa3d", "--split", "nope", str(tmp_path))
    with pytest.raises(CommandError, match="Expected exactly one"):
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(tmp_path))
    assert not LabelSet.objects.exists()


def test_load_demo_is_idempotent(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    call_command("load_demo")
    call_command("load_demo")
    assert LabelSet.objects.filter(split__benchmark__track="sqa3d").count() == 1


def test_a_partition_is_stored_with_the_labels_for_workers_only_and_is_part_of_the_version(
        db, sqa3d_files, settings, tmp_path, capsys):
    """``--partition``: the public subset's scene ids go beside the labels, never to the database."""
    questions = json.loads(next(sqa3d_files["labels"].glob("*questions*")).read_text())["questions"]
    public = sorted({q["scene_id"] for q in questions})[::3]
    partition = tmp_path / "public.txt"
    partition.write_text("# the public third\n" + "\n".join(public) + "\n")
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]),
                 "--partition", str(partition))
    assert "with a public subset" in capsys.readouterr().out
    label_set = LabelSet.objects.get()
    stored = settings.LABELS_DIR / label_set.storage_key
    assert label_set.has_partition and (stored / "partition.txt").read_text().split() == public
    assert sha256_tree(stored) == label_set.sha256 != sha256_tree(sqa3d_files["labels"])
    assert not any(q in json.dumps(label_set.manifest) for q in ('"public"', "partition"))
    assert label_set.manifest["scenes"] == sorted({q["scene_id"] for q in questions})  # as the questions file says

    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    assert LabelSet.objects.get(is_active=True).has_partition is False  # without it: another version
    assert LabelSet.objects.count() == 2


def test_a_partition_with_unknown_ids_or_every_scene_is_refused(db, sqa3d_files, tmp_path):
    partition = tmp_path / "public.txt"
    questions = json.loads(next(sqa3d_files["labels"].glob("*questions*")).read_text())["questions"]
    partition.write_text(f"{questions[0]['question_id']}\n")  # a question id: partitions are drawn by scene
    with pytest.raises(CommandError, match=rf"scene ids of the labels .* 1 are not \(first: '{questions[0]['question_id']}'\)"):
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]),
                     "--partition", str(partition))
    scenes = sorted({q["scene_id"] for q in questions})
    partition.write_text("\n".join(scenes))
    with pytest.raises(CommandError, match=f"some of the {len(scenes)} scenes and not all"):
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]),
                     "--partition", str(partition))
    assert not LabelSet.objects.exists()


def changed_copy(labels, dest):
    """A copy of the SQA3D labels ``labels`` with one answer changed (another version)."""
    shutil.copytree(labels, dest)
    [annotations] = dest.glob("*annotations*")
    data = json.loads(annotations.read_text())
    data["annotations"][0]["answers"][0]["answer"] = "a different answer"
    annotations.write_text(json.dumps(data))
    return dest


def test_new_labels_under_published_results_follow_the_bundles_rule(owner, sqa3d_split, sqa3d_files, sent_tasks,
                                                                    settings, tmp_path,
                                                                    django_capture_on_commit_callbacks):
    """Refused without --allow-rescore, naming the split and the published results, with nothing
    changed or left behind; the same labels again change nothing and pass; with the flag they are
    loaded and the split's submissions queued (what the rows show then: ``test_result_state``)."""
    submission = scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "CacheNet")
    publish(owner, submission, django_capture_on_commit_callbacks)
    before = sorted(p.name for p in (settings.LABELS_DIR / "sqa3d" / "test").iterdir())
    changed = changed_copy(sqa3d_files["labels"], tmp_path / "labels")
    with pytest.raises(CommandError) as refused:
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(changed))
    new = sha256_tree(changed)
    assert str(refused.value) == (f"sqa3d/test: refused: new labels {new[:12]} would re-score 1 published result: "
                                  "CacheNet (load them again with --allow-rescore to replace the labels and re-score "
                                  "the split)")
    assert LabelSet.objects.get(split=sqa3d_split, is_active=True).sha256 == sha256_tree(sqa3d_files["labels"])
    assert LabelSet.objects.filter(split=sqa3d_split).count() == 1
    assert sorted(p.name for p in (settings.LABELS_DIR / "sqa3d" / "test").iterdir()) == before
    sent_tasks.clear()
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    assert sent_tasks == [] and Submission.objects.get(pk=submission.pk).status == "finished"

    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(changed), "--allow-rescore",
                     stdout=out)
    assert LabelSet.objects.get(split=sqa3d_split, is_active=True).sha256 == new
    assert out.getvalue().startswith(f"Loaded labels {new} for sqa3d/test (300 questions in ")
    assert "; 1 submission queued to be re-scored on them (published rows show 'awaiting re-score'" in out.getvalue()
    [request] = sent_tasks
    assert request["kwargs"]["submission_id"] == submission.pk and request["queue"].endswith("-bulk")


def test_labels_whose_rescore_cannot_be_queued_leave_nothing_behind(db, sqa3d_files, settings, tmp_path, monkeypatch):
    from leaderboard.benchmarks.management.commands import load_labels

    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    kept = LabelSet.objects.get()

    def broken(split, previous):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(load_labels, "do_new_labels", broken)
    changed = changed_copy(sqa3d_files["labels"], tmp_path / "labels")
    with pytest.raises(RuntimeError):
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(changed))
    assert list(LabelSet.objects.values_list("pk", "is_active")) == [(kept.pk, True)]
    assert (settings.LABELS_DIR / kept.storage_key).is_dir()
    assert not (settings.LABELS_DIR / "sqa3d" / "test" / sha256_tree(changed)).exists()
