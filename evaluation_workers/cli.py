"""Command line of the scoring core: ``python -m evaluation_workers``.

    score     --track T --labels L --predictions P [--output F]
    validate  --track T (--labels L | --manifest M) --predictions P
    manifest  --track T --labels L
    convert   --track T --from FORM IN OUT [--manifest M | --labels L] [options]
    convert-labels --track mmscan-vg --annotations MMScan_VG.json --infos embodiedscan_infos_val.pkl --split val OUT
    check-track NAME [--keep DIR]
    worker    [celery worker options]

``score`` prints the result JSON of METRICS.md; ``validate`` checks a file's
format against the public manifest (no hidden labels needed) and exits 1 with
a message naming the file and field on a bad file. ``convert`` turns a
codebase's own output (Open3DIS ``.pth``, an OpenMask3D dump, an EmbodiedScan
challenge ``.pkl``, LEO's ``results.json``) into an accepted form on the
researcher's machine (``evaluation_workers/convert/``); ``convert-labels``
writes MMScan VG labels from the dataset's files on the maintainer's. ``check-track`` runs the
contract every track keeps on an installed track's demo data and names each rule it breaks
(``evaluation_workers/tracks/contract.py``; exit 1 if one fails). ``worker`` starts a
scoring worker on the queues of the tracks in ``EVAL_TRACKS`` (default: all)
for its device (``EVAL_QUEUE_DEVICES``, default from ``EVAL_DEVICE``),
normal queues first, then their bulk twins (``evaluation_workers.queues``);
further options go to ``celery worker`` (e.g. ``-n eval@%h -l info``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation_workers import allocator
from evaluation_workers.convert import FORMS, convert
from evaluation_workers.errors import LabelsError, SubmissionError
from evaluation_workers.tracks import get_track, names
from evaluation_workers.tracks.openscan.labels import ASPECTS


def _progress_to_stderr(fraction: float, message: str = "") -> None:
    print(f"[{fraction * 100:5.1f}%] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluation_workers", description=__doc__.replace("``", ""),
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
    add_convert_arguments(sub.add_parser("convert", help="convert a codebase's own output into an accepted form"))

    labels = sub.add_parser("convert-labels", help="MMScan VG labels JSON from the dataset's files (maintainers)")
    labels.add_argument("--track", required=True, choices=["mmscan-vg"])
    labels.add_argument("--annotations", required=True, type=Path, help="MMScan_samples/MMScan_VG.json")
    labels.add_argument("--infos", required=True, type=Path, help="embodiedscan_infos_<split>.pkl (a trusted pickle)")
    labels.add_argument("--split", required=True, help="the split key in the annotations (val, test)")
    labels.add_argument("out", type=Path, help="labels JSON to write (for manage.py load_labels)")

    checked = sub.add_parser("check-track", help="check an installed track against the contract every track keeps")
    checked.add_argument("name", help="the track's name (its entry point in scene_leaderboards.tracks)")
    checked.add_argument("--keep", type=Path, metavar="DIR", help="write the demo data here and keep it")

    worker = sub.add_parser("worker", help="run a scoring worker on the queues of EVAL_TRACKS")
    worker.add_argument("celery_args", nargs=argparse.REMAINDER, help="passed to celery worker")
    return parser


def add_convert_arguments(c: argparse.ArgumentParser, manifest_from_labels: bool = True) -> None:
    """The arguments of ``convert``; ``lb convert`` adds the same ones (it fetches the manifest itself)."""
    c.add_argument("--track", required=True, choices=names())
    c.add_argument("--from", dest="form", required=True, choices=sorted({f for t in FORMS.values() for f in t}),
                   help="open3dis, openmask3d (openscan); embodiedscan-pkl (mmscan-vg); leo (sqa3d)")
    c.add_argument("--manifest", type=Path, help="public manifest JSON of the split (checks ids and sizes)")
    if manifest_from_labels:
        c.add_argument("--labels", type=Path, help="labels folder or file instead of a manifest")
    c.add_argument("--to", choices=["official", "compact"], default="official",
                   help="openscan: the official zip (default) or the compact .npz (needs the manifest)")
    c.add_argument("--aspect", choices=ASPECTS, help="openscan: IN holds <scene_id> files of this one aspect")
    c.add_argument("--sample-ids", type=Path, help="mmscan-vg: the ids of a list of results, in order")
    c.add_argument("--questions", type=Path, help="sqa3d: v1_balanced_questions_<split>_scannetv2.json")
    c.add_argument("source", type=Path, help="the input file or folder")
    c.add_argument("dest", type=Path, help="the file to write")


def run_convert(args: argparse.Namespace, manifest: dict[str, Any] | None) -> str:
    """Convert, then validate the result against the manifest when there is one; the lines to print."""
    options = {"open3dis": {"to": args.to, "aspect": args.aspect}, "openmask3d": {"to": args.to, "aspect": args.aspect},
               "embodiedscan-pkl": {"sample_ids": args.sample_ids}, "leo": {"questions": args.questions}}
    summary = convert(args.track, args.form, args.source, args.dest, manifest, **options.get(args.form, {}))
    if manifest is None:
        return summary + "\n(not validated: give --manifest to check it against the split)"
    checked = get_track(args.track).validate(args.dest, manifest)
    return summary + "\nvalid: " + json.dumps(checked, default=str)


WORKER_MISSING = ("the scoring worker is not installed here: it is the scene-leaderboards-worker distribution "
                  "(python -m pip install -c requirements.txt ./distributions/worker, from the repository's root)")


def run_worker(celery_args: Sequence[str]) -> int:
    from evaluation_workers import signing
    from evaluation_workers.queues import served_devices, served_tracks, worker_queues

    try:
        from evaluation_workers.worker import metrics
    except ModuleNotFoundError as exc:  # the core alone (an offline scorer): no worker, no Celery
        if not (exc.name or "").startswith(("evaluation_workers.worker", "celery", "kombu", "prometheus_client")):
            raise
        print(f"error: {WORKER_MISSING}", file=sys.stderr)
        return 2

    metrics.prepare()  # before the app (and prometheus_client) is imported: every pool process writes there
    from evaluation_workers.worker.app import app

    try:  # without it every report would be refused: say so now, not per task
        signing.key_from_environ("EVAL_RESULTS_SIGNING_KEY")
    except signing.SigningKeyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if port := os.environ.get("EVAL_METRICS_PORT", "").strip():
        addr = os.environ.get("EVAL_METRICS_ADDR", "").strip() or "127.0.0.1"
        try:
            metrics.serve(int(port), addr)
        except (ValueError, OSError) as exc:
            print(f"error: EVAL_METRICS_PORT={port} on {addr}: {exc}", file=sys.stderr)
            return 2
        print(f"Scoring worker metrics: http://{addr}:{port}/metrics", file=sys.stderr, flush=True)
    queues = worker_queues(served_tracks(), served_devices())
    print(f"Scoring worker queues: {','.join(queues)}", file=sys.stderr, flush=True)
    args = ["worker", "-Q", ",".join(queues), *celery_args]
    if not {"-n", "--hostname"} & set(celery_args):
        args += ["-n", "eval@%h"]
    app.worker_main(args)
    return 0


def check_track(name: str, keep: Path | None = None) -> int:
    """Run the track contract's rules on ``name``; print each, and say which failed (exit 1) in words."""
    from evaluation_workers.tracks import UnknownTrack
    from evaluation_workers.tracks.contract import Report, check

    try:
        track = get_track(name)
    except UnknownTrack as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a plugin that fails to import: say so, as the registry logs it
        print(f"error: track {name!r} failed to load: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"check-track {name}: {track.title}, scorer {track.scorer_version} "
          f"({getattr(track.score, '__module__', '?')})", flush=True)
    report = Report()
    for finding in check(name, keep):
        report.findings.append(finding)
    print("\n".join(report.lines()))
    if report.failed:
        print(f"error: {name} breaks {len(report.failed)} rule(s) of the track contract: "
              f"{'; '.join(f.rule.name for f in report.failed)} (docs/writing-a-track.md)", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    allocator.tune()  # before the worker forks its pool: the children inherit the settings
    if argv[:1] == ["worker"]:  # everything after it is celery's (argparse would take its dashes)
        return run_worker(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "check-track":
        return check_track(args.name, args.keep)
    if (problem := input_problem(args)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
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
        elif args.command == "convert":
            manifest = (json.loads(args.manifest.read_text()) if args.manifest
                        else track.manifest(args.labels) if args.labels else None)
            print(run_convert(args, manifest))
        elif args.command == "convert-labels":
            from evaluation_workers.convert.mmscan_labels import convert_labels  # unpickles: only when asked

            print(convert_labels(args.annotations, args.infos, args.out, args.split))
        else:
            print(json.dumps(track.manifest(args.labels), indent=2))
    except SubmissionError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except LabelsError as exc:  # the researcher's own labels, offline: theirs to read
        print(f"error: labels: {exc}", file=sys.stderr)
        return 1
    return 0


# The options that name an input, as the parser stores them, and whether each must be a file; the outputs.
_INPUTS = {"labels": ("--labels", False), "predictions": ("--predictions", True), "manifest": ("--manifest", True),
           "annotations": ("--annotations", True), "infos": ("--infos", True), "source": ("IN", False),
           "sample_ids": ("--sample-ids", True), "questions": ("--questions", True)}
_OUTPUTS = {"output": "--output", "dest": "OUT", "out": "OUT"}


def input_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the first input the command names that does not exist, or is a folder
    where a file is expected, or output with no folder to go in ("<option> <path>: ..."); None if
    nothing is."""
    for attribute, (option, file_only) in _INPUTS.items():
        value = getattr(args, attribute, None)
        if not isinstance(value, Path):
            continue
        if not value.exists():
            return f"{option} {value}: no such file or folder"
        if file_only and value.is_dir():
            return f"{option} {value}: Expected a file, but got a folder"
    for attribute, option in _OUTPUTS.items():  # found before the work, not after it
        output = getattr(args, attribute, None)
        if isinstance(output, Path) and not output.parent.is_dir():
            return f"{option} {output}: no folder {output.parent} to write it in"
    return None
