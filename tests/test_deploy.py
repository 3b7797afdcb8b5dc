"""Deployment files: the web server listens on loopback unless told otherwise; compose, the image; what
Prometheus scrapes and Grafana shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gunicorn_bind(**env: str) -> str:
    """The bind address gunicorn itself reads from deploy/gunicorn.conf.py (``--print-config``)."""
    clean = {k: v for k, v in os.environ.items() if k not in {"BIND", "PORT"}}
    out = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "--print-config",
                          "leaderboard.wsgi"], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    [line] = [line for line in out.splitlines() if line.split("=")[0].strip() == "bind"]
    return line.split("=", 1)[1].strip()


@pytest.mark.parametrize("env, bind", [({}, "['127.0.0.1:8000']"), ({"PORT": "9001"}, "['127.0.0.1:9001']"),
                                       ({"BIND": "0.0.0.0:8080"}, "['0.0.0.0:8080']")])
def test_gunicorn_binds_loopback_by_default(env, bind):
    assert gunicorn_bind(**env) == bind


# Run in a fresh interpreter as gunicorn's arbiter runs its hooks: on_starting, then (on a signal) child_exit.
ARBITER_HOOKS = r"""
import os, runpy, sys
os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
conf = runpy.run_path("deploy/gunicorn.conf.py")
class Server: pass
class Worker: pid = 4242
server = Server()
conf["on_starting"](server)
loaded = sorted(m for m in sys.modules if m.startswith("prometheus_client"))
from prometheus_client import values
mode = values.ValueClass.__name__
before = set(sys.modules)
conf["child_exit"](server, Worker())
print(repr((bool(loaded), mode, sorted(set(sys.modules) - before))))
conf["on_exit"](server)
"""


def test_the_arbiter_loads_the_metrics_module_before_a_worker_can_exit():
    """gunicorn calls child_exit inside its SIGCHLD handler. Importing prometheus_client there let a second
    SIGCHLD arrive halfway through the import (two workers stopping at once) and the nested handler raised
    "cannot import name 'Gauge' from partially initialized module": a traceback in the log of every stop.
    The import belongs in on_starting, after PROMETHEUS_MULTIPROC_DIR is set and before any worker exists."""
    out = subprocess.run([sys.executable, "-c", ARBITER_HOOKS], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    loaded, mode, imported_by_child_exit = eval(out)  # noqa: S307 - our own repr
    assert loaded, "on_starting left prometheus_client to be imported in the signal handler"
    assert mode == "MmapedValue", mode  # imported after the folder was set (else MutexValue): workers count into it
    assert imported_by_child_exit == []


def compose_client() -> list[str] | None:
    import shutil

    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


# What deploy/.env must give compose: no default exists for these (a known value would let anyone who
# reaches the broker or the store write results or read labels).
REQUIRED_SECRETS = {"REDIS_PASSWORD": "broker-pw-1", "RESULTS_SIGNING_KEYS": "k2:signing-key-2",
                    "S3_SECRET_ACCESS_KEY": "site-secret-3", "LABELS_S3_SECRET_ACCESS_KEY": "labels-secret-4",
                    "EVAL_S3_SECRET_ACCESS_KEY": "worker-secret-5"}
SITE, WORKERS = ("web", "site-worker", "beat"), ("worker-cpu", "worker-gpu")


def compose_config(*args: str, **secrets: str) -> subprocess.CompletedProcess[str]:
    """``compose config`` of deploy/compose.yaml, with none of the service's variables in the environment
    but ``secrets``."""
    client = compose_client()
    if client is None:
        pytest.skip("no compose client on PATH (Debian: apt-get install docker-compose; deploy/test.sh does it as root)")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EVAL_", "SECRET_KEY", "MINIO_", "REDIS_", "RESULTS_", "S3_", "LABELS_S3_"))}
    return subprocess.run([*client, "-f", "deploy/compose.yaml", "config", *args], cwd=ROOT, env={**env, **secrets},
                          capture_output=True, text=True, timeout=60)


def resolved_services() -> dict[str, str]:
    """Each service's block of the file as the client understood it, variables filled in."""
    result = compose_config(**REQUIRED_SECRETS)
    assert result.returncode == 0, result.stderr
    by_service: dict[str, str] = {}
    current = None
    for line in result.stdout.splitlines():  # a service's block: from "  name:" to the next such line
        if line and not line.startswith(" "):
            current = None
        elif line.startswith("  ") and not line.startswith("   ") and line.endswith(":"):
            current = line.strip()[:-1]
            by_service[current] = ""
        elif current:
            by_service[current] += line + "\n"
    return by_service


def environment(block: str) -> dict[str, str]:
    """The ``environment:`` mapping of a service block."""
    lines = block.split("    environment:\n", 1)[1].splitlines()
    pairs = [line.strip().split(": ", 1) for line in lines[: next(i for i, line in enumerate(lines)
                                                                    if not line.startswith("      "))]]
    return {name: value.strip("'\"") for name, value in pairs}


def test_the_compose_file_validates_with_every_process_and_a_gpu_reservation():
    listed = compose_config("--services", **REQUIRED_SECRETS)
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) == {"web", "site-worker", "beat", "worker-cpu", "worker-gpu", "redis",
                                          "postgres", "minio", "minio-setup"}
    by_service = resolved_services()
    assert all("healthcheck:" in by_service[s] for s in ("web", "site-worker", "beat", "worker-cpu",
                                                         "worker-gpu", "redis", "postgres", "minio"))
    assert "--appendonly yes" in by_service["redis"]
    gpu = by_service["worker-gpu"]
    assert "driver: nvidia" in gpu and "- gpu" in gpu and "EVAL_DEVICE: gpu" in gpu
    # Scoring workers get the broker and the buckets, never the database.
    for name in ("worker-cpu", "worker-gpu"):
        assert "DATABASE_URL" not in by_service[name] and "EVAL_LABELS_S3_BUCKET: labels" in by_service[name]


@pytest.mark.parametrize("missing", sorted(REQUIRED_SECRETS))
def test_compose_refuses_to_start_without_each_secret_and_names_it(missing):
    result = compose_config(**{k: v for k, v in REQUIRED_SECRETS.items() if k != missing})
    assert result.returncode != 0 and f"set {missing} in deploy/.env" in result.stderr


def test_the_broker_needs_its_password_and_every_process_signs_with_one_key():
    by_service = resolved_services()
    assert "requirepass" in by_service["redis"] and "redis-cli ping" in by_service["redis"]
    assert environment(by_service["redis"])["REDIS_PASSWORD"] == "broker-pw-1"
    for name in SITE + WORKERS:
        env = environment(by_service[name])
        assert env["REDIS_URL"] == "redis://:broker-pw-1@redis:6379/0", name
        assert env["RESULTS_SIGNING_KEYS" if name in SITE else "EVAL_RESULTS_SIGNING_KEYS"] == "k2:signing-key-2", name


def policy_grants(name: str) -> dict[str, set[str]]:
    """Actions allowed by deploy/minio/<name>.json, by resource."""
    grants: dict[str, set[str]] = {}
    for statement in json.loads((ROOT / "deploy" / "minio" / f"{name}.json").read_text())["Statement"]:
        assert statement["Effect"] == "Allow"
        for resource in statement["Resource"]:
            grants.setdefault(resource.removeprefix("arn:aws:s3:::"), set()).update(statement["Action"])
    return grants


READS = {"s3:GetObject", "s3:ListBucket", "s3:*"}


def test_the_site_holds_no_key_that_reads_labels_or_outcomes_and_workers_one_that_writes_only_outcomes():
    by_service = resolved_services()
    setup = environment(by_service["minio-setup"])
    script = (ROOT / "deploy" / "minio" / "setup.sh").read_text()
    roles = {"leaderboard-site": "S3", "leaderboard-labels-writer": "LABELS_S3", "leaderboard-worker": "EVAL_S3"}
    for policy, prefix in roles.items():  # each user gets the policy of its role, and only that one
        assert f'role {policy} "${prefix}_ACCESS_KEY_ID" "${prefix}_SECRET_ACCESS_KEY"' in script
    users = {prefix: (setup[f"{prefix}_ACCESS_KEY_ID"], setup[f"{prefix}_SECRET_ACCESS_KEY"]) for prefix in roles.values()}
    assert len({user for user, _ in users.values()} | {setup["MINIO_ROOT_USER"]}) == 4

    for name in SITE:
        env = environment(by_service[name])
        assert (env["S3_ACCESS_KEY_ID"], env["S3_SECRET_ACCESS_KEY"]) == users["S3"]
        assert (env["LABELS_S3_ACCESS_KEY_ID"], env["LABELS_S3_SECRET_ACCESS_KEY"]) == users["LABELS_S3"]
        assert not {v for k, v in env.items() if "SECRET" in k or "PASSWORD" in k} & {
            users["EVAL_S3"][1], setup["MINIO_ROOT_PASSWORD"]}, name
    for name in WORKERS:
        env = environment(by_service[name])
        assert (env["EVAL_S3_ACCESS_KEY_ID"], env["EVAL_S3_SECRET_ACCESS_KEY"]) == users["EVAL_S3"]
        assert "DATABASE_URL" not in env and "EVAL_LABELS_S3_ACCESS_KEY_ID" not in env  # labels: the same user

    site, writer, worker = (policy_grants(p) for p in roles)
    assert set(site) == {"predictions", "predictions/*"} and "s3:PutObject" in site["predictions/*"]
    assert writer == {"labels/*": {"s3:PutObject", "s3:AbortMultipartUpload"}}
    assert worker == {"predictions": {"s3:ListBucket", "s3:GetBucketLocation"},
                      "labels": {"s3:ListBucket", "s3:GetBucketLocation"},
                      "outcomes": {"s3:ListBucket", "s3:GetBucketLocation"},
                      "predictions/*": {"s3:GetObject"}, "labels/*": {"s3:GetObject"},
                      "outcomes/*": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}}
    assert not any(READS & actions for resource, actions in {**site, **writer}.items()
                   if resource.startswith(("labels", "outcomes")))
    assert "local/outcomes" in script
    for name in WORKERS:  # every scoring worker keeps its outcomes in the bucket, with the workers' key
        env = environment(by_service[name])
        assert env["EVAL_OUTCOMES_S3_BUCKET"] == "outcomes" and "EVAL_OUTCOMES_S3_ACCESS_KEY_ID" not in env


def test_the_image_installs_through_the_checkouts_requirements_files():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert 'source deploy/venv.sh ${REQUIREMENTS}' in dockerfile and "ARG REQUIREMENTS=requirements.txt" in dockerfile
    assert 'source deploy/venv.sh requirements-gpu.txt' in dockerfile
    assert "-r requirements.txt" in (ROOT / "requirements-gpu.txt").read_text()


# Watching the service (issue 26): deploy/prometheus.yml, prometheus-alerts.yml, grafana-dashboard.json.

METRIC_NAME = re.compile(r"\b(?:leaderboard|eval)_[a-z0-9_]+\b")


def _yaml(name: str) -> dict:
    import yaml

    return yaml.safe_load((ROOT / "deploy" / name).read_text())


def _env_example(name: str) -> str:
    [line] = [line for line in (ROOT / "deploy" / ".env.example").read_text().splitlines()
              if line.startswith(f"{name}=")]
    return line.split("=", 1)[1].split()[0]


def test_prometheus_scrapes_the_site_with_its_token_and_each_worker_on_its_metrics_port():
    config = _yaml("prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    site, workers = jobs["leaderboard-site"], jobs["leaderboard-scoring-workers"]
    assert site["metrics_path"] == "/metrics"
    assert site["authorization"] == {"type": "Bearer", "credentials_file": site["authorization"]["credentials_file"]}
    port = _env_example("EVAL_METRICS_PORT")
    assert all(t.endswith(f":{port}") for c in workers["static_configs"] for t in c["targets"])
    for rules in config["rule_files"]:
        assert (ROOT / "deploy" / rules).is_file()
    alerts = _yaml("prometheus-alerts.yml")
    assert all({"alert", "expr", "annotations"} <= set(rule) for g in alerts["groups"] for rule in g["rules"])


def test_the_dashboard_is_grafana_json_with_a_query_in_every_panel():
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    panels = dashboard["panels"]
    assert dashboard["uid"] and len({p["id"] for p in panels}) == len(panels) >= 10
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]


def test_every_metric_the_dashboard_and_the_alerts_use_is_served(client, db, settings, redis_url):
    """The names in the queries are the names the site's /metrics and a worker's port really serve."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from evaluation_workers.worker import metrics as worker_metrics

    settings.CELERY_BROKER_URL, settings.METRICS_TOKEN = redis_url, "t" * 32
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": redis_url}}
    client.get("/benchmarks/")  # a page-cache count
    site = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {'t' * 32}").content.decode()
    registry = CollectorRegistry()
    worker_metrics.duration(registry).labels("sqa3d", "scored").observe(1.0)
    families = [f for text in (site, generate_latest(registry).decode()) for f in text_string_to_metric_families(text)]
    served = {s.name for f in families for s in f.samples} | {f.name for f in families} | \
        {f"{f.name}_total" for f in families if f.type == "counter"}
    queries = [t["expr"] for p in json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())["panels"]
               for t in p["targets"]]
    queries += [rule["expr"] for g in _yaml("prometheus-alerts.yml")["groups"] for rule in g["rules"]]
    used = {name for q in queries for name in METRIC_NAME.findall(q)}
    assert used and used <= served, used - served
