"""Hostile input and faults in the run directory, the session and the files core reads.

Fault injection, in the default run: symbolic links where a run's files or
directories belong, run ids and results folders that cannot be used, a real
file-size limit (``RLIMIT_FSIZE`` in the child pytest process) and injected
ENOSPC / EACCES during writes, bad UTF-8 and bad JSON in every file core reads
back, and a scripted model whose answer holds a lone surrogate, run through a
real protocol.  Every refused session leaves the files it found byte-identical.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import pytest

from benchmarks.core._canonical import FileReadError, FileWriteError, atomic_write_json, read_json_file
from benchmarks.core.completed import main as completed_main
from benchmarks.core.completed import run_status
from benchmarks.core.plugin import check_results_dir, check_run_id
from benchmarks.core.provenance import ProvenanceFileError, read_provenance
from benchmarks.core.rundir import RunDirError, check_run_dir

HOSTILE = "A \ud800 and \udfff, unpaired"  # a reply holding lone surrogates; the scaffold's parser reads 'A'

#: The pytester project's conftest: the suite's plugin, a scripted model with a hostile answer, and the faults
#: a test asks for through the environment (a file-size limit; damage to provenance.json at the session end).
CONFTEST = '''
import os
import resource
from pathlib import Path

import pytest

import models
from models import Constant, ScriptedModel

pytest_plugins = ["benchmarks.core.plugin"]

ANSWER = {answer!r} + " " + "x" * int(os.environ.get("HOSTILE_PADDING", "0"))
models.register_model("scripted-hostile", "scripted", "answers A with lone surrogates",
                      lambda **_: ScriptedModel("scripted-hostile", Constant(ANSWER)))

if os.environ.get("HOSTILE_FSIZE"):
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(os.environ["HOSTILE_FSIZE"]),
                                               resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    result = yield
    damage = os.environ.get("HOSTILE_PROVENANCE")  # after the last test, before the session end reads it
    if damage:
        for path in Path("results").glob("toy/*/provenance.json"):
            path.write_bytes(damage.encode("latin-1"))
    return result
'''.format(answer=HOSTILE)


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """A project of its own holding one protocol scaffolded by ``preregbench new`` (``protocols/toy``)."""
    pytester.makepyprojecttoml(
        '[tool.pytest.ini_options]\n'
        'addopts = ["-p", "no:cacheprovider", "-p", "pytester", "-m", "not cpu and not gpu"]\n')
    pytester.makeconftest(CONFTEST)
    (pytester.path / "protocols").mkdir()
    (pytester.path / "protocols" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "benchmarks.core.new", "toy", "--into", "protocols"],
                          cwd=pytester.path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return pytester.path / "protocols" / "toy"


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    result = pytester.runpytest_subprocess("protocols/toy", "-p", "no:randomly", *args)
    return result, result.stdout.str() + result.stderr.str()


def digest_tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: files by content, links by target."""
    out = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[name] = "-> " + os.readlink(path)
        elif path.is_file():
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def lines_with(output: str, needle: str) -> list[str]:
    found = [line for line in output.splitlines() if needle in line]
    assert found, output
    return found


# --------------------------------------------------------------------------- run ids and the results folder


@pytest.mark.parametrize("run_id", ["abc\n", "a" * 65, "x" * 300, "", ".hidden", "-flag", "a/b", "a b", "é", "a\x00"])
def test_a_bad_run_id_is_one_usage_line(run_id: str) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        check_run_id(run_id)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 250 and message.startswith("--run-id ")


@pytest.mark.parametrize("run_id", ["a", "r1", "20261130T035206Z-3f9a1c", "A.b_c-d", "z" * 64])
def test_good_run_ids_are_accepted(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


def test_a_results_dir_that_cannot_be_used_is_one_usage_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    for bad, why in ((afile, "is not a directory"), (afile / "sub", f"cannot be created: {afile} is not a directory")):
        with pytest.raises(pytest.UsageError, match=f"--results-dir {bad} {why}; pass --results-dir=PATH"):
            check_results_dir(bad)
    assert check_results_dir(tmp_path / "new" / "folder") == tmp_path / "new" / "folder"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    assert afile.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: permission bits do not stop root from writing")
def test_an_unwritable_results_dir_is_one_usage_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(pytest.UsageError, match="is not writable"):
            check_results_dir(locked)
        with pytest.raises(pytest.UsageError, match=f"cannot be created: {locked} is not writable"):
            check_results_dir(locked / "results")
    finally:
        locked.chmod(0o700)


def test_bad_session_options_stop_before_any_work(pytester: pytest.Pytester, project: Path) -> None:
    """A run id with a newline, one of 300 characters, and a results folder that is a file: one line, exit 4."""
    afile = pytester.path / "results-file"
    afile.write_bytes(b"not a folder")
    cases = [(("--run-id", "abc\n"), "ERROR: --run-id 'abc\\n' is not valid"),
             (("--run-id=" + "r" * 300,), "ERROR: --run-id 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr'... (300 characters)"),
             ((f"--results-dir={afile}",), f"ERROR: --results-dir {afile} is not a directory")]
    for args, line in cases:
        result, output = run(pytester, "-m", "cpu", "--model", "scripted-oracle", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, output
        assert lines_with(output, line) == [lines_with(output, "ERROR:")[0]]
        assert "Traceback" not in output and len(lines_with(output, "ERROR")) == 1
    assert not (pytester.path / "results").exists()
    assert afile.read_bytes() == b"not a folder"


# --------------------------------------------------------------------------- symbolic links


def test_check_run_dir_refuses_links_and_files(tmp_path: Path) -> None:
    results, outside = tmp_path / "results", tmp_path / "outside"
    outside.mkdir()
    (results / "toy").mkdir(parents=True)
    assert check_run_dir(results, "toy", "r1") == results / "toy" / "r1"
    (results / "toy" / "r1").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RunDirError, match=r"r1 is a symbolic link; a run directory must be a real directory inside"):
        check_run_dir(results, "toy", "r1")
    (results / "toy" / "r2").write_text("")
    with pytest.raises(RunDirError, match="r2 exists and is not a directory"):
        check_run_dir(results, "toy", "r2")
    (results / "other").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RunDirError, match="other is a symbolic link"):
        check_run_dir(results, "other", "r1")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("what", ["ledger", "run directory"])
def test_a_symlink_in_an_existing_run_is_refused_and_nothing_is_touched(pytester: pytest.Pytester, project: Path,
                                                                        what: str) -> None:
    """``records.jsonl`` (or the run directory) is a link to a file (folder) outside: refused before any write."""
    outside = pytester.path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_bytes(b"bytes that must survive, no newline")
    run_dir = pytester.path / "results" / "toy" / "r1"
    if what == "ledger":
        run_dir.mkdir(parents=True)
        (run_dir / "records.jsonl").symlink_to(outside / "precious.txt")
        (run_dir / "report.json").write_text('{"benchmark": "an earlier verdict"}\n')
        needle = "toy cannot run: run r1 cannot be resumed:"
        why = "records.jsonl: is a symbolic link"
    else:
        run_dir.parent.mkdir(parents=True)
        run_dir.symlink_to(outside, target_is_directory=True)
        needle, why = "toy cannot run:", "r1 is a symbolic link; a run directory must be a real directory"
    before, outside_before = digest_tree(pytester.path / "results"), digest_tree(outside)
    result, output = run(pytester, "-m", "cpu", "--model", "scripted-oracle", "--run-id", "r1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert why in lines_with(output, needle)[0]
    assert "Traceback" not in output
    assert digest_tree(pytester.path / "results") == before
    assert digest_tree(outside) == outside_before


def test_atomic_writes_replace_a_link_and_never_write_through_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"keep")
    link = tmp_path / "summary.json"
    link.symlink_to(outside)
    atomic_write_json(link, {"a": 1})
    assert not link.is_symlink() and json.loads(link.read_text()) == {"a": 1}
    assert outside.read_bytes() == b"keep"


# --------------------------------------------------------------------------- write faults


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EACCES])
def test_a_refused_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    code: int) -> None:
    target = tmp_path / "summary.json"
    atomic_write_json(target, {"old": True})
    before = target.read_bytes()

    def refuse(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(FileWriteError) as raised:
        atomic_write_json(target, {"new": True})
    assert str(raised.value) == (f"{target}: write failed with {errno.errorcode[code]} ({os.strerror(code)}); "
                                 "the file was left as it was")
    assert raised.value.errno == code and raised.value.filename == str(target)
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_file_size_limit_mid_run_ends_it_with_one_line_and_a_broken_verdict(
        pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``RLIMIT_FSIZE`` of 40 kB in the child pytest: the ledger's write fails with EFBIG part-way."""
    monkeypatch.setenv("HOSTILE_FSIZE", "40000")
    monkeypatch.setenv("HOSTILE_PADDING", "3000")  # about 3.5 kB per record: the limit falls inside the run
    result, output = run(pytester, "-m", "cpu", "--model", "scripted-hostile", "--run-id", "r1")
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output
    ledger = pytester.path / "results" / "toy" / "r1" / "records.jsonl"
    line = lines_with(output, "Interrupted: run ended:")[0]
    assert f"{ledger}: write failed with EFBIG (File too large); unit 'item-" in line
    assert "is not recorded and the ledger was cut back to its last whole record" in line
    records = ledger_lines(ledger)  # whole records only, every one as written
    assert 0 < len(records) < 24 and all(r["generation"] == HOSTILE + " " + "x" * 3000 for r in records)
    assert not list(ledger.parent.glob("records.jsonl.torn-*"))
    report = json.loads((ledger.parent / "report.json").read_text())
    entry = report["benchmark"]["protocols"]["toy"]
    assert entry["status"] == "broken"
    assert any(p.startswith("run ended: ") and "EFBIG" in p for p in entry["problems"]), entry["problems"]
    ok, message = run_status(ledger.parent)
    assert not ok and "run is broken: run ended:" in message

    monkeypatch.delenv("HOSTILE_FSIZE")  # the cause gone, the same run id resumes and finishes
    (ledger.parent / "report.json").unlink()
    result, output = run(pytester, "-m", "cpu", "--model", "scripted-hostile", "--run-id", "r1")
    report = json.loads((ledger.parent / "report.json").read_text())
    assert report["benchmark"]["protocols"]["toy"]["status"] == "complete", output
    assert len(ledger_lines(ledger)) == 24


def ledger_lines(path: Path) -> list[dict]:
    """Every line of a ledger, decoded as strict UTF-8 JSON; the file must end in a whole line."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "a torn last line"
    return [json.loads(raw.decode("utf-8")) for raw in data.splitlines()]


# --------------------------------------------------------------------------- hostile text through a real run


def test_a_reply_with_lone_surrogates_is_recorded_and_read_back_equal(pytester: pytest.Pytester,
                                                                     project: Path) -> None:
    result, output = run(pytester, "-m", "cpu", "--model", "scripted-hostile", "-n", "2")
    reports = sorted((pytester.path / "results" / "toy").glob("*/report.json"))
    assert len(reports) == 1, output
    run_dir = reports[0].parent
    assert json.loads(reports[0].read_text())["benchmark"]["protocols"]["toy"]["status"] == "complete", output
    records = ledger_lines(run_dir / "records.jsonl")  # strict UTF-8 on disk
    assert len(records) == 24
    assert {r["generation"] for r in records} == {HOSTILE + " "}  # the text the parser saw, exactly
    assert {r["parsed"] for r in records} == {"A"}
    provenance = json.loads((run_dir / "provenance.json").read_bytes().decode("utf-8"))
    assert provenance["model"]["extra"]["writer"]["answer"] == HOSTILE + " "


# --------------------------------------------------------------------------- bad files core reads


def test_read_json_file_names_the_file_and_the_byte_or_line(tmp_path: Path) -> None:
    path = tmp_path / "fixtures.json"
    path.write_bytes(b'{\n  "a": "ok",\n  "b": "\xff"\n}\n')
    with pytest.raises(FileReadError, match=r"fixtures.json: byte offset 23 \(line 3, 0xff\) is not UTF-8 \(invalid start byte\)"):
        read_json_file(path)
    path.write_bytes(b'{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(FileReadError, match=r"fixtures.json: not JSON \(Expecting value at line 4 column 1\)"):
        read_json_file(path)
    link = tmp_path / "summary.json"
    link.symlink_to(path)
    with pytest.raises(FileReadError, match="summary.json: is a symbolic link"):
        read_json_file(link)
    with pytest.raises(FileNotFoundError):
        read_json_file(tmp_path / "missing.json")


@pytest.mark.parametrize(("content", "problem"), [
    (b"\x80\x81garbage", "byte offset 0 (line 1, 0x80) is not UTF-8"),
    (b"{not json", "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
    (b"[1, 2]", "holds a JSON list, not a provenance object"),
    (b'{"protocol": "toy"}', "not a provenance record (missing keys ["),
    (b'{"protocol": "toy", "extra_key": 1}', "unknown keys ['extra_key']"),
])
def test_a_damaged_provenance_file_is_one_line(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "provenance.json"
    path.write_bytes(content)
    with pytest.raises(ProvenanceFileError) as raised:
        read_provenance(path)
    assert str(raised.value).startswith(f"{path}: ") and problem in str(raised.value)
    assert "\n" not in str(raised.value)
    assert read_provenance(tmp_path / "absent.json") is None


def test_garbage_provenance_at_the_session_end_still_writes_a_broken_report(
        pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTILE_PROVENANCE", "\xff\xfe not JSON")
    result, output = run(pytester, "-m", "cpu", "--model", "scripted-oracle")
    assert "Traceback" not in output
    reports = sorted((pytester.path / "results" / "toy").glob("*/report.json"))
    assert len(reports) == 1, output
    entry = json.loads(reports[0].read_text())["benchmark"]["protocols"]["toy"]
    assert entry["status"] == "broken" and entry["provenance"] is None
    assert any("provenance.json: byte offset 0 (line 1, 0xff) is not UTF-8" in p for p in entry["problems"]), entry
    assert lines_with(output, "problem: ")  # the terminal summary names it too
    assert result.ret == 0  # every test passed: the damage came after them, and the report says broken


@pytest.mark.parametrize(("content", "problem"), [
    (b"\xff", "report.json: byte offset 0 (line 1, 0xff) is not UTF-8"),
    (b'{"benchmark": ', "report.json: not JSON (Expecting value at line 1 column 15)"),
    (b"[]", "report.json: holds no 'benchmark.protocols' object"),
    (b'{"benchmark": {"protocols": {"toy": "complete"}}}', "the verdict of 'toy' is not of the report's shape"),
    (b'{"benchmark": {"protocols": {"toy": {"status": "complete", "problems": [], '
     b'"classifications": {"gate": {}}}}}}', "a classification of the verdict has no outcome label"),
])
def test_completed_reports_a_damaged_report_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        content: bytes, problem: str) -> None:
    run_dir = tmp_path / "toy" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "report.json").write_bytes(content)
    assert completed_main([str(tmp_path / "toy")]) == 1
    out = capsys.readouterr().out
    assert problem in out and len(out.strip().splitlines()) == 1


def test_completed_refuses_a_symlinked_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "toy" / "r1"
    run_dir.mkdir(parents=True)
    good = tmp_path / "elsewhere.json"
    good.write_text(json.dumps({"benchmark": {"protocols": {"toy": {"status": "complete", "problems": [],
                                                                     "classifications": {}}}}}))
    (run_dir / "report.json").symlink_to(good)
    ok, message = run_status(run_dir)
    assert not ok and "report.json: is a symbolic link" in message


def _private_mount_prefix(folder: Path) -> list[str] | None:
    """A command prefix that runs in a mount namespace of its own where a tmpfs can be mounted on ``folder``
    (``unshare -m`` as root, ``unshare -Urm`` otherwise), or None when this machine permits neither."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for prefix in ([unshare, "-m"], [unshare, "-Urm"]):
        probe = subprocess.run([*prefix, "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs '{folder}'"],
                               capture_output=True, check=False, timeout=30)
        if probe.returncode == 0:
            return prefix
    return None


def test_a_full_disk_mid_run_ends_it_with_one_line_and_keeps_the_ledger_whole(
        pytester: pytest.Pytester, project: Path) -> None:
    """A real ENOSPC: the run directory lies on a 192 kB tmpfs in a private mount namespace."""
    results, saved = pytester.path / "results", pytester.path / "saved"
    results.mkdir()
    saved.mkdir()
    prefix = _private_mount_prefix(results)
    if prefix is None:
        pytest.skip("no private tmpfs: unshare is missing or this machine permits no mount namespace")
    env = {**os.environ, "HOSTILE_PADDING": "20000"}  # about 20 kB per record: the disk fills inside the run
    script = (f"mount -t tmpfs -o size=192k tmpfs '{results}' && cd '{pytester.path}' && "
              f"'{sys.executable}' -m pytest protocols/toy -p no:randomly -m cpu --model scripted-hostile --run-id r1; "
              f"rc=$?; cp -a '{results}/.' '{saved}/'; exit $rc")
    done = subprocess.run([*prefix, "sh", "-c", script], env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output
    line = lines_with(output, "Interrupted: run ended:")[0]
    assert f"{results}/toy/r1/records.jsonl: write failed with ENOSPC (No space left on device); unit 'item-" in line
    records = ledger_lines(saved / "toy" / "r1" / "records.jsonl")
    assert 0 < len(records) < 24 and all(r["generation"] == HOSTILE + " " + "x" * 20000 for r in records)
    report = saved / "toy" / "r1" / "report.json"
    if report.exists():  # written when the space the cut freed allows
        assert json.loads(report.read_text())["benchmark"]["protocols"]["toy"]["status"] == "broken"
    else:
        assert lines_with(output, "problem: the verdict was not written:")
