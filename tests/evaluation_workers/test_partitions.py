"""Public/private partitions in the scoring core: each partition's result equals scoring its units
on their own (the labels and predictions filtered to them), intervals included (same seed), for
every track; partition results hold no counts and no per-class details."""

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


def test_sqa3d_partitions_score_like_their_questions_alone(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "sqa3d", "--out", str(tmp_path / "d"),
                    "--questions", "120", "--accuracy", "0.5"], check=True, capture_output=True)
    labels, preds = tmp_path / "d" / "labels", tmp_path / "d" / "predictions.json"
    track = get_track("sqa3d")
    questions = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    annotations = json.loads(next(labels.glob("v1_balanced_sqa_annotations_*")).read_text())["annotations"]
    public = {q["question_id"] for i, q in enumerate(questions) if i % 3 == 0}
    (labels / partitions.PARTITION_FILE).write_text("# public questions\n" + "\n".join(map(str, sorted(public))))

    public_result, private_result = partitions.score(track, labels, preds, quiet)
    for result, name, keep in ((public_result, "public", lambda q: q in public),
                               (private_result, "private", lambda q: q not in public)):
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


def test_mmscan_partitions_score_like_their_prompts_alone(tmp_path: Path) -> None:
    labels, preds = make_data(50, seed=5, min_preds=0, max_preds=10, max_gt=4, empty_fraction=0.1,
                              objects_per_scene=6)
    folder = tmp_path / "labels"
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps(labels))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    public = {lab["sample_id"] for i, lab in enumerate(labels) if i % 2}
    (folder / partitions.PARTITION_FILE).write_text("\n".join(sorted(public)))
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
    ids = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    (labels / partitions.PARTITION_FILE).write_text(str(ids[0]["question_id"]))
    public, private = partitions.score(get_track("sqa3d"), labels, tmp_path / "d" / "predictions.json", quiet)
    assert "intervals" not in public and "intervals" not in private
    assert public["metrics"]["EM"] in {0.0, 1.0}  # one question


def test_partitions_are_scored_when_the_intervals_are_deferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split too large for inline intervals (``bootstrap.deferred``) still gets its public and private
    results, with the same metrics; neither holds intervals nor a deferred marker (the follow-up
    resamples every unit, so it never fills a partition's)."""
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "sqa3d", "--out", str(tmp_path / "d"),
                    "--questions", "60", "--accuracy", "0.5"], check=True, capture_output=True)
    labels, preds = tmp_path / "d" / "labels", tmp_path / "d" / "predictions.json"
    ids = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    (labels / partitions.PARTITION_FILE).write_text("\n".join(str(q["question_id"]) for q in ids[::2]))
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
    manifest = {"question_ids": [1, 2, 3]}
    assert partitions.check_partition("sqa3d", manifest, partitions.parse("1\n# c\n 2 # two\n")) == {"1", "2"}
    with pytest.raises(LabelsError, match=r"1 are not \(first: '9'\)"):
        partitions.check_partition("sqa3d", manifest, {"1", "9"})
    with pytest.raises(LabelsError, match="some of the 3 units and not all"):
        partitions.check_partition("sqa3d", manifest, {"1", "2", "3"})
    with pytest.raises(LabelsError, match="some of the 3 units"):
        partitions.check_partition("sqa3d", manifest, set())
    assert partitions.manifest_units("openscan", {"scenes": {"scene0001_00": 10}}) == ["scene0001_00"]


def test_a_partition_mask_is_a_resample_of_weight_one_on_its_units() -> None:
    """The filter itself: the statistic of a 0/1 row is the partition's exact metric."""
    from evaluation_workers.metrics import bootstrap
    from evaluation_workers.tracks.sqa3d import outcomes_statistic

    em = np.array([1, 0, 1, 1, 0, 0], dtype=bool)
    outcomes = {"em": em, "em_r": em, "type": np.zeros(6, dtype=np.int64)}
    units = bootstrap.Units(statistic=outcomes_statistic(outcomes), ids=[str(i) for i in range(6)], unit="question")
    result = {"track": "sqa3d", "metrics": {"EM": 0.5, "EM_R": 0.5}, "breakdown": {"What": {"EM": 0.5, "count": 6}},
              "details": {"answered": 6}, "warnings": []}
    public, private = partitions.split_result(result, [units], partitions.Partition(frozenset({"0", "1", "2"})))
    assert public["metrics"]["EM"] == pytest.approx(2 / 3) and private["metrics"]["EM"] == pytest.approx(1 / 3)
    assert public["breakdown"] == {"What": {"EM": pytest.approx(2 / 3)}}
    with pytest.raises(ValueError, match="name its units once"):
        partitions.split_result(result, [], partitions.Partition(frozenset({"0"})))
