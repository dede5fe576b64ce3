"""Eval directories: cases/, config.yaml, video stores, adapter.yaml (glasskit_eval.cases.evaldir)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from glasskit_eval.cases.evaldir import (
    EvalConfig,
    load_adapter_config,
    load_cases,
    load_eval_config,
    open_eval_dir,
)
from glasskit_eval.cases.model import CloudVideo, Thresholds
from glasskit_eval.errors import UsageError, ValidationError
from glasskit_eval.store.config import VideoStoreConfig

CASE = "video: v.mp4\ntargets:\n  t:\n    samples:\n    - at: 1\n      expect: true\n"
SHA = "ab" * 32


def make_eval(tmp_path: Path, cases: dict[str, str], config: str | None = None) -> Path:
    root = tmp_path / "eval"
    (root / "cases").mkdir(parents=True)
    for name, text in cases.items():
        (root / "cases" / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    if config is not None:
        (root / "config.yaml").write_text(textwrap.dedent(config).lstrip("\n"), encoding="utf-8")
    return root


def problems_of(error: pytest.ExceptionInfo[ValidationError]) -> list[tuple[str, str, int | None, str]]:
    return [(Path(p.file or "").name, p.path, p.line, p.message) for p in error.value.problems]


# --- layout ----------------------------------------------------------------------------------

def test_case_files_directly_under_cases_in_name_order(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {"b.yaml": CASE, "a.yaml": CASE, ".hidden.yaml": CASE, "notes.txt": "x",
                                "v.mp4": "", "README.md": "x"})
    (root / "cases" / "sub").mkdir()
    (root / "cases" / "sub" / "nested.yaml").write_text(CASE)
    (root / "cases" / "dir.yaml").mkdir()
    eval_dir = open_eval_dir(root)
    assert eval_dir.root == root.resolve() and eval_dir.cases_dir == root / "cases"
    assert [p.name for p in eval_dir.case_paths] == [".hidden.yaml", "a.yaml", "b.yaml"]
    assert eval_dir.config == EvalConfig()


@pytest.mark.parametrize("name", ["a.yml", "a.YML", "a.YAML", "a.Yaml"])
def test_other_yaml_suffixes_are_refused_with_a_rename_hint(tmp_path: Path, name: str) -> None:
    root = make_eval(tmp_path, {name: CASE, "b.yaml": CASE})
    with pytest.raises(ValidationError) as info:
        open_eval_dir(root)
    assert problems_of(info) == [(name, "", None, "case files must use the lowercase .yaml suffix; "
                                                  "rename it to a.yaml")]


def test_relative_eval_dir_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_eval(tmp_path, {"a.yaml": CASE})
    monkeypatch.chdir(tmp_path)
    assert open_eval_dir("eval").root == (tmp_path / "eval").resolve()


def test_missing_eval_dir_and_cases_dir(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as info:
        open_eval_dir(tmp_path / "nope")
    assert problems_of(info) == [("nope", "", None, "eval directory does not exist")]
    assert info.value.hint == "Pass --eval-dir pointing at the directory that holds cases/."
    (tmp_path / "eval").mkdir()
    with pytest.raises(ValidationError) as info:
        open_eval_dir(tmp_path / "eval")
    assert problems_of(info) == [("cases", "", None, "cases/ directory is missing")]
    assert info.value.hint is not None and "cases/" in info.value.hint


def test_no_case_files_needs_allow_empty(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {})
    eval_dir = open_eval_dir(root)
    with pytest.raises(ValidationError) as info:
        load_cases(eval_dir, eval_dir.case_paths, allow_empty=False)
    assert problems_of(info) == [("cases", "", None, "no case files (*.yaml) found; add one or pass --allow-empty")]
    assert load_cases(eval_dir, eval_dir.case_paths, allow_empty=True) == []


# --- --case ---------------------------------------------------------------------------------

def test_select_case_by_stem_or_filename(tmp_path: Path) -> None:
    eval_dir = open_eval_dir(make_eval(tmp_path, {"task-01.yaml": CASE, "task-02.yaml": CASE}))
    assert eval_dir.select_case_paths(None) == eval_dir.case_paths
    assert [p.name for p in eval_dir.select_case_paths("task-02")] == ["task-02.yaml"]
    assert [p.name for p in eval_dir.select_case_paths("task-01.yaml")] == ["task-01.yaml"]


@pytest.mark.parametrize(("case", "message"), [
    ("nope", "unknown case 'nope'; cases: task-01, task-02"),
    ("task-01.yml", "unknown case 'task-01.yml'; cases: task-01, task-02"),
    ("cases/task-01.yaml", "--case takes a case filename or stem under cases/, not a path: 'cases/task-01.yaml'"),
    ("..\\task-01", "--case takes a case filename or stem under cases/, not a path: '..\\\\task-01'"),
])
def test_unknown_case_is_a_validation_error(tmp_path: Path, case: str, message: str) -> None:
    # A ValidationError: `validate --case nope` fails validation (exit 1), run exits 2.
    eval_dir = open_eval_dir(make_eval(tmp_path, {"task-01.yaml": CASE, "task-02.yaml": CASE}))
    with pytest.raises(ValidationError) as info:
        eval_dir.select_case_paths(case)
    assert problems_of(info) == [("cases", "", None, message)]


# --- loading cases ------------------------------------------------------------------------------

def test_load_cases_reports_every_problem_of_every_file(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {
        "a.yaml": CASE.replace("at: 1", "at: -1").replace("video: v.mp4", "video: v.avi"),
        "b.yaml": CASE,
        "c.yaml": CASE + "bogus: 1\n",
        "d.yaml": "video: v.mp4\ntargets: {t: [\n",
    })
    eval_dir = open_eval_dir(root)
    with pytest.raises(ValidationError) as info:
        load_cases(eval_dir, eval_dir.case_paths, allow_empty=False)
    assert [(f, p, line) for f, p, line, _ in problems_of(info)] == [
        ("a.yaml", "video", 1), ("a.yaml", "targets.t.samples[0].at", 5), ("c.yaml", "bogus", 7), ("d.yaml", "", 3)]
    cases = load_cases(eval_dir, (root / "cases" / "b.yaml",), allow_empty=False)
    assert [c.name for c in cases] == ["b"]


def test_allow_empty_reaches_the_case_files(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {"a.yaml": "video: v.mp4\ntargets: {t: {samples: []}}\n"})
    eval_dir = open_eval_dir(root)
    with pytest.raises(ValidationError):
        load_cases(eval_dir, eval_dir.case_paths, allow_empty=False)
    (case,) = load_cases(eval_dir, eval_dir.case_paths, allow_empty=True)
    assert case.targets[0].blocks == ()


CLOUD_CASE = f"""
video:
  store: team-videos
  key: {SHA}.mp4
  sha256: {SHA}
targets:
  t:
    samples: [{{at: 1, expect: true}}]
"""


def test_cloud_video_store_must_be_configured(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {"a.yaml": CLOUD_CASE})
    eval_dir = open_eval_dir(root)
    with pytest.raises(ValidationError) as info:
        load_cases(eval_dir, eval_dir.case_paths, allow_empty=False)
    assert problems_of(info) == [("a.yaml", "video.store", 2, "unknown video store 'team-videos' (none are "
                                  "configured); define it under video_stores in <eval-dir>/config.yaml")]
    (root / "config.yaml").write_text("video_stores:\n  other: {bucket: b}\n  more: {bucket: c}\n")
    eval_dir = open_eval_dir(root)
    with pytest.raises(ValidationError) as info:
        load_cases(eval_dir, eval_dir.case_paths, allow_empty=False)
    assert "unknown video store 'team-videos' (more, other)" in problems_of(info)[0][3]
    (root / "config.yaml").write_text("video_stores:\n  team-videos: {bucket: team-eval-videos}\n")
    (case,) = load_cases(open_eval_dir(root), eval_dir.case_paths, allow_empty=False)
    assert case.video == CloudVideo("team-videos", f"{SHA}.mp4", SHA)


# --- config.yaml ----------------------------------------------------------------------------

def test_config_thresholds_and_stores(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {"a.yaml": CASE}, """
        thresholds:
          min_pass_rate: 0.9
          max_failures: 5
          per_target:
            step_1:
              min_pass_rate: 0.95
            not_in_any_case:
              min_pass_rate: 0.5
        video_stores:
          team-videos:
            type: s3
            bucket: team-eval-videos
            endpoint_url: https://example.invalid
            region: auto
            access_key_id_env: EVAL_STORAGE_ACCESS_KEY_ID
            secret_access_key_env: EVAL_STORAGE_SECRET_ACCESS_KEY
            session_token_env: EVAL_STORAGE_SESSION_TOKEN
          public-evals:
            bucket: public-eval-videos
            public_base_url: https://public.example.invalid
        """)
    config = open_eval_dir(root).config
    # config.yaml per_target may name any target: it applies to whatever runs.
    assert config.thresholds == Thresholds(min_pass_rate=0.9, max_failures=5,
                                           per_target={"step_1": 0.95, "not_in_any_case": 0.5})
    assert config.video_stores["team-videos"] == VideoStoreConfig(
        name="team-videos", bucket="team-eval-videos", type="s3", region="auto",
        endpoint_url="https://example.invalid", access_key_id_env="EVAL_STORAGE_ACCESS_KEY_ID",
        secret_access_key_env="EVAL_STORAGE_SECRET_ACCESS_KEY", session_token_env="EVAL_STORAGE_SESSION_TOKEN")
    # Only bucket is required: type defaults to s3 and region to us-east-1.
    assert config.video_stores["public-evals"] == VideoStoreConfig(
        name="public-evals", bucket="public-eval-videos", type="s3", region="us-east-1",
        public_base_url="https://public.example.invalid")


def test_missing_or_empty_config_means_no_thresholds_and_no_stores(tmp_path: Path) -> None:
    assert load_eval_config(tmp_path / "config.yaml") == (EvalConfig(), [])
    (tmp_path / "config.yaml").write_text("# nothing yet\n")
    assert load_eval_config(tmp_path / "config.yaml") == (EvalConfig(), [])
    (tmp_path / "config.yaml").write_text("thresholds: {}\nvideo_stores: {}\n")
    config, problems = load_eval_config(tmp_path / "config.yaml")
    assert problems == [] and config.thresholds == Thresholds() and dict(config.video_stores) == {}


def test_config_problems_are_all_reported_with_path_and_line(tmp_path: Path) -> None:
    root = make_eval(tmp_path, {"a.yml": CASE}, """
        threshold: {min_pass_rate: 0.9}
        thresholds:
          min_pass_rate: 1.5
          max_failures: -1
          per_target:
            t: {min_pass_rat: 0.5}
        video_stores:
          no-bucket: {region: auto}
          half-creds:
            bucket: b
            access_key_id_env: KEY
          gcs:
            type: gcs
            bucket: b
            bucket_name: b
          empty: {bucket: ""}
          scalar: b
        """)
    with pytest.raises(ValidationError) as info:
        open_eval_dir(root)
    assert [(f, p, line) for f, p, line, _ in problems_of(info)] == [
        ("a.yml", "", None),
        ("config.yaml", "threshold", 1),
        ("config.yaml", "thresholds.min_pass_rate", 3),
        ("config.yaml", "thresholds.max_failures", 4),
        ("config.yaml", "thresholds.per_target.t.min_pass_rat", 6),
        ("config.yaml", "video_stores.no-bucket.bucket", 8),
        ("config.yaml", "video_stores.half-creds", 9),
        ("config.yaml", "video_stores.gcs.type", 13),
        ("config.yaml", "video_stores.gcs.bucket_name", 15),
        ("config.yaml", "video_stores.empty.bucket", 16),
        ("config.yaml", "video_stores.scalar", 17),
    ]
    messages = [m for _, _, _, m in problems_of(info)]
    assert messages[1].startswith("unknown key 'threshold' (did you mean 'thresholds'?); allowed keys: "
                                  "arms, run, thresholds, video_stores")
    assert messages[5] == "a video store needs `bucket`"
    assert messages[6] == "access_key_id_env and secret_access_key_env must be set together"
    assert messages[7] == "unsupported store type 'gcs'; only s3 is supported"
    assert messages[8].startswith("unknown key 'bucket_name'")
    assert messages[9] == "bucket must not be empty"
    assert messages[10] == "video store 'scalar' must be a mapping, got a string"


@pytest.mark.parametrize(("text", "message"), [
    ("- a\n", "config.yaml must be a mapping, got a list"),
    ("thresholds: [a]\n", "thresholds must be a mapping, got a list"),
    ("video_stores: [a]\n", "video_stores must be a mapping, got a list"),
    ("a: 1\na: 2\n", "duplicate key; YAML would silently keep only the last value"),
    ("a: [\n", None),
])
def test_malformed_config(tmp_path: Path, text: str, message: str | None) -> None:
    (tmp_path / "config.yaml").write_text(text)
    _, problems = load_eval_config(tmp_path / "config.yaml")
    assert len(problems) == 1
    if message is None:
        assert problems[0].message.startswith("invalid YAML: ")
    else:
        assert problems[0].message == message


# --- adapter config -------------------------------------------------------------------------

def test_adapter_yaml_is_discovered(tmp_path: Path) -> None:
    assert load_adapter_config(tmp_path, None) == {}
    (tmp_path / "adapter.yaml").write_text("model: small\nlimits: {tokens: 10}\n")
    assert load_adapter_config(tmp_path, None) == {"model": "small", "limits": {"tokens": 10}}
    (tmp_path / "adapter.yaml").write_text("")
    assert load_adapter_config(tmp_path, None) == {}


def test_explicit_adapter_config_overrides_discovery(tmp_path: Path) -> None:
    (tmp_path / "adapter.yaml").write_text("model: discovered\n")
    (tmp_path / "other.yaml").write_text("model: explicit\n")
    (tmp_path / "other.json").write_text(json.dumps({"model": "json", "n": [1, 2]}))
    assert load_adapter_config(tmp_path, str(tmp_path / "other.yaml")) == {"model": "explicit"}
    assert load_adapter_config(tmp_path, str(tmp_path / "other.json")) == {"model": "json", "n": [1, 2]}
    with pytest.raises(UsageError, match="does not exist; check --adapter-config"):
        load_adapter_config(tmp_path, str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(("name", "text", "fragment"), [
    ("bad.json", "{not json", "invalid JSON"),
    ("list.json", "[1, 2]", "adapter config must be a mapping (YAML or JSON object)"),
    ("list.yaml", "- a\n", "adapter config must be a mapping (YAML or JSON object)"),
    ("nan.json", '{"x": NaN}', "adapter config must be JSON-like"),
    ("date.yaml", "when: 2024-01-01\n", "adapter config must be JSON-like"),
    ("dup.yaml", "a: 1\na: 2\n", "duplicate key"),
    ("syntax.yaml", "a: [\n", "invalid YAML"),
])
def test_bad_adapter_config(tmp_path: Path, name: str, text: str, fragment: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ValidationError) as info:
        load_adapter_config(tmp_path, str(tmp_path / name))
    assert fragment in info.value.problems[0].message
    assert info.value.problems[0].file == str(tmp_path / name)
