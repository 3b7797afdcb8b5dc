from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from leaderboard.accounts.services import do_create_token, personal_team


class Command(BaseCommand):
    help = "Print a new API token for a user (the key is shown once; only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", help="create the user if absent")
        parser.add_argument("--name", default="", help="a name for the token")
        parser.add_argument("--expires-days", type=int, help="expire after this many days")

    def handle(self, username, create_user, name, expires_days, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"No user {username!r}; pass --create-user to create one.")
            user = User.objects.create_user(username=username)
            user.set_unusable_password()
            user.save()
        personal_team(user)
        expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
        self.stdout.write(do_create_token(user, name=name, expires_at=expires_at))
