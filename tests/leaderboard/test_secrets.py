"""Secrets: no public default key, one generated key shared by every process, and part
URLs that only the upload's own signature opens."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from django.core import signing

from leaderboard.accounts.services import do_create_token
from leaderboard.submissions import uploads

ROOT = Path(__file__).resolve().parents[2]
PRINT_SETTINGS = ("from django.conf import settings; import json; "
                  "print(json.dumps([settings.SECRET_KEY, settings.DEBUG]))")


def fresh_shell(data_dir: Path) -> dict[str, str]:
    """The environment of a new terminal with nothing exported but where the data lives."""
    return {"PATH": os.environ["PATH"], "DATA_DIR": str(data_dir)}


def manage(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=fresh_shell(data_dir),
                          capture_output=True, text=True, timeout=120)


def last_json(stdout: str) -> list:
    return json.loads(stdout.strip().splitlines()[-1])  # `shell` prints what it imported first


def test_without_a_key_settings_generate_one_once_and_every_command_reads_it(tmp_path):
    first = manage(tmp_path, "shell", "-c", PRINT_SETTINGS)
    assert first.returncode == 0, first.stderr
    key, debug = last_json(first.stdout)
    again = last_json(manage(tmp_path, "shell", "-c", PRINT_SETTINGS).stdout)
    key_file = tmp_path / "secret_key"
    assert again == [key, False] and debug is False
    assert key_file.read_text().strip() == key and len(key) >= 50
    assert "insecure" not in key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_processes_starting_at_once_agree_on_one_key(tmp_path):
    procs = [subprocess.Popen([sys.executable, "manage.py", "shell", "-c", PRINT_SETTINGS], cwd=ROOT,
                              env=fresh_shell(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outputs]
    keys = {last_json(out)[0] for out, _ in outputs}
    assert keys == {(tmp_path / "secret_key").read_text().strip()}
    assert [p.name for p in tmp_path.iterdir() if "secret" in p.name] == ["secret_key"]


def test_the_readme_commands_work_in_a_fresh_shell(tmp_path, sqa3d_files):
    assert manage(tmp_path, "migrate", "--noinput", "-v0").returncode == 0
    token = manage(tmp_path, "issue_token", "demo", "--create-user", "--name", "laptop")
    assert token.returncode == 0 and token.stdout.startswith("lb_"), token.stderr
    bundle = tmp_path / "sqa3d.yaml"  # README, "Host a benchmark": a bundle, then its labels
    bundle.write_text("track: sqa3d\ntitle: SQA3D\nsplits:\n- name: test\n  labels:\n    pending: true\n")
    declared = manage(tmp_path, "load_benchmark", str(bundle))
    assert declared.returncode == 0, declared.stderr
    loaded = manage(tmp_path, "load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    assert loaded.returncode == 0 and "Loaded labels" in loaded.stdout, loaded.stderr


def test_an_empty_key_file_is_refused_with_its_name(tmp_path):
    (tmp_path / "secret_key").write_text("")
    result = manage(tmp_path, "check")
    assert result.returncode != 0 and f"{tmp_path / 'secret_key'} is empty" in result.stderr


def _start(client, owner, size=5000):
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    body = {"track": "sqa3d", "split": "test", "method_name": "PartNet", "file_name": "p.json", "size": size}
    upload = client.post("/api/v1/uploads", body, content_type="application/json", headers=headers).json()
    urls = client.post(f"/api/v1/uploads/{upload['id']}/urls", {"parts": [1]}, content_type="application/json",
                       headers=headers).json()["urls"]
    return upload, urlsplit(urls[0]["url"])


def test_knowing_the_key_is_not_enough_to_sign_a_part_of_someone_elses_upload(client, owner, sqa3d_split,
                                                                              small_parts, settings):
    """The attack of issue 9: sign '<id>.<part>' with the site's key and write into an open upload."""
    victim, _ = _start(client, owner)
    signer = signing.TimestampSigner(key=settings.SECRET_KEY, salt=uploads._SIGNER_SALT)
    forged = signer.sign(f"{victim['id']}.1").split(":", 1)[1]
    response = client.put(f"/api/v1/uploads/{victim['id']}/parts/1?signature={forged}", b"x" * 4096,
                          content_type="application/octet-stream")
    assert response.status_code == 403, response.content
    assert uploads.upload_parts(uploads.Upload.objects.get(submission_id=victim["id"])) == []


def test_a_signature_for_one_upload_never_fits_another(client, owner, outsider, sqa3d_split, small_parts):
    mine, my_url = _start(client, owner)
    theirs, _ = _start(client, outsider)
    response = client.put(f"/api/v1/uploads/{theirs['id']}/parts/1?{my_url.query}", b"x" * 4096,
                          content_type="application/octet-stream")
    assert response.status_code == 403
    assert client.put(f"{my_url.path}?{my_url.query}", b"x" * 4096,
                      content_type="application/octet-stream").status_code == 200
