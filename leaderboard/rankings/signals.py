"""What the rankings tell other apps, without importing them."""

from django.dispatch import Signal

# A row new on a public board (published, revealed or shown again), sent inside the transaction
# that writes it: ``entry`` (a ``LeaderboardEntry``). The participation app tells the benchmark's
# webhook.
row_published = Signal()
