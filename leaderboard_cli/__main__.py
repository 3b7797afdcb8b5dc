import sys

from leaderboard_cli.main import main

sys.exit(main())
