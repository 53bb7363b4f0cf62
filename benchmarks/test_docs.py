"""The user guide (``docs/``) and the READMEs say only what is true of the repository.

* every relative link of a guide page or README resolves on disk, and its anchor names a heading there;
* every repository path named in backticks exists;
* the reference pages are the ones ``scripts/docs_reference.py`` draws from the parsers now;
* ``mkdocs build --strict`` builds the site without a warning;
* no README outgrows an entry point, and none carries a dated measurement log;
* every command block marked ``<!-- runnable: exit=N -->`` runs and its last command exits N (marked slow:
  the blocks run protocols; scripted models stand in where the marker names a swap).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIPPED_DIRS = {".git", ".venv", "build", "results", "node_modules", "__pycache__", ".pytest_cache", ".hypothesis"}
# Top-level entries of the repository: a backticked token that starts with one of them names a file.
TOP_LEVEL = {"benchmarks", "worlds", "fixtures", "models", "scripts", "snapshots", "docs", ".ci", ".github",
             "pyproject.toml", "mkdocs.yml", "canonical_hash.py"}
README_LINES = {Path("README.md"): 220}
PACKAGE_README_LINES = 170

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
PATH_TOKEN = re.compile(r"^[A-Za-z0-9_.\-/]+$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
MARKER = re.compile(r"^<!--\s*runnable:\s*(.*?)\s*-->\s*$")
DATED_HEADING = re.compile(r"^#{1,6} .*\b20\d\d-\d\d-\d\d\b")


def markdown_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        found += [Path(folder) / name for name in sorted(files) if name.endswith(".md")]
    return found


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def anchors(path: Path) -> set[str]:
    found = set()
    for _number, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2)).replace("`", "")
            found.add(slugify(text, "-"))
    return found


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


FILES = markdown_files()


def _nav_pages(entries: list) -> list[str]:
    pages = []
    for entry in entries:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_of_the_site_navigation_exists_and_every_page_is_in_it() -> None:
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    assert len(nav) >= 15 and nav[0] == "index.md", nav
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in FILES if p.is_relative_to(DOCS))
    assert sorted(nav) == on_disk, f"in the navigation only: {sorted(set(nav) - set(on_disk))}; " \
        f"on disk only: {sorted(set(on_disk) - set(nav))}"


@pytest.mark.parametrize("path", FILES, ids=relative)
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if file_part and not linked.exists():
                broken.append(f"line {number}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"line {number}: {target} (no heading with anchor #{anchor})")
            elif path.is_relative_to(DOCS) and file_part and not linked.is_relative_to(DOCS):
                broken.append(f"line {number}: {target} (a guide page links outside docs/: name it in backticks)")
    assert not broken, f"{relative(path)}: " + "; ".join(broken)


@pytest.mark.parametrize("path", FILES, ids=relative)
def test_every_repository_path_in_backticks_exists(path: Path) -> None:
    missing = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for token in INLINE_CODE.findall(line):
            token = token.strip()
            if not PATH_TOKEN.match(token) or token.split("/", 1)[0] not in TOP_LEVEL:
                continue
            if not (ROOT / token.split("::", 1)[0]).exists():
                missing.append(f"line {number}: `{token}`")
    assert not missing, f"{relative(path)} names paths that do not exist: " + "; ".join(missing)


def _docs_reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_drawn_from_the_parsers_of_today() -> None:
    module = _docs_reference()
    for page, text in module.pages().items():
        assert page.read_text(encoding="utf-8") == text, (
            f"{relative(page)} differs from the parsers (an option added, renamed or removed); "
            "run: python scripts/docs_reference.py")


def test_every_option_of_the_suite_is_on_the_reference_page() -> None:
    """Independent of the generator: the names ``pytest --help`` lists in the preregbench group are on the page."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    group = result.stdout.split("\npreregbench:\n", 1)[1].split("\n\n", 1)[0]
    heads = [re.split(r"\s{2,}", line.strip())[0] for line in group.splitlines() if line.startswith("  --")]
    listed = {name for head in heads for name in re.findall(r"--[a-z0-9-]+", head)}
    assert {"--model", "--run-id", "--results-dir"} <= listed
    page = (DOCS / "reference" / "pytest-options.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`(--[a-z0-9-]+)`", page))
    assert listed == documented, f"undocumented: {sorted(listed - documented)}; gone: {sorted(documented - listed)}"


def test_mkdocs_builds_the_site_strictly(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert result.returncode == 0, result.stderr[-4000:]
    assert not re.search(r"^(WARNING|ERROR)\b", result.stderr, flags=re.MULTILINE), result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()


READMES = [p for p in FILES if p.name == "README.md"]


@pytest.mark.parametrize("path", READMES, ids=relative)
def test_a_readme_is_an_entry_point_without_a_measurement_log(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    limit = README_LINES.get(path.relative_to(ROOT), PACKAGE_README_LINES)
    assert len(text.splitlines()) <= limit, f"{relative(path)} has {len(text.splitlines())} lines (at most {limit}): " \
        "move the detail into docs/"
    dated = [line for _n, line in prose_lines(text) if DATED_HEADING.match(line) and "changelog" not in line.lower()]
    in_changelog = _changelog_headings(text)
    dated = [line for line in dated if line not in in_changelog]
    assert not dated, f"{relative(path)} has dated sections (measurements belong in docs/performance.md): {dated[:3]}"
    if path.parent != ROOT:
        assert "docs/" in text, f"{relative(path)} does not link into the guide (docs/)"


def _changelog_headings(text: str) -> set[str]:
    """Headings inside a ``Changelog`` section: dated entries there record changes of frozen material."""
    inside, level, found = False, 0, set()
    for _n, line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        depth = len(match.group(1))
        if "changelog" in match.group(2).lower():
            inside, level = True, depth
        elif inside and depth <= level:
            inside = False
        elif inside:
            found.add(line)
    return found


# --------------------------------------------------------------------------- runnable blocks


@dataclass
class Block:
    path: Path
    line: int
    exit: int
    swaps: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{relative(self.path)}:{self.line}"


def parse_marker(text: str) -> tuple[int, dict[str, str]]:
    status, swaps = None, {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        if re.fullmatch(r"exit=\d+", item):
            status = int(item.split("=", 1)[1])
        elif re.fullmatch(r"swap \S+=\S+", item):
            old, new = item.split(" ", 1)[1].split("=", 1)
            swaps[old] = new
        else:
            raise ValueError(f"runnable marker item {item!r} is not exit=N or swap OLD=NEW")
    if status is None:
        raise ValueError("runnable marker names no exit=N")
    return status, swaps


def runnable_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for index, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        status, swaps = parse_marker(match.group(1))
        if index + 1 >= len(lines) or lines[index + 1].strip() not in ("```bash", "```sh", "```console"):
            raise ValueError(f"{relative(path)}:{index + 1}: a runnable marker must sit right above a ```bash block")
        block = Block(path, index + 1, status, swaps)
        for body in lines[index + 2:]:
            if FENCE.match(body):
                break
            if body.strip() and not body.strip().startswith("#"):
                block.commands.append(body.strip())
        blocks.append(block)
    return blocks


BLOCKS = [block for path in FILES for block in runnable_blocks(path)]


def test_the_guide_has_runnable_blocks_and_each_is_well_formed() -> None:
    assert len(BLOCKS) >= 5, [b.name for b in BLOCKS]
    for block in BLOCKS:
        assert block.commands, f"{block.name}: a runnable block without a command"
        for command in block.commands:
            argv = shlex.split(command, comments=True)
            assert argv[:1] in (["preregbench"], ["pytest"]) or argv[:3] == ["python", "-m", "pytest"], (
                f"{block.name}: {command!r} is not a preregbench or pytest command")
        for old in block.swaps:
            assert any(old in c for c in block.commands), f"{block.name}: swap {old} matches no command"


def command_argv(command: str, swaps: dict[str, str], results: Path) -> list[str]:
    """The argv the docs test runs for one line of a runnable block."""
    argv = []
    for token in shlex.split(command, comments=True):
        for old, new in swaps.items():
            token = new if token == old else token.replace(f"={old}", f"={new}")
        if token == "results" or token.startswith("results/"):
            token = str(results.parent / token)
        argv.append(token)
    if argv[:1] == ["preregbench"]:
        argv = [sys.executable, "-m", "benchmarks.core.cli", *argv[1:]]
    elif argv[:1] == ["pytest"]:
        argv = [sys.executable, "-m", "pytest", *argv[1:]]
    elif argv[:1] == ["python"]:
        argv = [sys.executable, *argv[1:]]
    runs = argv[3:4] == ["run"] or argv[1:3] == ["-m", "pytest"]
    if runs and not any(a.startswith("--results-dir") for a in argv):
        argv.append(f"--results-dir={results}")
    return argv


def test_a_runnable_line_is_redirected_into_the_temporary_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    argv = command_argv("preregbench run res --model smollm2-135m-instruct --run-id a  # comment",
                        {"smollm2-135m-instruct": "scripted-constant"}, results)
    assert argv == [sys.executable, "-m", "benchmarks.core.cli", "run", "res", "--model", "scripted-constant",
                    "--run-id", "a", f"--results-dir={results}"]
    assert command_argv("preregbench verify results/res/a", {}, results)[-1] == str(results / "res" / "a")


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_a_runnable_block_exits_as_the_page_says(block: Block, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    # No pytest cache and no Hypothesis example database: a block writes nothing into the checkout.
    env = dict(os.environ, PYTEST_ADDOPTS="-p no:cacheprovider", HYPOTHESIS_PROFILE="ci")
    for number, command in enumerate(block.commands, 1):
        argv = command_argv(command, block.swaps, results)
        result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        want = block.exit if number == len(block.commands) else 0
        assert result.returncode == want, (
            f"{block.name}: `{command}` exited {result.returncode}, the page says {want}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
