from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "leaderboard.accounts"

    def ready(self) -> None:
        from leaderboard.accounts import throttle  # noqa: F401  # counts failed sign-ins per address
