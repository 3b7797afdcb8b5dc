"""ScanRefer, the plugin track, end to end (issue 29): the same file through the offline command
line, the web form, the API and ``lb submit``, each scored by the real worker exactly as the slow
reference of the official script scores it, and on the board."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard_cli.main import main
from tests.leaderboard.test_tracks_live import finish

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]


def official(labels: Path, predictions: Path) -> dict[str, float]:
    """What ScanRefer's benchmark/eval.py prints (its slow reference in the plugin's tests), with a
    missing description a miss."""
    spec = importlib.util.spec_from_file_location(
        "scanrefer_reference", ROOT / "plugins" / "scanrefer" / "tests" / "scanrefer_reference.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    scores = reference.evaluate(json.loads(labels.read_text()), json.loads(predictions.read_text()))["scores"]
    return {f"{prefix}Acc@{t}": scores[subset]["overall"][f"acc@{t}iou"]
            for subset, prefix in (("overall", ""), ("unique", "unique/"), ("multiple", "multiple/"))
            for t in ("0.25", "0.5")}


def flat(result: dict) -> dict[str, float]:
    out = dict(result["metrics"])
    for group, values in result["breakdown"].items():
        out.update({f"{group}/{m}": v for m, v in values.items() if m != "count"})
    return out


@pytest.fixture
def scanrefer(tmp_path: Path) -> dict[str, Path]:
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    load_bundled_benchmarks()
    labels, written = get_track("scanrefer").write_demo(tmp_path / "demo", "val")
    predictions = written.rename(tmp_path / written.name)
    do_load_labels(Split.objects.get(benchmark__track="scanrefer", name="val"), labels)
    return {"labels": labels, "predictions": predictions}


def test_one_file_scores_the_same_offline_on_the_form_the_api_and_lb_submit(live_pipeline, live_server, client,
                                                                           owner, scanrefer, lb_config, capsys):
    expected = official(scanrefer["labels"], scanrefer["predictions"])
    offline = subprocess.run([sys.executable, "-m", "evaluation_workers", "score", "--quiet", "--track", "scanrefer",
                              "--labels", str(scanrefer["labels"]), "--predictions", str(scanrefer["predictions"])],
                             capture_output=True, text=True, timeout=120, cwd=scanrefer["labels"].parent,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert offline.returncode == 0, offline.stderr
    scored = json.loads(offline.stdout)
    assert flat(scored) == expected
    assert scored["intervals"]["Acc@0.25"] is not None  # 30 scenes: intervals by scene

    client.force_login(owner)
    with scanrefer["predictions"].open("rb") as f:
        form = client.post("/submissions/new/scanrefer/", {"split": "val", "method_name": "FormRefer", "file": f})
    key = do_create_token(owner)
    with scanrefer["predictions"].open("rb") as f:
        api = client.post("/api/v1/submissions", {"track": "scanrefer", "split": "val", "method_name": "ApiRefer",
                                                  "file": f}, headers={"Authorization": f"Token {key}"})
    assert api.status_code == 201, api.content
    assert main(["login", "--server", live_server.url, "--token", key]) == 0
    assert main(["-q", "submit", "--track", "scanrefer", "--method", "CliRefer", str(scanrefer["predictions"])]) == 0
    cli_id = int(capsys.readouterr().out.split("#")[1].split()[0])
    for pk in (int(form["Location"].rstrip("/").split("/")[-1]), api.json()["id"], cli_id):
        done = finish(client, pk)
        assert done["status"] == "finished", done
        assert flat(done["result"]) == expected and done["result"]["metrics"] == scored["metrics"]

    from leaderboard.submissions.models import Method
    from tests.leaderboard.conftest import describe_method

    describe_method(Method.objects.get(name="ApiRefer"))
    assert client.post(f"/api/v1/submissions/{api.json()['id']}/publish",
                       headers={"Authorization": f"Token {key}"}).status_code == 200
    board = client.get("/api/v1/leaderboards/scanrefer?split=val").json()
    [row] = [r for r in board["rows"] if r["method"] == "ApiRefer"]
    assert row["scores"]["multiple/Acc@0.5"] == expected["multiple/Acc@0.5"]
    assert board["primary_metric"] == "Acc@0.25"
    page = client.get("/benchmarks/scanrefer/").content.decode()
    assert "ApiRefer" in page and f"{expected['Acc@0.25'] * 100:.1f}" in page
