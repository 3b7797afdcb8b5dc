"""Environment defaults for the test run, loaded as a plugin (``-p tests.environment``)
so that they are in place before pytest-django reads the settings."""

import os

os.environ.setdefault("SECRET_KEY", "tests-only-not-secret")
# The site and the scoring workers sign their messages with one key (evaluation_workers/signing.py);
# worker processes the tests start inherit it.
os.environ.setdefault("RESULTS_SIGNING_KEY", "tests-only-results-signing-key-" + os.urandom(8).hex())
os.environ.setdefault("EVAL_RESULTS_SIGNING_KEY", os.environ["RESULTS_SIGNING_KEY"])
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
# Worker and live-server threads close their connections after each task or
# request, so the test database can be dropped at the end of the run.
os.environ.setdefault("CONN_MAX_AGE", "0")
# Scoring in the test process keeps per-unit outcomes (evaluation_workers.outcomes): in a
# folder of the run's own, not the checkout's data/.
if not os.environ.get("EVAL_OUTCOMES_DIR"):
    import tempfile

    os.environ["EVAL_OUTCOMES_DIR"] = tempfile.mkdtemp(prefix="lb-test-outcomes-")
