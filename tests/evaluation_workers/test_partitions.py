"""Public/private partitions in the scoring core: a partition is drawn by scene, and each part's
result equals scoring its scenes' units on their own (the labels and predictions filtered to them),
intervals included (same seed, its own scenes resampled), for every track; partition results hold
no counts and no per-class details."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation_workers import partitions
from evaluation_workers.errors import LabelsError
from evaluation_workers.synthetic.mmscan_vg import make_data
from evaluation_workers.tracks import get_track

RESAMPLES = 30


def quiet(fraction: float, message: str = "") -> None:
    pass


def _flat(result: dict[str, Any]) -> dict[str, Any]:
    out = dict(result["metrics"])
    for group, row in result["breakdown"].items():
        out.update({f"{group}/{k}": v for k, v in row.items() if k != "count"})
    return out


def _same(partitioned: dict[str, Any], alone: dict[str, Any]) -> None:
    """The partition's numbers are those of its units scored on their own (the intervals too)."""
    want = _flat(alone)
    assert set(_flat(partitioned)) == set(want)
    for key, value in _flat(partitioned).items():
        assert value == pytest.approx(want[key], abs=1e-12) if want[key] is not None else value is None, key
    assert set(partitioned["intervals"]) == set(alone["intervals"])
    for key, interval in partitioned["intervals"].items():
        assert interval == (pytest.approx(alone["intervals"][key], abs=1e-12) if interval else None), key
    assert partitioned["bootstrap"] == alone["bootstrap"]


def _private_parts(result: dict[str, Any], name: str) -> None:
    """What a partition result may say: aggregate metrics; no counts, no per-class values."""
    assert result["partition"] == name and result["details"] == {"partition": name}
    assert all("count" not in row for row in result["breakdown"].values())


@pytest.fixture(autouse=True)
def _resampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", str(RESAMPLES))
    monkeypatch.setenv("EVAL_BOOTSTRAP_MIN_SCENES", "1")  # intervals however few the scenes: exactness here


def _sqa3d_data(tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]], list[dict[str, Any]]]:
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "sqa3d", "--out", str(tmp_path / "d"),
                    "--questions", "120", "--accuracy", "0.5"], check=True, capture_output=True)
    labels, preds = tmp_path / "d" / "labels", tmp_path / "d" / "predictions.json"
    questions = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    annotations = json.loads(next(labels.glob("v1_balanced_sqa_annotations_*")).read_text())["annotations"]
    return labels, preds, questions, annotations


def test_sqa3d_partitions_score_like_their_scenes_alone(tmp_path: Path) -> None:
    labels, preds, questions, annotations = _sqa3d_data(tmp_path)
    track = get_track("sqa3d")
    scenes = sorted({q["scene_id"] for q in questions})
    public = set(scenes[::3])
    (labels / partitions.PARTITION_FILE).write_text("# public scenes\n" + "\n".join(sorted(public)))
    scene_of = {q["question_id"]: q["scene_id"] for q in questions}

    public_result, private_result = partitions.score(track, labels, preds, quiet)
    assert public_result["bootstrap"]["units"] == len(public)  # its own scenes resampled
    assert private_result["bootstrap"]["units"] == len(scenes) - len(public)
    for result, name, keep in ((public_result, "public", lambda q: scene_of[q] in public),
                               (private_result, "private", lambda q: scene_of[q] not in public)):
        _private_parts(result, name)
        alone = tmp_path / name
        alone.mkdir()
        (alone / "v1_balanced_questions_test_scannetv2.json").write_text(json.dumps(
            {"questions": [q for q in questions if keep(q["question_id"])]}))
        (alone / "v1_balanced_sqa_annotations_test_scannetv2.json").write_text(json.dumps(
            {"annotations": [a for a in annotations if keep(a["question_id"])]}))
        (alone / "p.json").write_text(json.dumps([p for p in json.loads(preds.read_text())
                                                  if keep(p["question_id"])]))
        _same(result, track.score(alone, alone / "p.json", quiet))
    # Scored without the partition, the labels give the one result over every question.
    (labels / partitions.PARTITION_FILE).unlink()
    [whole] = partitions.score(track, labels, preds, quiet)
    assert "partition" not in whole and whole["breakdown"]["What"]["count"] > 0


def test_a_partition_of_question_ids_is_read_where_it_keeps_scenes_whole(tmp_path: Path) -> None:
    """Partitions written before they were by scene list units: whole scenes are still read alike; a
    partition that splits a scene is refused (a maintainer's error, never the submitter's)."""
    labels, preds, questions, _ = _sqa3d_data(tmp_path)
    track = get_track("sqa3d")
    scenes = sorted({q["scene_id"] for q in questions})
    public = set(scenes[::3])
    (labels / partitions.PARTITION_FILE).write_text("\n".join(sorted(public)))
    by_scene = partitions.score(track, labels, preds, quiet)
    (labels / partitions.PARTITION_FILE).write_text("\n".join(str(q["question_id"]) for q in questions
                                                              if q["scene_id"] in public))
    by_unit = partitions.score(track, labels, preds, quiet)
    drop = lambda r: {k: v for k, v in r.items() if k != "labels_sha256"}  # noqa: E731 - the file is in the checksum
    assert [drop(r) for r in by_unit] == [drop(r) for r in by_scene]
    (labels / partitions.PARTITION_FILE).write_text("\n".join(str(q["question_id"]) for q in questions[::2]))
    with pytest.raises(LabelsError, match="wholly public or wholly private"):
        partitions.score(track, labels, preds, quiet)


def test_mmscan_partitions_score_like_their_prompts_alone(tmp_path: Path) -> None:
    labels, preds = make_data(50, seed=5, min_preds=0, max_preds=10, max_gt=4, empty_fraction=0.1,
                              objects_per_scene=6)
    folder = tmp_path / "labels"
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps(labels))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    scans = sorted({lab["scan_id"] for lab in labels})
    public_scans = set(scans[1::2])
    (folder / partitions.PARTITION_FILE).write_text("\n".join(sorted(public_scans)))
    public = {lab["sample_id"] for lab in labels if lab["scan_id"] in public_scans}
    track = get_track("mmscan-vg")
    results = partitions.score(track, folder, tmp_path / "p.json", quiet)
    for result, name in zip(results, ("public", "private")):
        _private_parts(result, name)
        keep = (lambda s: s in public) if name == "public" else (lambda s: s not in public)
        (tmp_path / f"{name}-l.json").write_text(json.dumps([lab for lab in labels if keep(lab["sample_id"])]))
        (tmp_path / f"{name}-p.json").write_text(json.dumps([p for p in preds if keep(p["sample_id"])]))
        _same(result, track.score(tmp_path / f"{name}-l.json", tmp_path / f"{name}-p.json", quiet))


def test_openscan_partitions_score_like_their_scenes_alone(tmp_path: Path) -> None:
    data = tmp_path / "d"
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "openscan", "--out", str(data),
                    "--scenes", "7", "--points", "5000", "--instances", "3", "7", "--masks", "10",
                    "--aspects", "material", "manner", "--semantic", "--format", "official"],
                   check=True, capture_output=True)
    scenes = sorted({p.stem for p in (data / "labels" / "gt").glob("*/*.txt")})
    public = set(scenes[::2])
    (data / "labels" / partitions.PARTITION_FILE).write_text("\n".join(sorted(public)))
    track = get_track("openscan")
    results = partitions.score(track, data / "labels", data / "predictions.zip", quiet)
    with zipfile.ZipFile(data / "predictions.zip") as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    for result, name in zip(results, ("public", "private")):
        _private_parts(result, name)
        keep = (lambda s: s in public) if name == "public" else (lambda s: s not in public)
        folder = tmp_path / name
        (folder / "gt").mkdir(parents=True)
        shutil.copy(data / "labels" / "vocabulary.json", folder / "vocabulary.json")
        for gt in (data / "labels" / "gt").glob("*/*.txt"):
            if keep(gt.stem):
                (folder / "gt" / gt.parent.name).mkdir(exist_ok=True)
                shutil.copy(gt, folder / "gt" / gt.parent.name / gt.name)
        with zipfile.ZipFile(folder / "p.zip", "w") as zf:
            for member, blob in members.items():
                if keep(Path(member).stem):
                    zf.writestr(member, blob)
        _same(result, track.score(folder, folder / "p.zip", quiet))


def test_intervals_of_a_partition_are_off_when_resampling_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", "0")
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "sqa3d", "--out", str(tmp_path / "d"),
                    "--questions", "40"], check=True, capture_output=True)
    labels = tmp_path / "d" / "labels"
    questions = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    scene = questions[0]["scene_id"]
    (labels / partitions.PARTITION_FILE).write_text(scene)
    public, private = partitions.score(get_track("sqa3d"), labels, tmp_path / "d" / "predictions.json", quiet)
    assert "intervals" not in public and "intervals" not in private
    in_scene = sum(q["scene_id"] == scene for q in questions)
    assert public["metrics"]["EM"] * in_scene == pytest.approx(round(public["metrics"]["EM"] * in_scene))


def test_partitions_are_scored_when_the_intervals_are_deferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split too large for inline intervals (``bootstrap.deferred``) still gets its public and private
    results, with the same metrics; neither holds intervals nor a deferred marker (the follow-up
    resamples every unit, so it never fills a partition's)."""
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "sqa3d", "--out", str(tmp_path / "d"),
                    "--questions", "60", "--accuracy", "0.5"], check=True, capture_output=True)
    labels, preds = tmp_path / "d" / "labels", tmp_path / "d" / "predictions.json"
    scenes = sorted({q["scene_id"] for q in json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())
                     ["questions"]})
    (labels / partitions.PARTITION_FILE).write_text("\n".join(scenes[::2]))
    inline = partitions.score(get_track("sqa3d"), labels, preds, quiet)
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    kept: dict[str, Any] = {}
    deferred = partitions.score(get_track("sqa3d"), labels, preds, quiet, outcomes=kept)
    assert [r["partition"] for r in deferred] == ["public", "private"]
    for late, now in zip(deferred, inline):
        assert late["metrics"] == now["metrics"] and late["breakdown"] == now["breakdown"]
        assert "intervals" not in late and "bootstrap" not in late and "intervals" in now
    assert kept["em"].shape == (60,)  # the outcomes of every question, for paired tests


def test_check_partition_refuses_unknown_ids_and_one_sided_subsets() -> None:
    manifest = {"question_ids": [1, 2, 3, 4], "scenes": ["s1", "s2", "s3"]}
    assert partitions.check_partition("sqa3d", manifest, partitions.parse("s1\n# c\n s2 # two\n")) == {"s1", "s2"}
    with pytest.raises(LabelsError, match=r"scene ids of the labels .* 1 are not \(first: '1'\)"):
        partitions.check_partition("sqa3d", manifest, {"s1", "1"})
    with pytest.raises(LabelsError, match="some of the 3 scenes and not all"):
        partitions.check_partition("sqa3d", manifest, {"s1", "s2", "s3"})
    with pytest.raises(LabelsError, match="some of the 3 scenes"):
        partitions.check_partition("sqa3d", manifest, set())
    with pytest.raises(LabelsError, match="load them again"):
        partitions.check_partition("sqa3d", {"question_ids": [1, 2]}, {"1"})
    assert partitions.manifest_scenes("openscan", {"scenes": {"scene0001_00": 10}}) == ["scene0001_00"]


def test_a_partition_mask_is_a_resample_of_weight_one_on_its_units() -> None:
    """The filter itself: the statistic of a 0/1 row is the partition's exact metric."""
    from evaluation_workers.metrics import bootstrap
    from evaluation_workers.tracks.sqa3d import outcomes_statistic

    em = np.array([1, 0, 1, 1, 0, 0], dtype=bool)
    outcomes = {"em": em, "em_r": em, "type": np.zeros(6, dtype=np.int64)}
    units = bootstrap.Units(statistic=outcomes_statistic(outcomes), ids=[str(i) for i in range(6)], unit="question",
                            scenes=np.arange(6), scene_names=[f"s{i}" for i in range(6)])
    result = {"track": "sqa3d", "metrics": {"EM": 0.5, "EM_R": 0.5}, "breakdown": {"What": {"EM": 0.5, "count": 6}},
              "details": {"answered": 6}, "warnings": []}
    public, private = partitions.split_result(result, [units], partitions.Partition(frozenset({"s0", "s1", "s2"})))
    assert public["metrics"]["EM"] == pytest.approx(2 / 3) and private["metrics"]["EM"] == pytest.approx(1 / 3)
    assert public["breakdown"] == {"What": {"EM": pytest.approx(2 / 3)}}
    with pytest.raises(ValueError, match="name its units once"):
        partitions.split_result(result, [], partitions.Partition(frozenset({"0"})))
