from django.apps import AppConfig


class ParticipationConfig(AppConfig):
    name = "leaderboard.participation"

    def ready(self) -> None:
        from leaderboard.participation import webhooks
        from leaderboard.rankings.signals import row_published

        # A row new on a public board is announced to the benchmark's webhook (if it has one).
        row_published.connect(webhooks.on_row_published, dispatch_uid="participation-row-published")
