from django.core.management.base import BaseCommand

from leaderboard.submissions.uploads import do_expire_uploads


class Command(BaseCommand):
    help = "Abort uploads that did not complete in UPLOAD_EXPIRY_HOURS; their submissions stop counting."

    def handle(self, **options):
        self.stdout.write(f"Expired {do_expire_uploads()} upload(s).")
