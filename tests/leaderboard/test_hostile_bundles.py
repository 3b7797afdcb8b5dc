"""Bundles that try to hurt the host (issue 37): an alias bomb, megabytes of description or paper
rows, tags that construct objects, scores that mean nothing. Each is refused with one line naming
the file, the line, the key and the reason (``load_benchmark`` exits 1, ``--dry-run`` included),
in bounded memory, before anything is written."""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from leaderboard.benchmarks.bundles import BUNDLES_DIR, BundleError, parse_bundle, read_bundle
from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.services import do_load_paper_rows

ROOT = Path(__file__).resolve().parents[2]
SQA3D = (BUNDLES_DIR / "sqa3d.yaml").read_text()
# The bomb (415 bytes there, 414 here): nine levels of nine aliases, 9**9 (387 million) strings once
# expanded.
BOMB = ('a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")))


def problems(text: str, tmp_path: Path, name: str = "b.yaml") -> list[str]:
    with pytest.raises(BundleError) as caught:
        parse_bundle(text, tmp_path / name)
    return caught.value.problems


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def run_limited(args: list[str], tmp_path: Path, limit_mib: int, timeout: float = 60) -> tuple[int, str, float, float]:
    """``manage.py *args`` in a child whose address space is capped at ``limit_mib``: its exit
    status, stderr, seconds and peak resident memory (MiB, its own: wait4's rusage)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mib << 20, limit_mib << 20))

    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATA_DIR": str(tmp_path / "data"), "OPENBLAS_NUM_THREADS": "1"}
    err = tmp_path / "stderr.txt"
    with open(err, "w") as err_file:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=err_file, preexec_fn=cap)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err.read_text(), time.monotonic() - start, usage.ru_maxrss / 1024


def test_the_alias_bomb_is_refused_quickly_in_bounded_memory_with_exit_1(tmp_path):
    """Before: 5.0-5.7 GB and a MemoryError traceback. Now a child capped at 300 MiB of address
    space refuses it with one line, and never builds what the aliases stand for."""
    assert len(BOMB.encode()) < 500
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    code, stderr, seconds, peak = run_limited(["load_benchmark", "--dry-run", str(path)], tmp_path, limit_mib=300)
    print(f"\nalias bomb: refused in {seconds:.2f} s (the whole command), peak RSS {peak:.0f} MiB")
    assert code == 1, stderr
    assert "Traceback" not in stderr and "MemoryError" not in stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("CommandError:")]
    assert line == (f"CommandError: bomb.yaml:{line_of(BOMB, 'f: &f')}: f[0]: the alias *e stands for 66,430 YAML "
                    f"nodes, which takes the bundle past 100,000 (an alias counts as all it repeats); expected a "
                    f"bundle that spells out what it declares")
    # Other shapes that would hang or overflow the reader: each refused with its place.
    assert problems("a: &a [1, *a]\n", tmp_path) == [
        "b.yaml:1: a[1]: the alias *a refers to a collection that contains it; expected plain data"]
    deep = "track: " + "[" * 40 + "]" * 40 + "\n"
    assert problems(deep, tmp_path) == [
        "b.yaml:1: track[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested deeper than 16 levels; expected a "
        "bundle's shape (see the schema)"]
    for tagged in ("!!python/object/apply:os.system [echo hi]", "!!binary aGk=", "!!set {a}"):
        assert problems(f"track: {tagged}\n", tmp_path) == [
            f"b.yaml:1: track: the tag {tagged.split()[0]} is not allowed; expected plain data (text, numbers, "
            f"true/false, null, lists and mappings)"]


def test_a_bundle_over_1_mib_is_refused_before_it_is_parsed_and_aliases_of_plain_blocks_still_load(tmp_path):
    big = tmp_path / "big.yaml"
    # 5 MB of description; what follows the first line is not YAML, so a refusal after parsing would say so.
    big.write_text("description: '" + "x" * 5_000_000 + "\n: : [\n")
    with pytest.raises(BundleError) as refused:
        read_bundle(big)
    assert refused.value.problems == ["big.yaml: expected a bundle of at most 1 MiB, but got 4.8 MiB; a bundle "
                                      "declares a benchmark (long pages belong in files it names)"]
    with pytest.raises(BundleError, match=r"^b.yaml: expected a bundle of at most 1 MiB, but got 2.0 MiB"):
        parse_bundle(SQA3D + "#" * (2 << 20), tmp_path / "b.yaml")
    # An anchor for a repeated block is fine: it is counted as what it repeats, far under the bound.
    text = SQA3D.replace("  paper:\n", "  paper: &paper\n", 1).replace(
        "  - method: MCAN\n", "  - method: MCAN\n    paper: *paper\n")
    [block] = parse_bundle(text, tmp_path / "b.yaml").paper_rows
    assert next(r for r in block["rows"] if r["method"] == "MCAN")["paper"]["venue"] == "ICLR 2023"


def test_every_string_and_array_of_the_schema_is_bounded_and_the_refusal_says_by_how_much(tmp_path):
    text = SQA3D.replace("order: 0\n", "order: 0\ndescription: " + "d" * 5001 + "\n")
    assert problems(text, tmp_path) == [f"b.yaml:{line_of(text, 'description: d')}: description: expected at most "
                                        f"5,000 characters, but got 5,001"]
    rows = "".join(f"  - method: M{i}\n    scores: {{EM: 0.5}}\n" for i in range(1001))
    text = SQA3D.split("  rows:\n")[0] + "  rows:\n" + rows
    assert problems(text, tmp_path) == [f"b.yaml:{line_of(text, '  rows:')}: paper_rows[0].rows: expected at most "
                                        f"1,000 items, but got 1,001"]
    text = SQA3D.replace("order: 0\n", "order: 0\nmaintainers: [ann, bob, ann]\n")
    assert problems(text, tmp_path) == [f"b.yaml:{line_of(text, 'maintainers:')}: maintainers: expected each item "
                                        f"once, but got \"ann\" more than once"]
    found = problems("track: sqa3d\ntitle: x\nsplits: [" + ", ".join(["1"] * 2000) + "]\n", tmp_path)
    assert found[0] == "b.yaml:3: splits: expected at most 20 items, but got 2,000"
    assert len(found) == 51 and found[-1] == "... and more problems: fix these first"  # not 2,001 lines
    text = SQA3D.replace("    note: Reported in the SQA3D paper, Table 3 (SQ→A)", "    note: " + "n" * 301)
    assert problems(text, tmp_path) == [f"b.yaml:{line_of(text, 'n' * 301)}: paper_rows[0].rows[0].note: expected "
                                        f"at most 300 characters, but got 301"]

    def unbounded(node, where):
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        assert "maxLength" in node or "string" not in types, where
        assert "maxItems" in node or "array" not in types, where
        assert "maxProperties" in node or not isinstance(node.get("additionalProperties"), dict), where
        for key, child in node.items():
            for i, sub in enumerate(child if isinstance(child, list) else [child]):
                if isinstance(sub, dict):
                    unbounded(sub, f"{where}.{key}[{i}]")

    from leaderboard.benchmarks.bundles import schema

    unbounded(schema(), "schema")


def test_paper_row_scores_must_be_metrics_of_the_track_in_their_range(db, tmp_path):
    """Before: EM 21.0 was drawn as 2100.0 and a metric the track lacks (F1) was stored."""
    text = (SQA3D.replace("      EM: 0.4365\n", "      EM: 21.0\n      F1: 0.3\n")
            .replace("      What/EM: 0.2858\n", "      Where/EM: 0.2858\n")
            .replace("      EM: 0.4658\n", "      EM: .nan\n"))
    assert problems(text, tmp_path) == [
        f"b.yaml:{line_of(text, 'EM: 21.0')}: paper_rows[0].rows[0].scores.EM: expected a fraction in [0, 1], but "
        f"got 21.0 (a percentage? 21 % is 0.21)",
        f"b.yaml:{line_of(text, 'F1: 0.3')}: paper_rows[0].rows[0].scores.F1: unknown score 'F1'; expected a metric "
        f"of sqa3d (EM, EM_R) or <group>/<metric> with a group of What, Is, How, Can, Which, Others",
        f"b.yaml:{line_of(text, 'Where/EM')}: paper_rows[0].rows[1].scores.Where/EM: unknown score 'Where/EM'; "
        f"expected a metric of sqa3d (EM, EM_R) or <group>/<metric> with a group of What, Is, How, Can, Which, "
        f"Others",
        f"b.yaml:{line_of(text, 'EM: .nan')}: paper_rows[0].rows[2].scores.EM: expected a fraction in [0, 1], but "
        f"got nan"]
    # The service that stores rows holds to the same rule (rows that come from elsewhere than a bundle).
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    load_bundled_benchmarks()
    split = Split.objects.get(benchmark__track="sqa3d")
    [block] = read_bundle(BUNDLES_DIR / "sqa3d.yaml").paper_rows
    with pytest.raises(ValueError, match=r"^sqa3d.yaml: Blind test: scores.EM: expected a fraction in \[0, 1\], but "
                                         r"got 43.65 \(a percentage\? 43.65 % is 0.4365\)$"):
        do_load_paper_rows(split, {**block, "rows": [{**block["rows"][0], "scores": {"EM": 43.65}}]}, "sqa3d.yaml")
    assert not LeaderboardEntry.objects.filter(split=split).exists()


def test_dry_run_prints_each_changed_value_whole_and_the_page_shows_the_description_once(db, client, tmp_path):
    path = tmp_path / "sqa3d.yaml"
    first = "First sentence. " + "A long description that goes on " * 40 + "MARKER-ONE"
    board = "board:\n  groups: [What, Is, How, Can, Which, Others]\n  metric: EM\n"
    path.write_text(SQA3D.replace("order: 0\n", f"order: 0\ndescription: {first}\n") + board)
    call_command("load_benchmark", str(path), stdout=io.StringIO())
    page = client.get("/benchmarks/sqa3d/").content.decode()
    assert page.count("MARKER-ONE") == 1 and len(page) < 100_000
    second = first.replace("MARKER-ONE", "MARKER-TWO")
    path.write_text(SQA3D.replace("order: 0\n", f"order: 0\ndescription: {second}\n") + board.replace("EM\n", "EM_R\n"))
    out = io.StringIO()
    call_command("load_benchmark", str(path), "--dry-run", stdout=out)
    out = [line.strip() for line in out.getvalue().splitlines()]
    # Cut at 60 characters, both values used to print as the same "'First sentence. A long description...'".
    assert f"-{first}" in out and f"+{second}" in out
    assert '-  "metric": "EM"' in out and '+  "metric": "EM_R"' in out
    assert not any("..." in line for line in out)
    assert Benchmark.objects.get(track="sqa3d").description == first and AuditEntry.objects.count() == 1


def test_every_refusal_of_load_benchmark_exits_1_with_one_line(db, tmp_path):
    path = tmp_path / "sqa3d.yaml"
    path.write_text(SQA3D.replace("      EM: 0.4365\n", "      EM: 43.65\n"))
    for args in ((), ("--dry-run",)):
        with pytest.raises(CommandError) as refused:
            call_command("load_benchmark", str(path), *args, stdout=io.StringIO())
        assert refused.value.returncode == 1
        assert str(refused.value) == (f"sqa3d.yaml:{line_of(path.read_text(), 'EM: 43.65')}: paper_rows[0].rows[0]"
                                      f".scores.EM: expected a fraction in [0, 1], but got 43.65 (a percentage? "
                                      f"43.65 % is 0.4365)")
    assert not Benchmark.objects.exists() and not AuditEntry.objects.exists()
