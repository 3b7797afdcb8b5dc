"""gunicorn settings for the web process: gunicorn leaderboard.wsgi -c deploy/gunicorn.conf.py"""

import os

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
# Uploads in parts arrive as many requests of up to UPLOAD_PART_BYTES each; give
# a slow link time to send one part.
timeout = 300
accesslog = "-"
