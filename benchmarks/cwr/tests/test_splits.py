"""Generated pair splits: the public development split, the commitment path (with the public test seed of the
``selfcheck`` split) and the refusals, from the seed file's checks to whole runs through pytester."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest

import worlds
from benchmarks.core.protocol import UsageProblem
from benchmarks.core.selfcheck import read_report, run_protocol, run_rescorer
from benchmarks.core.verify import verify
from benchmarks.cwr import splits as splits_module
from benchmarks.cwr.pairs import base_id, interchangeable_of, pair_subsets, replica_id
from benchmarks.cwr.protocol import (
    HERE,
    PAIRS_FIXTURE,
    PREREG,
    base_pair,
    generated_split,
    pair_rows,
    run_pairs,
)
from benchmarks.cwr.splits import (
    MIN_SEED_HEX_DIGITS,
    SEED_FILE_ENV,
    SPLIT_FILE,
    check_split,
    derived_seed,
    resolve_seed,
    seed_sha256,
    seed_text,
)

SPLITS = PREREG.values.splits
TEST_SEED_FILE = HERE / "selfcheck.seed"
TEST_SEED = TEST_SEED_FILE.read_text().strip()


@pytest.fixture
def no_seed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SEED_FILE_ENV, raising=False)


def write(tmp_path: Path, text: str | bytes, name: str = "seed") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


# ----------------------------------------------------------------- the preregistered splits


def test_the_prereg_names_a_public_a_test_and_a_confirmatory_split() -> None:
    assert set(SPLITS) == {"development", "selfcheck", "confirmatory"}
    assert not SPLITS["development"].committed and SPLITS["development"].seed is not None
    assert SPLITS["selfcheck"].committed and SPLITS["confirmatory"].committed
    assert SPLITS["selfcheck"].seed_sha256 != SPLITS["confirmatory"].seed_sha256


def test_the_test_seed_is_the_one_the_selfcheck_split_commits_to() -> None:
    assert len(TEST_SEED) >= MIN_SEED_HEX_DIGITS
    assert seed_sha256(TEST_SEED) == SPLITS["selfcheck"].seed_sha256
    # ... and not the confirmatory seed: the repository holds no seed of the confirmatory split.
    assert seed_sha256(TEST_SEED) != SPLITS["confirmatory"].seed_sha256


def test_the_confirmatory_split_is_the_frozen_sample_design() -> None:
    design = PREREG.values.design.confirmatory
    spec = SPLITS["confirmatory"]
    assert list(spec.families) == list(design.families)
    assert spec.bases_per_family() == design.bases_per_family
    assert spec.replicas == design.replicas
    assert max(spec.pairs_per_tier.values()) - min(spec.pairs_per_tier.values()) <= 1  # as even as tiers allow
    assert set(spec.pairs_per_tier) == set(worlds.TIERS)


def test_every_split_is_frozen_with_this_generator() -> None:
    assert {s.generator for s in SPLITS.values()} == {worlds.GENERATOR_VERSION}


# ----------------------------------------------------------------- the seed file


def test_no_seed_file_is_a_usage_problem_saying_how_to_give_one(no_seed_env: None) -> None:
    with pytest.raises(UsageProblem, match=f"pass --cwr-seed-file PATH or set {SEED_FILE_ENV}"):
        seed_text(None, "selfcheck")


@pytest.mark.parametrize(("content", "problem"), [
    ("", "at least 32 hexadecimal digits"),
    ("0123456789abcdef", "at least 32 hexadecimal digits"),  # 64 bits: searchable from the published hash
    ("g" * 40, "at least 32 hexadecimal digits"),
    ("ab" * 20 + " cd", "at least 32 hexadecimal digits"),
    (b"\xff\xfe" + b"a" * 40, "not ASCII"),
])
def test_a_malformed_seed_is_refused_with_one_line(tmp_path: Path, content: str | bytes, problem: str) -> None:
    with pytest.raises(UsageProblem, match=problem) as caught:
        seed_text(write(tmp_path, content), "selfcheck")
    assert "\n" not in str(caught.value)


def test_an_unreadable_seed_file_is_a_usage_problem(tmp_path: Path) -> None:
    with pytest.raises(UsageProblem, match="cannot read the seed file"):
        seed_text(tmp_path, "selfcheck")  # a directory
    with pytest.raises(UsageProblem, match="cannot read the seed file"):
        seed_text(tmp_path / "absent", "selfcheck")


def test_surrounding_whitespace_is_not_part_of_the_seed(tmp_path: Path) -> None:
    text, _ = seed_text(write(tmp_path, f"\n  {TEST_SEED}\r\n"), "selfcheck")
    assert text == TEST_SEED


def test_the_option_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SEED_FILE_ENV, str(write(tmp_path, "ab" * 20, "env-seed")))
    assert seed_text(str(TEST_SEED_FILE), "selfcheck")[0] == TEST_SEED
    assert seed_text(None, "selfcheck")[0] == "ab" * 20


def test_a_wrong_seed_is_refused_naming_both_hashes(tmp_path: Path) -> None:
    wrong = write(tmp_path, TEST_SEED[:-1] + ("0" if TEST_SEED[-1] != "0" else "1"))
    with pytest.raises(UsageProblem, match=r"not the 75497ceba7b24531\.\.\. committed in prereg \[splits.selfcheck\]"):
        resolve_seed("selfcheck", SPLITS["selfcheck"], str(wrong))


def test_the_generator_seed_is_derived_not_the_commitment() -> None:
    seed, committed = resolve_seed("selfcheck", SPLITS["selfcheck"], str(TEST_SEED_FILE))
    assert committed == SPLITS["selfcheck"].seed_sha256
    assert 0 <= seed < 2 ** 63 and seed == derived_seed(TEST_SEED)
    assert seed != int(committed[:16], 16) >> 1  # the published hash does not give the generator's seed
    assert resolve_seed("development", SPLITS["development"], None) == (SPLITS["development"].seed, None)


# ----------------------------------------------------------------- split specs


@pytest.mark.parametrize(("change", "problem"), [
    ({"generator": "worlds.generate/0"}, "was frozen with generator"),
    ({"families": ()}, "families must name distinct families"),
    ({"families": ("token_workshop", "token_workshop")}, "families must name distinct families"),
    ({"pairs_per_tier": {"T9": 1}}, "pairs_per_tier must map tiers"),
    ({"pairs_per_tier": {"T1": 0}}, "counts must be positive"),
    ({"replicas": 0}, "counts must be positive"),
    ({"seed_sha256": "ab" * 32}, "exactly one of seed"),
    ({"seed": None}, "exactly one of seed"),
    ({"seed": -1}, "seed must be a non-negative integer"),
])
def test_a_bad_split_is_refused_naming_the_key(change: dict, problem: str) -> None:
    with pytest.raises(UsageProblem, match=problem):
        check_split("development", dataclasses.replace(SPLITS["development"], **change), generatable=False)


def test_a_committed_hash_must_be_sha256_hex() -> None:
    with pytest.raises(UsageProblem, match="seed_sha256 must be 64 lowercase hexadecimal digits"):
        check_split("selfcheck", dataclasses.replace(SPLITS["selfcheck"], seed_sha256="AB" * 32), generatable=False)


def test_a_split_over_families_without_a_generator_cannot_be_built() -> None:
    # every family of the frozen design is drawn now; a split naming another family is refused before any work
    assert set(SPLITS["confirmatory"].families) <= set(worlds.GENERATED_FAMILIES)
    check_split("confirmatory", SPLITS["confirmatory"], generatable=True)
    other = dataclasses.replace(SPLITS["confirmatory"], families=("token_workshop", "circuit"))
    with pytest.raises(UsageProblem, match="draws circuit, which the pair generator cannot draw yet"):
        check_split("confirmatory", other, generatable=True)


def test_unknown_split_names_the_known_ones() -> None:
    with pytest.raises(UsageProblem, match="splits: confirmatory, development, selfcheck"):
        run_pairs("privat")


# ----------------------------------------------------------------- building


def _first_tier(spec):
    """``spec`` with its first tier only, every family kept: a cheap part of the split (the generator draws each
    family and tier on its own, so the part equals those pairs of the whole split)."""
    first = next(iter(spec.pairs_per_tier))
    return dataclasses.replace(spec, pairs_per_tier={first: spec.pairs_per_tier[first]})


def _built_afresh(spec, seed: int) -> tuple:
    """The pairs of ``spec`` generated now, past the process's cache of built splits."""
    layout = tuple((f, tuple(spec.pairs_per_tier.items())) for f in spec.families)
    return splits_module._build.__wrapped__(layout, seed, spec.replicas)[0]


def test_the_development_split_is_deterministic_and_laid_out_by_base() -> None:
    spec = SPLITS["development"]
    built = generated_split("development")
    # The first tier of every family generated again, afresh, gives the same pairs as the whole split holds.
    again = _built_afresh(_first_tier(spec), spec.seed)
    again_bases = {base_pair(p.pair_id) for p in again}
    assert len(again_bases) == len(spec.families) * next(iter(spec.pairs_per_tier.values()))
    assert pair_rows(again) == pair_rows([p for p in built.pairs if base_pair(p.pair_id) in again_bases])
    assert not {id(p) for p in again} & {id(p) for p in built.pairs}
    bases = sorted({base_pair(p.pair_id) for p in built.pairs})
    assert len(bases) == len(spec.families) * spec.bases_per_family()
    assert len(built.pairs) == len(bases) * spec.replicas
    for base in bases:
        assert [p.pair_id for p in built.pairs if base_pair(p.pair_id) == base] == \
            [replica_id(base, k) for k in range(spec.replicas)]
    for family in spec.families:
        tiers = [built.record["manifests"][b]["tier"]["name"] for b in bases
                 if built.record["manifests"][b]["family"] == family]
        assert tiers == [t for t, n in spec.pairs_per_tier.items() for _ in range(n)], family
    # The replicas are other worlds: fresh labels and ids on both sides.
    assert len({p.f.target.id for p in built.pairs}) == len(built.pairs)
    assert all(m["eligibility"] == "development_generated" for m in built.record["manifests"].values())


def test_another_seed_gives_another_split() -> None:
    spec = SPLITS["development"]
    other = _built_afresh(_first_tier(spec), spec.seed + 1)
    assert {r["f_prompt_sha256"] for r in pair_rows(other)}.isdisjoint(
        {r["f_prompt_sha256"] for r in pair_rows(generated_split("development").pairs)})


def test_the_split_record_holds_the_hash_never_the_seed() -> None:
    built = generated_split("selfcheck", str(TEST_SEED_FILE))
    text = json.dumps(built.record)
    assert TEST_SEED not in text
    assert built.record["seed"] is None and built.record["seed_sha256"] == SPLITS["selfcheck"].seed_sha256
    assert built.record["generation"] and all("rejections" in g for g in built.record["generation"])


# ----------------------------------------------------------------- pair subsets of the secondary deficits


def test_the_interchange_audit_labels_two_showcase_bases_and_all_their_replicas() -> None:
    pairs = run_pairs()
    inter = interchangeable_of(pairs)
    flagged = {base_id(pid) for pid, edges in inter.items() if edges}
    assert flagged == {"PAIR-SCH-03", "PAIR-TW-04"}
    assert inter["PAIR-SCH-03~r2"] == ("prep -cross_machine-> mix_b",)
    subsets = pair_subsets(pairs)
    assert subsets["without_interchangeable"] == sorted(p.pair_id for p in pairs if base_id(p.pair_id) not in flagged)
    # Exposure matching is the base manifest's, shared by the replicas.
    matched = {base_id(pid) for pid in subsets["exposure_matched"]}
    assert matched == {p.pair_id for p in pairs if p.manifest.get("primitive_exposure_matched") is True}
    assert all(replica_id(b, k) in subsets["exposure_matched"] for b in matched for k in range(3))


def test_a_generated_split_holds_no_interchangeable_pair() -> None:
    pairs = generated_split("development").pairs
    subsets = pair_subsets(pairs)
    assert subsets["without_interchangeable"] == sorted(p.pair_id for p in pairs)  # the generator refuses them
    assert subsets["motif_required"] == sorted(p.pair_id for p in pairs)


# ----------------------------------------------------------------- whole runs


# The scripted split runs check what a run writes and refuses: they run in a fresh pytest session of this
# process, which builds the split once (the generator's cache is kept between sessions) instead of once per
# subprocess.  The libraries are imported before pytester takes its snapshot of sys.modules.
RUN_LIBRARIES_FIRST = ("benchmarks.cwr.scripted",)


def run_split(pytester: pytest.Pytester, results: Path, *args: str, model: str = "scripted-oracle"):
    result = run_protocol(pytester, HERE, results, "--model", model, *args, in_process=True)
    report, run_dir = read_report(results, "cwr", result)
    return result, report, run_dir


def test_a_scripted_run_over_the_development_split(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Every attribution gate is open on the generated pairs; a model that solves every F target and no C target
    reaches RECOMBINATION_DEFICIT_SUPPORTED over the split's 12 bases (exit 0)."""
    result, report, run_dir = run_split(pytester, tmp_path / "results", "--cwr-split", "development",
                                        model="scripted-cwr-f-only")
    protocol = report["benchmark"]["protocols"]["cwr"]
    assert protocol["status"] == "complete", result.stdout.str()
    summary = json.loads((run_dir / "summary.json").read_text())
    built = generated_split("development")
    assert sorted(summary["pairs"]) == sorted(p.pair_id for p in built.pairs)
    assert summary["settings"]["split"] == "development" and summary["settings"]["split_seed_sha256"] is None
    spec = SPLITS["development"]
    assert summary["metrics"]["deficit.bases"] == len(spec.families) * spec.bases_per_family()
    assert summary["deviations"] == [f"model 'scripted-cwr-f-only' instead of the preregistered "
                                     f"{PREREG.values.model.id!r}"]
    assert summary["classifications"]["cwr"] == "RECOMBINATION_DEFICIT_SUPPORTED" and result.ret == 0
    metrics = summary["metrics"]
    assert metrics["pairs.witness_only"] == metrics["pairs.exposure_unmatched"] == 0
    assert metrics["baselines.greedy_solved_share"] <= PREREG.values.thresholds["greedy_max"]
    assert metrics["baselines.random_valid_rate"] <= PREREG.values.thresholds["random_max"]
    # the diagnostics: every family and tier of the split its own group, each deficit 1 (F always, C never valid)
    diagnostics = summary["diagnostics"]
    assert sorted(diagnostics["by_family"]) == sorted(spec.families)
    assert sorted(diagnostics["by_tier"]) == sorted(spec.pairs_per_tier)
    for group in (*diagnostics["by_family"].values(), *diagnostics["by_tier"].values()):
        assert (group["F"]["validity"], group["C"]["validity"], group["deficit"]["estimate"]) == (1.0, 0.0, 1.0)
        assert 0.0 < group["deficit"]["lower"] < 1.0 == group["deficit"]["upper"]
        assert group["F"]["validity_interval"]["low"] < 1.0  # a clustered interval, never of zero width
    # the C answers stop one step short of the goal: a legal prefix, below the optimum
    partial = diagnostics["partial_credit"]
    assert partial["F"]["mean_legal_prefix"] >= partial["F"]["mean_optimum_length"] > 0
    assert 0.0 < partial["C"]["mean_legal_prefix"] < partial["C"]["mean_optimum_length"]
    assert diagnostics["motif_avoidance"]["units"] == []  # every generated pair is motif-required
    assert summary["pair_subsets"] == pair_subsets(built.pairs)
    assert summary["metrics"]["pairs_without_interchangeable.n"] == len(built.pairs)
    assert summary["metrics"]["deficit_exposure_matched.bases"] == len(
        {base_id(p) for p in summary["pair_subsets"]["exposure_matched"]})
    # controls on every scored world: P, R and E items on both targets of each base pair, and none elsewhere
    bases = sorted({base_pair(p.pair_id) for p in built.pairs})
    by_world = summary["controls_by_world"]
    assert sorted(by_world) == sorted(f"pair:{b}:{side}" for b in bases for side in ("F", "C"))
    assert all(row["P"] >= 8 and row["R"] == 1 and row["E"] >= 3 for row in by_world.values()), by_world
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    effects = [r for r in records if r["condition"] == "P" and r["kind"] == "effect" and r["family"] == "dataflow"]
    assert effects and all(r["correct"] and r["parse_status"] == "ok" for r in effects)
    assert any(" = " in line and "," in line for r in effects for line in r["generation"].splitlines())
    # the mastery gate per family over the worlds scored: both families probed on every base, all right
    mastery = summary["mastery"]
    assert sorted(mastery) == sorted(spec.families)
    for family, row in mastery.items():
        assert row["accuracy"] == 1.0 and row["established"], family
        assert row["worlds_probed"] == 2 * spec.bases_per_family(), family
        assert row["worlds_scored"] == 2 * spec.bases_per_family() * spec.replicas, family
        assert row["accuracy_interval"]["low"] < 1.0, family
    assert summary["metrics"]["mastery.min_family_accuracy"] == 1.0
    assert "cwr-controls:development" in json.loads((run_dir / "fixtures.json").read_text())["sets"]
    recorded = json.loads((run_dir / SPLIT_FILE).read_text())
    assert recorded == json.loads(json.dumps(built.record))
    fixtures = json.loads((run_dir / "fixtures.json").read_text())
    assert fixtures["sets"][PAIRS_FIXTURE]["records"] == json.loads(json.dumps(pair_rows(built.pairs)))
    # verify rebuilds both fixture sets from the recorded settings and runs the rescorer on the run directory.
    lines = [f.line() for f in verify(run_dir).findings]
    assert any(line.startswith("ok") and "2 fixture sets rebuilt" in line for line in lines), lines
    label = summary["classifications"]["cwr"]
    assert any(line.startswith("ok") and f"no disagreement; derives cwr = {label}" in line for line in lines), lines


def test_the_committed_path_with_the_test_seed(pytester: pytest.Pytester, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SEED_FILE_ENV, raising=False)
    results = tmp_path / "results"
    # A wrong seed: refused before any work, nothing written.
    wrong = write(tmp_path, "ab" * 32)
    refused = run_protocol(pytester, HERE, results, "--model", "scripted-oracle", "--cwr-split", "selfcheck",
                           "--cwr-seed-file", str(wrong), in_process=True)
    out = refused.stdout.str() + refused.stderr.str()
    assert refused.ret != 0 and "committed in prereg [splits.selfcheck]: it is not the split's seed" in out
    assert not results.exists()
    # (No seed at all goes through the same check: test_no_seed_file_is_a_usage_problem_saying_how_to_give_one.)
    # The seed, from the environment.
    monkeypatch.setenv(SEED_FILE_ENV, str(TEST_SEED_FILE))
    result, report, run_dir = run_split(pytester, results, "--cwr-split", "selfcheck")
    assert report["benchmark"]["protocols"]["cwr"]["status"] == "complete", result.stdout.str()
    # The material is in the run directory only (beside it, the results index lists the run).
    assert sorted(p.name for p in results.iterdir()) == ["cwr", "index.html"]
    assert [p.name for p in (results / "cwr").iterdir()] == [run_dir.name]
    assert TEST_SEED not in (results / "index.html").read_text()
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["identity"]["settings"]["split_seed_sha256"] == SPLITS["selfcheck"].seed_sha256
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert TEST_SEED.encode() not in path.read_bytes(), path
    assert (run_dir / SPLIT_FILE).is_file()
    # verify rebuilds the material only with the published seed (a wrong seed is refused by the same check as a
    # run's, tested above); the rescorer agrees either way, since it reads only the run directory.
    with_seed = [f.line() for f in verify(run_dir).findings]
    assert any(line.startswith("ok") and "2 fixture sets rebuilt" in line for line in with_seed), with_seed
    assert any(line.startswith("ok") and "rescorer: no disagreement" in line for line in with_seed), with_seed
    monkeypatch.delenv(SEED_FILE_ENV)
    without = [f.line() for f in verify(run_dir).findings]
    assert any("set cwr-pairs was not rebuilt" in line and "committed by hash" in line for line in without), without


#: Units per condition and generation bound of the reduced SmolLM2 pass over the development split.
SMOLLM2_SPLIT_UNITS = 3
SMOLLM2_SPLIT_MAX_NEW_TOKENS = 16


@pytest.mark.slow
def test_bundled_smollm2_reduced_pass_over_the_development_split(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A few units of every condition on the real bundled model, F and C from generated pairs of both families."""
    results = tmp_path / "results"
    result = run_protocol(pytester, HERE, results, "--model", "smollm2-135m-instruct", "--cwr-split", "development",
                          f"--cwr-units-per-condition={SMOLLM2_SPLIT_UNITS}",
                          f"--cwr-max-new-tokens={SMOLLM2_SPLIT_MAX_NEW_TOKENS}")
    report, run_dir = read_report(results, "cwr", result)
    protocol = report["benchmark"]["protocols"]["cwr"]
    assert protocol["status"] == "complete", result.stdout.str()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["settings"]["split"] == "development"
    assert summary["units"] == {c: SMOLLM2_SPLIT_UNITS for c in ("P", "R", "E", "F", "C")}
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    measured_pairs = {r["pair_id"] for r in records if r["condition"] in ("F", "C")}
    manifests = json.loads((run_dir / SPLIT_FILE).read_text())["manifests"]
    assert measured_pairs <= set(summary["pairs"]) and len(measured_pairs) == SMOLLM2_SPLIT_UNITS
    # the reduced pass spreads its F/C units over the split: both families (program and step targets), two tiers
    assert {manifests[base_pair(p)]["family"] for p in measured_pairs} == set(SPLITS["development"].families)
    assert len({manifests[base_pair(p)]["tier"]["name"] for p in measured_pairs}) >= 2
    rescored = run_rescorer(HERE / "rescore.py", run_dir)
    assert rescored["disagreements"] == [] and rescored["mismatched_units"] == []
    assert rescored["classification"] == protocol["classifications"]["cwr"]["outcome"]["label"]
    print(f"SmolLM2 CWR reduced run over the development split: {rescored['classification']}; "
          f"parse statuses {json.dumps(summary['parse_statuses'], sort_keys=True)}")


# ----------------------------------------------------------------- the split report


@functools.lru_cache(maxsize=1)
def _selfcheck_report() -> dict:
    """The report of the committed split with the test seed (few pairs), made once for the tests below."""
    from benchmarks.cwr.splits import split_report

    return split_report("selfcheck", str(TEST_SEED_FILE), samples=5)


def test_the_split_report_counts_what_the_split_holds(no_seed_env: None) -> None:
    from benchmarks.cwr.splits import format_report

    spec = SPLITS["selfcheck"]
    report = _selfcheck_report()
    built = generated_split("selfcheck", str(TEST_SEED_FILE))
    assert [(r["family"], r["tier"], r["bases"]) for r in report["rows"]] == [
        (f, t, n) for f in spec.families for t, n in spec.pairs_per_tier.items()]
    assert report["overall"]["targets"] == 2 * len(built.pairs)
    assert [r["draws"] for r in report["rows"]] == [g["draws"] for g in built.record["generation"]]
    assert [r["rejections"] for r in report["rows"]] == [g["rejections"] for g in built.record["generation"]]
    assert report["overall"]["copy"] == 0  # the copy audit let no copyable demonstration through
    assert report["seed"] is None and report["seed_sha256"] == spec.seed_sha256
    text = format_report(report)
    assert "committed seed sha256 75497ceba7b24531" in text and f"{report['overall']['targets']} targets" in text
    assert TEST_SEED not in text
    # a public split's report names its seed
    public = {**report, "committed": False, "seed": SPLITS["development"].seed, "seed_sha256": None}
    assert "public seed 2026" in format_report(public)


def test_the_split_report_refuses_a_wrong_seed(tmp_path: Path, no_seed_env: None, capsys,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.cwr.splits import main

    assert main(["selfcheck", "--seed-file", str(write(tmp_path, "ab" * 32))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it is not the split's seed" in err
    # The right seed: main prints the report (the one made above, not generated a second time).
    asked = []
    monkeypatch.setattr(splits_module, "split_report",
                        lambda *args: asked.append(args) or _selfcheck_report())
    assert main(["selfcheck", "--seed-file", str(TEST_SEED_FILE), "--samples", "5"]) == 0
    assert asked == [("selfcheck", str(TEST_SEED_FILE), 5)]
    out = capsys.readouterr().out
    assert "committed seed sha256 75497ceba7b24531" in out and TEST_SEED not in out
