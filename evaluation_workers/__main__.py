import sys

from evaluation_workers.cli import main

sys.exit(main())
