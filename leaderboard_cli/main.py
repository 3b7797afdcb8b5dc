"""lb: submit predictions to the leaderboard from a terminal.

Start with "lb login --server URL" (a token from the site's API tokens page),
then lb validate, lb submit, lb list, lb status ID and lb publish ID.

Exit status: 0 success; 1 an error (the message says which); 2 bad usage;
3 the submission failed or was cancelled (--wait); 4 lb validate found a
problem in the file; 141 the reader of the output went away (lb list | head).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from leaderboard_cli import __version__, config
from leaderboard_cli.client import ApiError, Client
from leaderboard_cli.upload import check_file, submit_file

EXIT_ERROR, EXIT_USAGE, EXIT_SUBMISSION_FAILED, EXIT_INVALID_FILE = 1, 2, 3, 4
EXIT_PIPE_CLOSED = 141  # as a program killed by SIGPIPE: the shell's 128 + 13
# What lb tracks says of a split whose labels are not loaded (the site's benchmarks.phases words).
NOT_OPEN = "not open yet: labels not loaded yet: opens when they are"


def _client(args: argparse.Namespace, token_required: bool = True) -> Client:
    settings = config.load()
    token = settings.get("token")
    if token_required and not token:
        raise ApiError("No API token: run `lb login` (create a token on the site's API tokens page) "
                       "or set LB_TOKEN.")
    return Client(settings.get("server", ""), token)


def _pct(value: Any) -> str:
    return f"{value * 100:6.2f}" if isinstance(value, (int, float)) else "     —"


def _print_status(s: dict[str, Any]) -> None:
    line = f"#{s['id']} {s['track']}/{s['split']} {s['method']} (team {s['team']}): {s['status']}"
    if s["status"] == "running":
        line += f" {s['progress'] * 100:.0f}%"
    if s.get("is_published"):
        line += ", published"
    print(line)
    if s.get("error"):
        print(f"  {s['error']['kind'].replace('_', ' ')}: {s['error']['message']}")
    elif s.get("message"):
        print(f"  {s['message']}")


def _print_results(s: dict[str, Any]) -> None:
    result = s.get("result")
    if not result:
        print(f"#{s['id']} has no scores yet (status {s['status']}).")
        return
    metrics = list(result["metrics"])
    print(f"#{s['id']} {s['track']}/{s['split']} {s['method']}: scorer {result['scorer_version']}")
    width = max([len("Overall"), *(len(g) for g in result["breakdown"])])
    print(" " * width + "  " + "  ".join(f"{m:>8}" for m in metrics) + "     count")
    print(f"{'Overall':<{width}}  " + "  ".join(f"{_pct(result['metrics'][m]):>8}" for m in metrics))
    for group, values in result["breakdown"].items():
        print(f"{group:<{width}}  " + "  ".join(f"{_pct(values.get(m)):>8}" for m in metrics)
              + f"  {values.get('count', ''):>8}")
    for warning in result.get("warnings", []):
        print(f"warning: {warning}")


def cmd_login(args: argparse.Namespace) -> int:
    server = args.server or config.load().get("server")
    if not server:
        raise ApiError("Give the server: lb login --server https://leaderboard.example.org")
    token = args.token or getpass.getpass("API token (from the site's API tokens page): ").strip()
    me = Client(server, token).get("me")
    path = config.save(server=server.rstrip("/"), token=token)
    teams = ", ".join(t["slug"] for t in me["teams"])
    print(f"Signed in to {server} as {me['username']} (teams: {teams}). Saved to {path}.")
    return 0


def cmd_whoami(args: argparse.Namespace) -> int:
    client = _client(args)
    me = client.get("me")
    print(f"{me['username']} on {client.server}")
    for team in me["teams"]:
        print(f"  {team['slug']:<24} {team['role']}{' (personal)' if team['personal'] else ''}")
    return 0


def _split_state(split: dict[str, Any]) -> str:
    """``test``, ``test (not open yet: labels not loaded yet: opens when they are)`` or ``test (closed)``."""
    if split["accepting_submissions"]:
        return str(split["name"])
    if split.get("labels_loaded") is False:
        return f"{split['name']} ({NOT_OPEN})"
    return f"{split['name']} (closed)"


def cmd_tracks(args: argparse.Namespace) -> int:
    for t in _client(args, token_required=False).get("tracks")["tracks"]:
        splits = ", ".join(_split_state(s) for s in t["splits"])
        print(f"{t['track']:<12} {t['title']}\n{'':<12} splits: {splits}; primary {t['primary_metric']}; "
              f"files {' or '.join(t['upload_suffixes'])} up to {t['max_upload_bytes'] / 2**20:,.0f} MiB")
    return 0


def _default_split(client: Client, track: str) -> str:
    for t in client.get("tracks")["tracks"]:
        if t["track"] == track:
            splits = sorted(t["splits"], key=lambda s: not s["default"])
            if splits:
                return str(splits[0]["name"])
    raise ApiError(f"Unknown track {track!r}; see `lb tracks`.")


def _manifest(args: argparse.Namespace) -> dict[str, Any]:
    """The split's public manifest: from --manifest, the server, or the copy cached by an earlier run."""
    return _manifest_answer(args)["manifest"]


def _manifest_answer(args: argparse.Namespace) -> dict[str, Any]:
    """The server's answer for the split's manifest (the manifest and the split's upload rules), or a file's:
    --manifest names the answer saved whole, or the manifest alone (then the track's own rules hold)."""
    if args.manifest:
        data = json.loads(Path(args.manifest).read_text())
        return data if isinstance(data, dict) and "manifest" in data else {"manifest": data}
    client = _client(args, token_required=False)
    split = args.split or _default_split(client, args.track)
    cached = config.state_dir() / "manifests" / f"{args.track}-{split}.json"
    try:
        data = client.get(f"tracks/{args.track}/{split}/manifest")
    except ApiError as exc:
        if exc.status == 0 and cached.exists():
            print(f"(offline: using the manifest cached in {cached})", file=sys.stderr)
            return config.read_json(cached)
        raise
    config.write_json(cached, data)
    return data


# Where the scoring core is not installed (`lb` alone: the scene-leaderboards-cli distribution).
NEEDS_CORE = ("{command} runs the scoring core's {what}, which is not installed here: install the client with "
              "its `validate` extra and the core, from the repository's root: "
              "python -m pip install -c requirements.txt \"./distributions/cli[validate]\" ./distributions/core")


def _need_core(command: str, what: str) -> None:
    """``ApiError`` saying how to install the core, unless it is installed."""
    try:
        import evaluation_workers.cli  # noqa: F401
    except ImportError:
        raise ApiError(NEEDS_CORE.format(command=command, what=what)) from None


def cmd_validate(args: argparse.Namespace) -> int:
    _need_core("validate", "validators")
    from evaluation_workers.errors import SubmissionError
    from evaluation_workers.tracks import get_track

    try:
        track = get_track(args.track)
    except KeyError as exc:
        raise ApiError(str(exc.args[0])) from None
    path = Path(args.file)
    check_file(path)
    # The server's rules first, as it applies them: the file's name, then its size on the split.
    if (refused := track.name_refusal(path.name)) is not None:
        return _invalid(path, refused)
    answer = _manifest_answer(args)
    limit = answer.get("max_upload_bytes")  # the split's, where the server said it; else the track's
    if (refused := track.size_refusal(path.name, path.stat().st_size, limit)) is not None:
        return _invalid(path, refused)
    try:
        summary = track.validate(path, answer["manifest"])
    except SubmissionError as exc:
        return _invalid(path, exc.message)
    print(f"{path.name}: valid for {args.track}. {json.dumps(summary, default=str)}")
    return 0


def _invalid(path: Path, message: str) -> int:
    """Say why ``path`` is refused; the validators' messages already start with the file's name: say it once."""
    for prefix in (f"{path}: ", f"{path.name}: "):
        message = message.removeprefix(prefix)
    print(f"{path.name}: invalid: {message}", file=sys.stderr)
    return EXIT_INVALID_FILE


def cmd_convert(args: argparse.Namespace) -> int:
    """The scoring core's converter (``python -m evaluation_workers convert``), the manifest from the server."""
    _need_core("convert", "converters")
    from evaluation_workers.cli import input_problem, run_convert
    from evaluation_workers.errors import SubmissionError

    if (problem := input_problem(args)) is not None:
        raise ApiError(problem)
    manifest = _manifest(args)  # the server's (or --manifest): the result is validated before you upload it
    try:
        print(run_convert(args, manifest))
    except SubmissionError as exc:
        print(f"lb: {exc.message}", file=sys.stderr)
        return EXIT_INVALID_FILE
    return 0


def _offer_convert(args: argparse.Namespace) -> int | None:
    """A file only a converter reads is never uploaded: print the command, run it if asked. (Without the
    core, the server refuses such a file by its name, with the same advice.)"""
    try:
        from evaluation_workers.convert import NEEDS_CONVERTING, command
    except ImportError:
        return None

    path = Path(args.file)
    match = NEEDS_CONVERTING.get(path.suffix.lower())
    if match is None:
        return None
    track, form = match
    source = str(path.parent) if path.suffix.lower() == ".pth" else str(path)  # Open3DIS: the folder of scenes
    line = command(track, form, source)
    print(f"{path.name} needs unpickling, which the leaderboard never does: convert it here first with\n  {line}\n"
          f"then submit the file it writes.", file=sys.stderr)
    if track != args.track or not sys.stdin.isatty() or input("Run it now? [y/N] ").strip().lower() != "y":
        return EXIT_USAGE
    convert_args = parser().parse_args(["convert", *line.split()[2:]])
    return cmd_convert(convert_args)


def _wait(client: Client, submission: dict[str, Any], quiet: bool) -> dict[str, Any]:
    with tqdm(total=100, desc=f"#{submission['id']} {submission['status']}", unit="%", disable=quiet,
              bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}", dynamic_ncols=True) as bar:
        while submission["status"] not in {"finished", "failed", "cancelled"}:
            time.sleep(1)
            submission = client.get(f"submissions/{submission['id']}")
            bar.set_description(f"#{submission['id']} {submission['status']}")
            bar.n = round(submission["progress"] * 100)
            bar.refresh()
        if submission["status"] == "finished":
            bar.n = 100
            bar.refresh()
    return submission


def cmd_submit(args: argparse.Namespace) -> int:
    offered = _offer_convert(args)
    if offered is not None:
        return offered
    client = _client(args)
    target = {"track": args.track, "split": args.split or _default_split(client, args.track),
              "method_name": args.method, "team": args.team}
    submission = submit_file(client, Path(args.file), target, resume=not args.no_resume, quiet=args.quiet)
    _print_status(submission)
    if submission["status"] in {"failed", "cancelled"}:
        return EXIT_SUBMISSION_FAILED
    print(f"Follow it with `lb status {submission['id']}`; scores are private until `lb publish "
          f"{submission['id']}`.")
    if not args.wait:
        return 0
    submission = _wait(client, submission, args.quiet)
    _print_status(submission)
    if submission["status"] != "finished":
        return EXIT_SUBMISSION_FAILED
    _print_results(submission)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    submission = _client(args).get(f"submissions/{args.id}")
    _print_status(submission)
    return EXIT_SUBMISSION_FAILED if submission["status"] in {"failed", "cancelled"} else 0


def cmd_list(args: argparse.Namespace) -> int:
    """Your teams' submissions, newest first, with the primary score where there is one."""
    client = _client(args)
    submissions = client.get("submissions")["submissions"]
    if args.track:
        submissions = [s for s in submissions if s["track"] == args.track]
    submissions = submissions[:args.limit]
    if not submissions:
        print("No submissions yet" + (f" on {args.track}" if args.track else "") + ": `lb submit` sends one.")
        return 0
    primary = {t["track"]: t["primary_metric"] for t in client.get("tracks")["tracks"]}
    print(f"{'id':>6}  {'track/split':<18} {'method':<24} {'status':<20} {'primary':>16}  created")
    for s in submissions:
        metrics = (s.get("result") or {}).get("metrics") or {}
        metric = primary.get(s["track"], "")
        score = f"{_pct(metrics.get(metric)).strip()} {metric}" if metric in metrics else "—"
        status = s["status"] + (", published" if s.get("is_published") else "")
        print(f"{s['id']:>6}  {s['track'] + '/' + s['split']:<18} {s['method'][:24]:<24} {status:<20} "
              f"{score:>16}  {s['created_at'][:16].replace('T', ' ')}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    submission = _client(args).get(f"submissions/{args.id}")
    if args.json:
        print(json.dumps(submission.get("result"), indent=2))
    else:
        _print_results(submission)
    return 0 if submission.get("result") else EXIT_ERROR


def cmd_publish(args: argparse.Namespace) -> int:
    options = {"json": {"anonymous": True}} if args.anonymous else {}
    submission = _client(args).post(f"submissions/{args.id}/publish", **options)
    print(f"#{submission['id']} {submission['method']} is now the public entry of its method on "
          f"{submission['track']}/{submission['split']}"
          + (", as Anonymous (under review) until `lb method reveal`." if args.anonymous else "."))
    return 0


def cmd_quota(args: argparse.Namespace) -> int:
    client = _client(args)
    params = {"track": args.track, "split": args.split or "", "team": args.team or ""}
    q = client.get("quota", params={k: v for k, v in params.items() if v})
    print(f"{q['team']} on {q['track']}/{q['split']}:")
    for name in ("per_day", "total", "in_flight", "rejected_per_day"):
        print(f"  {name.replace('_', ' '):<17} {q[name]['used']:>4} of {q[name]['limit']}")
    _print_interval(q)
    if "user" in q:  # a site with limits per user (over all your teams)
        print("you, over all your teams:")
        for name in ("per_day", "total", "in_flight"):
            print(f"  {name.replace('_', ' '):<17} {q['user'][name]['used']:>4} of {q['user'][name]['limit']}")
        _print_interval(q["user"])
    print(f"  the daily counts reset at {q['resets_at']}")
    return 0


def _print_interval(q: dict[str, Any]) -> None:
    interval = q.get("min_interval") or {}
    if interval.get("seconds"):
        after = f"; the next is allowed at {interval['next_at']}" if interval.get("next_at") else ""
        print(f"  {'min interval':<17} {interval['seconds']} s{after}")


def _find_method(client: Client, name: str, team: str | None) -> dict[str, Any]:
    params = {"name": name, **({"team": team} if team else {})}
    methods = client.get("my/methods", params=params)["methods"]
    if not methods:
        raise ApiError(f"No method {name!r} in your teams (a method is created by its first submission).")
    if len(methods) > 1:
        raise ApiError(f"Several teams have a method {name!r}; pick one with --team "
                       f"({', '.join(m['team'] for m in methods)}).")
    return methods[0]


def _print_method(m: dict[str, Any]) -> None:
    for field in ("name", "team", "description", "authors", "paper_url", "code_url", "uses_extra_data", "details"):
        print(f"{field:<16} {m[field] if m[field] not in (None, '') else '—'}")
    if m.get("anonymous"):
        print(f"{'public as':<16} Anonymous (under review): `lb method reveal {m['name']}` shows the team")
    missing = m["missing_for_publishing"]
    print("ready to publish" if not missing else f"missing for publishing: {', '.join(missing)}")


def cmd_method(args: argparse.Namespace) -> int:
    client = _client(args)
    method = _find_method(client, args.name, args.team)
    if args.action == "reveal":
        method = client.post(f"my/methods/{method['id']}/reveal")
    elif args.action == "set":
        changes = {field: getattr(args, field) for field in
                   ("description", "authors", "paper_url", "code_url", "details") if getattr(args, field) is not None}
        if args.rename:
            changes["name"] = args.rename
        if args.extra_data is not None:
            changes["uses_extra_data"] = args.extra_data == "yes"
        if not changes:
            raise ApiError("Nothing to change: give --description, --authors, --paper-url, --code-url, "
                           "--extra-data yes|no, --details or --rename.")
        method = client.call("PATCH", f"my/methods/{method['id']}", json=changes)
    _print_method(method)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lb", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"lb {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("login", help="store the server URL and an API token")
    c.add_argument("--server", help="e.g. https://leaderboard.example.org")
    c.add_argument("--token", help="an API token (asked for when not given)")
    c.set_defaults(func=cmd_login)
    sub.add_parser("whoami", help="the token's user and teams").set_defaults(func=cmd_whoami)
    sub.add_parser("tracks", help="tracks, splits and accepted files").set_defaults(func=cmd_tracks)

    c = sub.add_parser("validate", help="check a predictions file offline with the server's validator")
    c.add_argument("--track", required=True)
    c.add_argument("--split", help="default: the track's default split")
    c.add_argument("--manifest", help="a manifest JSON file instead of the server's (fully offline)")
    c.add_argument("file")
    c.set_defaults(func=cmd_validate)

    text = "convert a codebase's own output (Open3DIS .pth, EmbodiedScan .pkl, ...) into an accepted file, here"
    try:
        from evaluation_workers.cli import add_convert_arguments
    except ImportError:  # every word goes to `lb convert`, which says how to install the core
        c = sub.add_parser("convert", help=text, prefix_chars="\0", add_help=False)
        c.add_argument("arguments", nargs=argparse.REMAINDER)
    else:
        c = sub.add_parser("convert", help=text)
        add_convert_arguments(c, manifest_from_labels=False)
        c.add_argument("--split", help="the split whose manifest checks the result (default: the track's default)")
    c.set_defaults(func=cmd_convert)

    c = sub.add_parser("submit", help="upload predictions (large files in resumable parts)")
    c.add_argument("--track", required=True)
    c.add_argument("--split", help="default: the track's default split")
    c.add_argument("--method", required=True, help="method name; its submissions share a leaderboard row")
    c.add_argument("--team", help="team slug (default: your personal team)")
    c.add_argument("--wait", action="store_true", help="follow scoring and print the scores")
    c.add_argument("--no-resume", action="store_true", help="start a new upload even if one was interrupted")
    c.add_argument("file")
    c.set_defaults(func=cmd_submit)

    c = sub.add_parser("list", help="your teams' submissions, newest first")
    c.add_argument("--track", help="only this track")
    c.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    c.set_defaults(func=cmd_list)

    for name, func, text in (("status", cmd_status, "a submission's status"),
                             ("results", cmd_results, "a submission's aggregate scores"),
                             ("publish", cmd_publish, "make a submission its method's public entry")):
        c = sub.add_parser(name, help=text)
        c.add_argument("id", type=int)
        if name == "results":
            c.add_argument("--json", action="store_true", help="the result JSON")
        if name == "publish":
            c.add_argument("--anonymous", action="store_true",
                           help="as 'Anonymous (under review)': no team or authors until lb method reveal")
        c.set_defaults(func=func)

    c = sub.add_parser("quota", help="your team's quota on a split")
    c.add_argument("--track", required=True)
    c.add_argument("--split")
    c.add_argument("--team")
    c.set_defaults(func=cmd_quota)

    c = sub.add_parser("method", help="show or describe a method (publishing needs a description), or reveal "
                                      "an anonymous one")
    c.add_argument("action", choices=["show", "set", "reveal"])
    c.add_argument("name")
    c.add_argument("--team")
    c.add_argument("--description")
    c.add_argument("--authors")
    c.add_argument("--paper-url", dest="paper_url")
    c.add_argument("--code-url", dest="code_url")
    c.add_argument("--extra-data", choices=["yes", "no"], help="uses training data beyond the official split")
    c.add_argument("--details")
    c.add_argument("--rename", help="a new name for the method")
    c.set_defaults(func=cmd_method)
    return p


def run(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ApiError as exc:
        print(f"lb: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("\nlb: interrupted; run the same command again to resume the upload.", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    """``run``, quiet when the reader of its output goes away (``lb list | head``): no traceback."""
    try:
        try:
            return run(argv)
        finally:  # also after --help (SystemExit): a closed pipe shows here, not at the interpreter's exit
            sys.stdout.flush()
    except BrokenPipeError:
        # What is still buffered goes nowhere, so that the interpreter's own flush at exit is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
