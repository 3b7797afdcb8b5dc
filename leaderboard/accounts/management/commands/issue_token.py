from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from leaderboard.accounts.emails import EmailError, do_mark_verified
from leaderboard.accounts.services import do_create_token, personal_team


class Command(BaseCommand):
    help = "Print a new API token for a user (the key is shown once; only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", help="create the user if absent")
        parser.add_argument("--name", default="", help="a name for the token")
        parser.add_argument("--expires-days", type=int, help="expire after this many days")
        parser.add_argument("--email", help="set the user's e-mail address")
        parser.add_argument("--email-verified", action="store_true",
                            help="record that address as verified, without mailing a link (you vouch for it)")

    def handle(self, username, create_user, name, expires_days, email=None, email_verified=False, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"No user {username!r}; pass --create-user to create one.")
            user = User.objects.create_user(username=username)
            user.set_unusable_password()
            user.save()
        personal_team(user)
        if email_verified and not (email or user.email):
            raise CommandError("--email-verified needs an address: give --email.")
        try:
            if email_verified:
                do_mark_verified(user, email or user.email)
            elif email is not None:
                user.email = email.strip().lower()
                user.save(update_fields=["email"])
        except EmailError as exc:
            raise CommandError(str(exc)) from None
        expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
        self.stdout.write(do_create_token(user, name=name, expires_at=expires_at))
