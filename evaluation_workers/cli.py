"""Command line of the scoring core: ``python -m evaluation_workers``.

    score     --track T --labels L --predictions P [--output F]
    validate  --track T (--labels L | --manifest M) --predictions P
    manifest  --track T --labels L

``score`` prints the result JSON of METRICS.md; ``validate`` checks a file's
format against the public manifest (no hidden labels needed) and exits 1 with
a message naming the file and field on a bad file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from evaluation_workers.errors import SubmissionError
from evaluation_workers.tracks import get_track, names


def _progress_to_stderr(fraction: float, message: str = "") -> None:
    print(f"[{fraction * 100:5.1f}%] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluation_workers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    score = sub.add_parser("score", help="score predictions against labels; prints the result JSON")
    score.add_argument("--track", required=True, choices=names())
    score.add_argument("--labels", required=True, type=Path, help="labels folder or file (official layout)")
    score.add_argument("--predictions", required=True, type=Path)
    score.add_argument("--output", type=Path, help="also write the result JSON here")
    score.add_argument("--quiet", action="store_true", help="no progress on stderr")

    validate = sub.add_parser("validate", help="check a predictions file's format")
    validate.add_argument("--track", required=True, choices=names())
    source = validate.add_mutually_exclusive_group(required=True)
    source.add_argument("--labels", type=Path, help="labels folder or file (only public facts are used)")
    source.add_argument("--manifest", type=Path, help="public manifest JSON of the split")
    validate.add_argument("--predictions", required=True, type=Path)

    manifest = sub.add_parser("manifest", help="print the public manifest of a labels folder")
    manifest.add_argument("--track", required=True, choices=names())
    manifest.add_argument("--labels", required=True, type=Path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    track = get_track(args.track)
    try:
        if args.command == "score":
            progress = (lambda f, m="": None) if args.quiet else _progress_to_stderr
            result = track.score(args.labels, args.predictions, progress)
            text = json.dumps(result, indent=2)
            if args.output:
                args.output.write_text(text + "\n")
            print(text)
        elif args.command == "validate":
            manifest = (json.loads(args.manifest.read_text()) if args.manifest
                        else track.manifest(args.labels))
            summary = track.validate(args.predictions, manifest)
            print(json.dumps({"valid": True, **summary}, indent=2))
        else:
            print(json.dumps(track.manifest(args.labels), indent=2))
    except SubmissionError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0
