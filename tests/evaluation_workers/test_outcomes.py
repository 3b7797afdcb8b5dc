"""The outcomes store on one host (a folder), its retention, and what the worker tasks do when the
outcomes are missing or the store fails (the bucket, shared by hosts: tests/leaderboard/test_outcomes_shared.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation_workers import contracts, outcomes
from evaluation_workers.worker import deferred_intervals, significance, tasks
from tests.evaluation_workers.test_tasks import roots  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parents[2]
KEPT = {"em": np.array([True, False]), "scene": np.array([0, 1])}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("EVAL_OUTCOMES_S3_BUCKET", raising=False)
    monkeypatch.setenv("EVAL_OUTCOMES_DIR", str(tmp_path / "outcomes"))
    return tmp_path / "outcomes"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any], str]]:
    calls: list[tuple[str, dict[str, Any], str]] = []
    for module in (tasks, deferred_intervals, significance):
        monkeypatch.setattr(module.app, "send_task",
                            lambda name, kwargs, queue, **o: calls.append((name, kwargs, queue)))
    return calls


def test_without_a_setting_the_outcomes_go_to_the_workers_cache_never_the_current_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_OUTCOMES")}
    env.update(EVAL_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    here = tmp_path / "anywhere"
    here.mkdir()
    code = ("import numpy as np; from evaluation_workers import outcomes\n"
            "outcomes.save('sqa3d/l/p-v1.npz', {'em': np.array([True])}); print(outcomes.where())")
    out = subprocess.run([sys.executable, "-c", code], cwd=here, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "cache" / "outcomes")
    assert (tmp_path / "cache/outcomes/sqa3d/l/p-v1.npz").is_file() and not any(here.iterdir())


def test_a_relative_setting_is_resolved_to_an_absolute_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder.parent)
    monkeypatch.setenv("EVAL_OUTCOMES_DIR", "outcomes")
    assert outcomes.root() == folder and outcomes.root().is_absolute()


def test_an_unreadable_outcome_is_a_store_error_and_a_missing_one_is_none(folder: Path) -> None:
    outcomes.save("sqa3d/l/p-v1.npz", KEPT)
    (folder / "sqa3d/l/p-v1.npz").write_bytes(b"truncated")
    with pytest.raises(outcomes.StoreError):
        outcomes.load("sqa3d/l/p-v1.npz")
    assert outcomes.load("sqa3d/l/q-v1.npz") is None
    with pytest.raises(ValueError):
        outcomes.load("../escape.npz")


def test_pruning_keeps_what_the_site_wants_and_anything_written_since_it_listed(folder: Path) -> None:
    for key in ("sqa3d/l/wanted-v1.npz", "sqa3d/l/old-v1.npz", "sqa3d/m/old-v1.npz", "openscan/l/old-v1.npz"):
        outcomes.save(key, KEPT)
    listed = time.time() + 1  # everything above was written before the site listed what it wants
    time.sleep(1.1)
    outcomes.save("sqa3d/l/new-v1.npz", KEPT)
    assert outcomes.prune("sqa3d/", {"sqa3d/l/wanted-v1.npz"}, listed) == 2
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.npz"))
    assert left == ["openscan/l/old-v1.npz", "sqa3d/l/new-v1.npz", "sqa3d/l/wanted-v1.npz"]


def test_the_prune_task_refuses_a_list_naming_another_tracks_keys(folder: Path) -> None:
    from evaluation_workers.worker import pruning

    outcomes.save("sqa3d/l/old-v1.npz", KEPT)
    request = {"schema": contracts.SCHEMA_VERSION, "track": "sqa3d", "keep": ["openscan/l/x-v1.npz"],
               "written_before": time.time() + 60}
    pruning.prune_outcomes.run(**request)
    assert (folder / "sqa3d/l/old-v1.npz").is_file()
    pruning.prune_outcomes.run(**{**request, "keep": []})
    assert not (folder / "sqa3d/l/old-v1.npz").exists()


def intervals_request(key: str) -> dict[str, Any]:
    return dict(schema=contracts.SCHEMA_VERSION, submission_id=7, result_id=70, revision=3, track="sqa3d",
                scorer_version="1.2.0", outcomes_key=key, reply_queue="site-x")


def test_deferred_intervals_whose_outcomes_are_gone_report_it_to_the_site(folder: Path, sent) -> None:
    deferred_intervals.compute_intervals.run(**intervals_request("sqa3d/l/gone-v1.2.0.npz"))
    [(name, report, queue)] = sent
    assert (name, queue) == (contracts.RECORD_INTERVALS, "site-x")
    assert report == {"submission_id": 7, "result_id": 70, "revision": 3, "intervals": {}, "bootstrap": {},
                      "error": deferred_intervals.MISSING, "retry": False}


def test_deferred_intervals_ask_to_be_tried_again_when_the_store_cannot_be_read(folder: Path, sent,
                                                                                monkeypatch) -> None:
    def down(key: str) -> None:
        raise outcomes.StoreError("the outcomes store could not be read")

    monkeypatch.setattr(outcomes, "load", down)
    deferred_intervals.compute_intervals.run(**intervals_request("sqa3d/l/p-v1.2.0.npz"))
    [(_, report, _)] = sent
    assert report["error"] == deferred_intervals.UNREADABLE and report["retry"] is True
    assert report["intervals"] == {} and report["bootstrap"] == {}


def test_a_paired_test_is_not_answered_while_the_store_cannot_be_read(folder: Path, sent, monkeypatch) -> None:
    """The test stays pending on the site, which asks again; "unavailable" would be final."""
    def down(key: str) -> None:
        raise outcomes.StoreError("the outcomes store could not be read")

    monkeypatch.setattr(outcomes, "load", down)
    significance.paired_test.run(schema=contracts.SCHEMA_VERSION, test_id=3, revision_a=1, revision_b=1,
                                 track="sqa3d", reply_queue="site-x", outcomes_a="sqa3d/l/a-v1.npz",
                                 outcomes_b="sqa3d/l/b-v1.npz")
    assert sent == []


@pytest.fixture
def scoring(roots: Any, monkeypatch: pytest.MonkeyPatch) -> contracts.ScoreRequest:  # noqa: F811
    """A scoring request of synthetic SQA3D predictions, with the worker's folders and no broker."""
    monkeypatch.setattr(tasks.app.conf, "broker_url", "memory://")
    return contracts.ScoreRequest(schema=1, submission_id=7, attempt=2, track="sqa3d", predictions_key="t/1/p.json",
                                  labels_key="sqa3d/test/v1", reply_queue="site-x")


def test_outcomes_that_cannot_be_kept_never_cost_the_score(folder: Path, sent, scoring, monkeypatch) -> None:
    def broken(key: str, kept: dict[str, Any]) -> None:
        raise RuntimeError("a fault in keeping them")

    monkeypatch.setattr(outcomes, "save", broken)
    tasks.run_score(scoring)
    assert sent[-1][0] == contracts.RECORD_RESULT and sent[-1][1]["result"]["metrics"]["EM"] == pytest.approx(0.5)


def test_a_deferred_result_whose_outcomes_could_not_be_kept_says_so_in_itself(
        folder: Path, sent, scoring, monkeypatch: pytest.MonkeyPatch) -> None:
    """The site then records it without intervals, and why, instead of asking for them
    (tests/leaderboard/test_intervals.py)."""
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder")  # the store cannot be written
    tasks.run_score(scoring)
    assert sent[-1][0] == contracts.RECORD_RESULT
    assert not {contracts.COMPUTE_INTERVALS, contracts.RECORD_INTERVALS} & {name for name, _, _ in sent}
    assert sent[-1][1]["result"]["bootstrap"] == {"deferred": True, "resamples": 1000, "unit": "scene",
                                                   "unavailable": deferred_intervals.NOT_KEPT}
