"""Credential sources: named variables, AWS variables, shared files with AWS_PROFILE."""

from __future__ import annotations

from pathlib import Path

import pytest

from glasskit_eval.errors import StoreError
from glasskit_eval.store.config import VideoStoreConfig
from glasskit_eval.store.credentials import require_credentials, resolve_credentials

NAMED = VideoStoreConfig(name="team", bucket="b", access_key_id_env="MY_ID", secret_access_key_env="MY_SECRET",
                         session_token_env="MY_TOKEN")
PLAIN = VideoStoreConfig(name="aws", bucket="b")


def test_named_variables_win_and_carry_a_session_token(tmp_path: Path) -> None:
    env = {"MY_ID": "AKIDNAMED", "MY_SECRET": "s3cr3t", "MY_TOKEN": "tok",
           "AWS_ACCESS_KEY_ID": "AKIDAWS", "AWS_SECRET_ACCESS_KEY": "other"}
    creds = resolve_credentials(NAMED, env, home=tmp_path)
    assert creds is not None
    assert (creds.access_key_id, creds.secret_access_key, creds.session_token) == ("AKIDNAMED", "s3cr3t", "tok")
    assert "MY_ID" in creds.source and "s3cr3t" not in creds.source


def test_named_variables_never_fall_back_to_other_sources(tmp_path: Path) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIDAWS", "AWS_SECRET_ACCESS_KEY": "other"}
    assert resolve_credentials(NAMED, env, home=tmp_path) is None
    with pytest.raises(StoreError, match="set MY_ID and MY_SECRET"):
        require_credentials(NAMED, None, "uploading to")


def test_half_set_named_variables_name_the_missing_one_without_values(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        resolve_credentials(NAMED, {"MY_ID": "AKIDNAMED"}, home=tmp_path)
    assert "MY_SECRET" in str(info.value) and "AKIDNAMED" not in str(info.value)


def test_aws_environment_variables(tmp_path: Path) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIDAWS", "AWS_SECRET_ACCESS_KEY": "sec", "AWS_SESSION_TOKEN": "tok"}
    creds = resolve_credentials(PLAIN, env, home=tmp_path)
    assert creds is not None and (creds.access_key_id, creds.session_token) == ("AKIDAWS", "tok")


def _write_aws_files(home: Path) -> None:
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d%secret\n\n"
        "[ci]\naws_access_key_id=AKIDCI\naws_secret_access_key=cisecret\naws_session_token=citoken\n")
    (home / ".aws" / "config").write_text(
        "[profile fromconfig]\nregion = eu-west-1\naws_access_key_id = AKIDCONF\n"
        "aws_secret_access_key = confsecret\n\n[profile sso]\nsso_session = corp\n")


def test_shared_credentials_file_default_and_named_profiles(tmp_path: Path) -> None:
    _write_aws_files(tmp_path)
    default = resolve_credentials(PLAIN, {}, home=tmp_path)
    assert default is not None and default.secret_access_key == "d%secret"  # no interpolation
    ci = resolve_credentials(PLAIN, {"AWS_PROFILE": "ci"}, home=tmp_path)
    assert ci is not None and (ci.access_key_id, ci.session_token) == ("AKIDCI", "citoken")
    conf = resolve_credentials(PLAIN, {"AWS_PROFILE": "fromconfig"}, home=tmp_path)
    assert conf is not None and conf.access_key_id == "AKIDCONF"


def test_environment_beats_shared_files(tmp_path: Path) -> None:
    _write_aws_files(tmp_path)
    env = {"AWS_ACCESS_KEY_ID": "AKIDAWS", "AWS_SECRET_ACCESS_KEY": "sec", "AWS_PROFILE": "ci"}
    creds = resolve_credentials(PLAIN, env, home=tmp_path)
    assert creds is not None and creds.access_key_id == "AKIDAWS"


def test_file_locations_from_environment(tmp_path: Path) -> None:
    creds_file = tmp_path / "elsewhere.ini"
    creds_file.write_text("[default]\naws_access_key_id=AKIDELSE\naws_secret_access_key=x\n")
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(creds_file)}
    creds = resolve_credentials(PLAIN, env, home=tmp_path / "nohome")
    assert creds is not None and creds.access_key_id == "AKIDELSE"


def test_unknown_or_unsupported_profiles_are_clear_errors(tmp_path: Path) -> None:
    _write_aws_files(tmp_path)
    with pytest.raises(StoreError, match=r"'nosuch'.*not found"):
        resolve_credentials(PLAIN, {"AWS_PROFILE": "nosuch"}, home=tmp_path)
    with pytest.raises(StoreError, match="sso_session"):
        resolve_credentials(PLAIN, {"AWS_PROFILE": "sso"}, home=tmp_path)


def test_no_source_means_none_and_a_helpful_error(tmp_path: Path) -> None:
    assert resolve_credentials(PLAIN, {}, home=tmp_path) is None
    with pytest.raises(StoreError, match="AWS_ACCESS_KEY_ID"):
        require_credentials(PLAIN, None, "downloading from")


def test_session_token_variable_adds_to_standard_sources(tmp_path: Path) -> None:
    store = VideoStoreConfig(name="t", bucket="b", session_token_env="MY_TOKEN")
    env = {"AWS_ACCESS_KEY_ID": "AKIDAWS", "AWS_SECRET_ACCESS_KEY": "sec", "MY_TOKEN": "tok2"}
    creds = resolve_credentials(store, env, home=tmp_path)
    assert creds is not None and creds.session_token == "tok2"
