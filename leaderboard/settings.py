"""Settings, read from the environment in this one file.

Every variable is listed in deploy/.env.example. The embedded defaults
(SQLite, local files under DATA_DIR, a Redis on localhost) make a fresh
checkout run; DATABASE_URL, REDIS_URL and STORAGE_BACKEND switch to external
services.
"""

from __future__ import annotations

import ipaddress
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evaluation_workers.signing import SigningKeyError, checked_key
from leaderboard.lib.env import env, envbool, envfloat, envint, envlist, envmode, envpaths, generated_secret

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env("DATA_DIR") or BASE_DIR / "data").resolve()

# Off unless asked for: debug pages show settings and request headers.
DEBUG = envbool("DEBUG", False)
# Never a built-in key (anyone could sign sessions and upload URLs with it): SECRET_KEY,
# SECRET_KEY_FILE, or one generated once into DATA_DIR/secret_key that every process reads.
SECRET_KEY = env("SECRET_KEY") or generated_secret(DATA_DIR / "secret_key")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")
SITE_NAME = env("SITE_NAME", "3D Scene Understanding Leaderboards")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "leaderboard.accounts",
    "leaderboard.benchmarks",
    "leaderboard.submissions",
    "leaderboard.rankings",
    "leaderboard.moderation",
    "axes",
]

MIDDLEWARE = [
    # First: /healthz, /readyz and /metrics, whatever the Host, with no session or cache lookup.
    "leaderboard.ops.probes.ProbeMiddleware",
    # First: every answer under /api/ leaves as {"error": {"code", "message"}}, Django's own 404/500 too.
    "leaderboard.api_errors.ApiErrorMiddleware",
    # A view's exception of a failed database, broker, storage or full disk: 503 with Retry-After.
    "leaderboard.ops.unavailable.UnavailableMiddleware",
    # First: a cached public page is served before sessions, CSRF and the rest run.
    "leaderboard.lib.pagecache.PageCacheMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Serves /static/ from the app folders in every mode, so gunicorn needs no
    # separate file server (and no collectstatic step) for the few files we have.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
    # Turns a sign-in refused for its address (leaderboard.accounts.throttle) into a 429 page.
    "leaderboard.accounts.throttle.AddressThrottleMiddleware",
]

ROOT_URLCONF = "leaderboard.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "leaderboard.lib.context.site",
                "leaderboard.moderation.context.maintainer",
            ],
        },
    },
]
WSGI_APPLICATION = "leaderboard.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'db.sqlite3'}", conn_max_age=envint("CONN_MAX_AGE", 60)
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATA_DIR.mkdir(parents=True, exist_ok=True)  # the embedded default must work on a fresh checkout
    # Several processes write one file: the web workers, the site worker, beat.
    # WAL lets readers go on while one writes; IMMEDIATE takes the write lock at
    # BEGIN, so two writers queue for up to `timeout` seconds instead of one
    # failing with "database is locked" when it upgrades a read lock.
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 30, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL"})
    # Tests use a file too (not SQLite's shared in-memory cache, whose table locks no timeout
    # waits for), so that they run on the locking the embedded set-up has.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{os.getpid()}.sqlite3")}
else:
    # One test database per test run: two suites on one server (two checkouts, two CI jobs) would
    # otherwise drop or fill each other's "test_<name>" mid-run.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Failed logins are counted per username and client address (in the database, so every
# web process shares them); LOGIN_FAILURE_LIMIT failures lock that pair out for
# LOGIN_LOCKOUT_MINUTES, a success resets the count, `manage.py axes_reset` unlocks everyone.
# Behind a reverse proxy the address is the proxy's unless REMOTE_ADDR is set from it.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend",
                           # Refuses every sign-in from an address past LOGIN_FAILURES_PER_ADDRESS (see below).
                           "leaderboard.accounts.throttle.AddressThrottleBackend",
                           "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=envint("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# New API tokens per user and hour on the tokens page (`manage.py issue_token` is exempt).
TOKENS_PER_HOUR = envint("TOKENS_PER_HOUR", 10)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "benchmarks:home"
LOGOUT_REDIRECT_URL = "benchmarks:home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env("STATIC_ROOT") or None  # only for collectstatic; WhiteNoise serves from the finders
WHITENOISE_USE_FINDERS = True
STATICFILES_DIRS = [BASE_DIR / "leaderboard" / "static"]

EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
# SMTP, used when EMAIL_BACKEND is django.core.mail.backends.smtp.EmailBackend.
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "leaderboard@localhost")
# Absolute links in e-mails sent outside a request (submission finished or failed).
SITE_URL = (env("SITE_URL") or "http://127.0.0.1:8000").rstrip("/")

# Uploaded predictions: keys relative to UPLOADS_DIR (never web-served). Hidden
# labels: under LABELS_DIR, which only workers read (load_labels writes it).
UPLOADS_DIR = Path(env("UPLOADS_DIR") or DATA_DIR / "uploads")
LABELS_DIR = Path(env("LABELS_DIR") or DATA_DIR / "labels")
# Where a benchmark bundle's files (labels `source`, `public_subset`) may be read from besides the
# bundle's own folder (leaderboard/benchmarks/bundle_files.py): absolute folders, comma-separated.
LABELS_SOURCE_ROOTS = envpaths("LABELS_SOURCE_ROOTS")
# Hidden labels in object storage instead (a bucket, or a prefix of one, that workers read
# with their own credentials): load_labels uploads each version there and keeps no local copy;
# the site itself never reads it. Endpoint, region and keys default to the uploads' S3_*.
LABELS_S3_BUCKET = env("LABELS_S3_BUCKET", "")
LABELS_S3_PREFIX = env("LABELS_S3_PREFIX", "")
LABELS_S3_ENDPOINT_URL = env("LABELS_S3_ENDPOINT_URL", "")
LABELS_S3_REGION = env("LABELS_S3_REGION", "")
LABELS_S3_ACCESS_KEY_ID = env("LABELS_S3_ACCESS_KEY_ID", "")
LABELS_S3_SECRET_ACCESS_KEY = env("LABELS_S3_SECRET_ACCESS_KEY", "")
# Modes of the files and folders written there (uploads, their parts, labels): the site's
# user writes, the group (scoring workers running as another user) reads, others nothing.
FILE_MODE = envmode("FILE_MODE", 0o640)
DIR_MODE = envmode("DIR_MODE", 0o750)
# Files up to this size are validated during the upload request, so that
# obviously bad files are refused at once; larger ones are validated by the worker.
VALIDATE_AT_UPLOAD_MAX_BYTES = envint("VALIDATE_AT_UPLOAD_MAX_BYTES", 64 * 2**20)
# That validation runs in a child process (evaluation_workers/isolated.py), so an upload never grows
# the web process itself: the child may use this much memory above its start (256 MiB: a 2.5-million-key
# SQA3D object is refused in 0.6 s within 74 MiB) and take this many seconds. A file that needs more
# (a legitimate 50 MiB MMScan JSON takes 350-630 MiB) is not refused: the worker validates it as it scores.
VALIDATE_AT_UPLOAD_MAX_MEMORY = envint("VALIDATE_AT_UPLOAD_MAX_MEMORY", 256 * 2**20)
VALIDATE_AT_UPLOAD_TIMEOUT = envint("VALIDATE_AT_UPLOAD_TIMEOUT", 60)
# Where predictions are stored: "local" (UPLOADS_DIR) or "s3" (any S3-compatible store).
STORAGE_BACKEND = env("STORAGE_BACKEND", "local")
if STORAGE_BACKEND not in {"local", "s3"}:
    raise ImproperlyConfigured(f"Unexpected STORAGE_BACKEND={STORAGE_BACKEND!r}, use 'local' or 's3'")
S3_BUCKET = env("S3_BUCKET", "")
S3_ENDPOINT_URL = env("S3_ENDPOINT_URL", "")  # empty: AWS
S3_PUBLIC_ENDPOINT_URL = env("S3_PUBLIC_ENDPOINT_URL", "")  # where uploaders reach the store, if elsewhere
S3_REGION = env("S3_REGION", "us-east-1")
S3_ACCESS_KEY_ID = env("S3_ACCESS_KEY_ID", "")
S3_SECRET_ACCESS_KEY = env("S3_SECRET_ACCESS_KEY", "")
S3_ADDRESSING_STYLE = env("S3_ADDRESSING_STYLE", "path")
if STORAGE_BACKEND == "s3" and not S3_BUCKET:
    raise ImproperlyConfigured("STORAGE_BACKEND=s3 needs S3_BUCKET")
# Files above UPLOAD_DIRECT_MAX_BYTES are uploaded in parts of UPLOAD_PART_BYTES
# (straight to the bucket through presigned URLs, or PUT to the site with local
# storage); part URLs live UPLOAD_URL_EXPIRY seconds; an upload not completed
# within UPLOAD_EXPIRY_HOURS is aborted and its submission refunded.
UPLOAD_DIRECT_MAX_BYTES = envint("UPLOAD_DIRECT_MAX_BYTES", 32 * 2**20)
UPLOAD_PART_BYTES = envint("UPLOAD_PART_BYTES", 64 * 2**20)
UPLOAD_URL_EXPIRY = envint("UPLOAD_URL_EXPIRY", 3600)
UPLOAD_EXPIRY_HOURS = envint("UPLOAD_EXPIRY_HOURS", 24)
# Per-track upload size caps below the track's own limit: "openscan=4294967296,sqa3d=1048576".
UPLOAD_MAX_BYTES = {track: int(size) for track, _, size in
                    (item.partition("=") for item in envlist("UPLOAD_MAX_BYTES"))}
# Submission quotas per team and split (maintainers override them per team in the admin):
# counted per UTC day, in total, and at once in flight; files rejected for
# their format count against the separate QUOTA_REJECTED_PER_DAY instead.
QUOTA_PER_DAY = envint("QUOTA_PER_DAY", 5)
QUOTA_TOTAL = envint("QUOTA_TOTAL", 100)
QUOTA_IN_FLIGHT = envint("QUOTA_IN_FLIGHT", 2)
QUOTA_REJECTED_PER_DAY = envint("QUOTA_REJECTED_PER_DAY", 20)
# Seconds between two counted submissions of one team (and of one user) on a split; 0: none.
QUOTA_MIN_INTERVAL = envint("QUOTA_MIN_INTERVAL", 0)
# The same limits per user and split, over every team of the user, so that a new
# team does not buy new submissions. 0 (the default): the limit of the team submitting.
# Splits set their own (``SplitLimit``, in the admin).
QUOTA_USER_PER_DAY = envint("QUOTA_USER_PER_DAY", 0)
QUOTA_USER_TOTAL = envint("QUOTA_USER_TOTAL", 0)
QUOTA_USER_IN_FLIGHT = envint("QUOTA_USER_IN_FLIGHT", 0)
# Whether a method needs its description, authors and extra-data answer before publishing.
PUBLISH_NEEDS_METHOD_DETAILS = envbool("PUBLISH_NEEDS_METHOD_DETAILS", True)
FILE_UPLOAD_MAX_MEMORY_SIZE = 4 * 2**20
DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 2**20

# Celery (site side). The site sends scoring work by task name to the eval
# queues and consumes SITE_QUEUE, where workers report progress and results.
# The local set-up (deploy/run.sh) starts its own Redis and writes its URL to
# DATA_DIR/redis/url, so that manage.py in a fresh shell reaches the same one.
_LOCAL_REDIS_URL = DATA_DIR / "redis" / "url"
REDIS_URL = env("REDIS_URL") or (_LOCAL_REDIS_URL.read_text().strip() if _LOCAL_REDIS_URL.is_file()
                                 else "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
# A broker that hangs (not only one that refuses) must not hang a request: every
# socket gives up after a few seconds, and the outbox sends the message later.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4 * 3600, "socket_timeout": 5,
                                   "socket_connect_timeout": 3}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_TIMEOUT = 3
# A request that queues a submission waits at most about a second for the
# broker; past that the submission stays queued and the sweeper sends it.
SEND_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.3, "interval_max": 0.5}
SITE_QUEUE = env("SITE_QUEUE", "site")
# The secret that signs every message between the site and the scoring workers (the workers'
# EVAL_RESULTS_SIGNING_KEY, the same value; evaluation_workers/signing.py): reports not signed with it
# change nothing. Not the broker's password: a host that can reach the broker must not be able to
# write a result. Without RESULTS_SIGNING_KEY(_FILE) the one in DATA_DIR/results_signing_key is used,
# which deploy/run_local.py writes and hands to its scoring worker, and which is generated here on a
# machine without REDIS_URL (the embedded set-up). With a broker set and no key, workers on other
# hosts could not know it: ImproperlyConfigured, unless DEBUG.
_LOCAL_SIGNING_KEY = DATA_DIR / "results_signing_key"
_results_signing_key = env("RESULTS_SIGNING_KEY") or ""
if not _results_signing_key and not _LOCAL_SIGNING_KEY.is_file() and env("REDIS_URL") and not DEBUG:
    raise ImproperlyConfigured("RESULTS_SIGNING_KEY (or RESULTS_SIGNING_KEY_FILE) is not set: the site and "
                               "every scoring worker (EVAL_RESULTS_SIGNING_KEY) need the same secret "
                               "(deploy/README.md, 'Signed messages')")
try:
    RESULTS_SIGNING_KEY = checked_key(_results_signing_key or generated_secret(_LOCAL_SIGNING_KEY),
                                      "RESULTS_SIGNING_KEY")
except SigningKeyError as exc:
    raise ImproperlyConfigured(str(exc)) from None
CELERY_TASK_DEFAULT_QUEUE = SITE_QUEUE
# Base names of the scoring queues: each track has <base>-<track>-v<scorer version> and a
# "-bulk" twin for re-scoring a split (lifecycle.queue_for, evaluation_workers/queues.py).
EVAL_QUEUE_CPU = env("EVAL_QUEUE_CPU", "eval-cpu")
EVAL_QUEUE_GPU = env("EVAL_QUEUE_GPU", "eval-gpu")
# Tracks scored on the GPU queue (where a GPU worker runs); all others use the CPU queue.
EVAL_GPU_TRACKS = envlist("EVAL_GPU_TRACKS")
EVAL_SOFT_TIME_LIMIT = envint("EVAL_SOFT_TIME_LIMIT", 30 * 60)
EVAL_TIME_LIMIT = envint("EVAL_TIME_LIMIT", 35 * 60)
# The sweeper (submissions.sweeper.do_sweep) runs every SWEEP_INTERVAL seconds and
# whenever the site worker or a scoring worker starts: it sends what the broker
# never got (after SWEEP_UNSENT_AFTER s), re-sends an attempt whose worker is gone
# (started again, or not announcing itself: EVAL_ANNOUNCE_SECONDS x 3; not in the
# first SWEEP_AFTER_BROKER_RESTART s of a restarted broker), records a report the
# site worker lost (from the worker's claim, after SWEEP_UNSENT_AFTER s), re-sends a queued attempt whose message vanished or that a
# worker took and never claimed (after SWEEP_QUEUED_AFTER s), a running one that
# nobody claims and whose worker has not beaten for SWEEP_HEARTBEAT_TIMEOUT s, and
# fails a submission as a platform error after SWEEP_MAX_LOST_ATTEMPTS lost attempts.
SWEEP_INTERVAL = envfloat("SWEEP_INTERVAL", 5)
SWEEP_UNSENT_AFTER = envfloat("SWEEP_UNSENT_AFTER", 10)
SWEEP_QUEUED_AFTER = envfloat("SWEEP_QUEUED_AFTER", 15)
SWEEP_HEARTBEAT_TIMEOUT = envfloat("SWEEP_HEARTBEAT_TIMEOUT", 120)
SWEEP_AFTER_BROKER_RESTART = envfloat("SWEEP_AFTER_BROKER_RESTART", 15)
SWEEP_STALLED_UPLOAD_AFTER = envfloat("SWEEP_STALLED_UPLOAD_AFTER", 3600)
SWEEP_MAX_LOST_ATTEMPTS = envint("SWEEP_MAX_LOST_ATTEMPTS", 3)
# Deferred intervals that a worker could not compute because the outcomes store could not be
# read are asked again INTERVALS_RETRY_SECONDS x the tries so far later, up to INTERVALS_MAX_TRIES.
INTERVALS_RETRY_SECONDS = envint("INTERVALS_RETRY_SECONDS", 300)
INTERVALS_MAX_TRIES = envint("INTERVALS_MAX_TRIES", 5)
# Public read pages (leaderboards, exports, their API, method and home pages, the tracks,
# manifests, format pages, and the 404s of unknown ids) are
# cached whole for anonymous visitors, on the same Redis unless CACHE_URL says
# otherwise; leaderboard.lib.pagecache invalidates them when rows change.
# PAGE_CACHE_SECONDS=0 turns the cache off. Short socket timeouts: a Redis that
# stops answering makes pages render uncached instead of waiting.
CACHES = {
    "default": {
        "BACKEND": "leaderboard.lib.pagecache.PageCache",  # Django's RedisCache, one client per pool
        "LOCATION": env("CACHE_URL") or REDIS_URL,
        "KEY_PREFIX": env("CACHE_KEY_PREFIX", "lb"),
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
    }
}
PAGE_CACHE_SECONDS = envint("PAGE_CACHE_SECONDS", 600)
# The same pages, answered to visitors without a session, say "Cache-Control: public" for at
# most this long for shared caches (s-maxage; browsers ask again, max-age=0), with Vary: Cookie
# and an ETag, so a reverse proxy may keep them: it may then show a page this long after a
# change, which the cache above never does.
PAGE_CACHE_MAX_AGE = envint("PAGE_CACHE_MAX_AGE", 60)
# A web process trusts the version numbers it read from Redis for this long (a hit then costs
# no round trip): a change made by another process reaches its cached pages within it.
PAGE_CACHE_VERSION_SECONDS = envfloat("PAGE_CACHE_VERSION_SECONDS", 1.0)
# Drill-down on splits whose labels are hidden (Split.labels_public off): a per-attribute or
# per-sub-class result is shown only for groups of at least this many instances or prompts, and
# never with its count (rankings.drilldown).
DRILLDOWN_MIN_GROUP_SIZE = envint("DRILLDOWN_MIN_GROUP_SIZE", 50)
# Paired tests (rankings.paired_tests): a signed-in user's compare page asks a worker for at
# most this many new pairs an hour (each can take minutes of a worker); the pairs a board shows
# are asked when its rows change, whoever reads it. A test still unanswered after
# PAIRED_TEST_RESEND_SECONDS (the broker lost it, or was down) is sent again at the next change.
PAIRED_TESTS_PER_USER_HOUR = envint("PAIRED_TESTS_PER_USER_HOUR", 30)
PAIRED_TEST_RESEND_SECONDS = envint("PAIRED_TEST_RESEND_SECONDS", 6 * 3600)
# Retention of prediction files (submissions.retention), off unless RETENTION_DAYS is set:
# every method keeps its published submission and its RETENTION_KEEP_LAST latest per split;
# the others' files are deleted RETENTION_DAYS after upload, except files whose scores could
# still be re-scored (a submission with a result) unless RETENTION_DELETE_SCORED is true.
RETENTION_DAYS = envint("RETENTION_DAYS", 0)
RETENTION_KEEP_LAST = envint("RETENTION_KEEP_LAST", 5)
RETENTION_DELETE_SCORED = envbool("RETENTION_DELETE_SCORED", False)
RETENTION_INTERVAL = envfloat("RETENTION_INTERVAL", 6 * 3600)
# Per-unit outcomes (the workers' store, which the site never reads): at each retention run the
# workers are told which results still need theirs (a board row, intervals still to come); the
# others' are deleted OUTCOMES_KEEP_DAYS days after they were written (submissions.retention).
OUTCOMES_KEEP_DAYS = envint("OUTCOMES_KEEP_DAYS", 30)
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "submissions.sweep", "schedule": SWEEP_INTERVAL},
    # Uploads that never complete are aborted and stop counting against quotas.
    "expire-uploads": {"task": "submissions.expire_uploads", "schedule": 15 * 60},
    "apply-retention": {"task": "submissions.apply_retention", "schedule": RETENTION_INTERVAL},
    # Boards of challenges whose deadline passed show everything (readers reveal them too).
    "reveal-due": {"task": "rankings.reveal_due", "schedule": 60},
}
# Fault-injection tests only: a folder whose files switch holds on (lifecycle.fault_hold).
FAULT_DIR = env("FAULT_DIR") or ""

# Operations (issue 26): limits per client address, failures that say what they are, health, metrics.
# Failed sign-ins (over every username) and failed API token authentications from one address
# within a window of ADDRESS_THROTTLE_WINDOW seconds, past which that address gets 429 until the
# window ends (leaderboard.accounts.throttle; counted in the cache). 0 turns a limit off.
LOGIN_FAILURES_PER_ADDRESS = envint("LOGIN_FAILURES_PER_ADDRESS", 50)
TOKEN_FAILURES_PER_ADDRESS = envint("TOKEN_FAILURES_PER_ADDRESS", 20)
ADDRESS_THROTTLE_WINDOW = max(1, envint("ADDRESS_THROTTLE_WINDOW", 900))
# A request that fails because the database, the broker or storage is down, or the disk is full,
# gets 503 with Retry-After: UNAVAILABLE_RETRY_AFTER seconds (leaderboard.ops.unavailable).
UNAVAILABLE_RETRY_AFTER = envint("UNAVAILABLE_RETRY_AFTER", 30)
# Each request checks its pooled database connection before using it, so that a database
# that went away and came back costs no request; PostgreSQL gives up connecting after
# DATABASE_CONNECT_TIMEOUT seconds (a request then answers 503 instead of hanging).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith(("postgresql", "postgis")):
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout",
                                                              envint("DATABASE_CONNECT_TIMEOUT", 5))
# /readyz (leaderboard.ops.probes) fails its storage check below this much free space for uploads.
READYZ_MIN_FREE_BYTES = envint("READYZ_MIN_FREE_BYTES", 256 * 2**20)
# /metrics answers a scraper that sends "Authorization: Bearer <METRICS_TOKEN>" (METRICS_TOKEN or
# METRICS_TOKEN_FILE), or that connects from an address in METRICS_ALLOWED_IPS (addresses or
# networks, "10.0.0.0/8,127.0.0.1"; the connecting address: behind a proxy on the same host that
# is the proxy's, so use the token there). Neither set: /metrics answers no one.
METRICS_TOKEN = env("METRICS_TOKEN") or ""
try:
    METRICS_ALLOWED_NETWORKS = [ipaddress.ip_network(item, strict=False) for item in envlist("METRICS_ALLOWED_IPS")]
except ValueError as exc:
    raise ImproperlyConfigured(f"Unexpected value METRICS_ALLOWED_IPS: {exc}; expected addresses or networks "
                               "separated by commas, such as 10.0.0.0/8,127.0.0.1") from None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"no_client_error_traceback": {"()": "leaderboard.lib.logs.NoClientErrorTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # A 403 or 404 is one line, not a traceback (leaderboard/lib/logs.py).
    "loggers": {"django.request": {"filters": ["no_client_error_traceback"]}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
}
