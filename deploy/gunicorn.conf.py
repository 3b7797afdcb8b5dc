"""gunicorn settings for the web process: gunicorn leaderboard.wsgi -c deploy/gunicorn.conf.py"""

import os

# Loopback unless told otherwise: the site belongs behind a reverse proxy (TLS, request
# limits). BIND=0.0.0.0:8000 listens on every interface, e.g. inside a container.
bind = os.environ.get("BIND") or f"127.0.0.1:{os.environ.get('PORT') or '8000'}"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
# Uploads in parts arrive as many requests of up to UPLOAD_PART_BYTES each; give
# a slow link time to send one part.
timeout = 300
accesslog = "-"
