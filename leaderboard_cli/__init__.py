"""``lb``: the leaderboard's command-line client. It talks to the REST API only
(``/api/v1``); ``lb validate`` also runs the scoring core's validators offline."""

__version__ = "0.1.0"
