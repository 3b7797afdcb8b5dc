from __future__ import annotations

import argparse
import importlib
import json
import sys

from evaluation_workers.synthetic import GENERATORS


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation_workers.synthetic")
    sub = parser.add_subparsers(dest="track", required=True)
    modules = {}
    for track, module_name in GENERATORS.items():
        module = importlib.import_module(module_name)
        modules[track] = module
        module.add_arguments(sub.add_parser(track, help=(module.__doc__ or "").split("\n")[0]))
    args = parser.parse_args()
    written = modules[args.track].generate(args)
    print(json.dumps(written, indent=2, default=str))
    return 0


sys.exit(main())
