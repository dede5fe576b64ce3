"""Where a store's credentials come from.

Order: the variables the store names (``access_key_id_env`` and friends); when
it names none, the standard AWS sources: ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, then the shared credentials
and config files for ``AWS_PROFILE`` (default ``default``). A store that names
variables never falls back to other sources: an unset variable is an error, not
a reason to upload with whatever account happens to be configured.

Only variable names, file paths and profile names ever appear in messages.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import StoreError
from ..support.secretvalues import add_secret
from .config import VideoStoreConfig
from .sigv4 import Credentials

_UNSUPPORTED_PROFILE_KEYS = ("credential_process", "sso_session", "sso_start_url", "role_arn",
                             "web_identity_token_file")


def resolve_credentials(store: VideoStoreConfig, environ: Mapping[str, str] | None = None,
                        *, home: Path | None = None) -> Credentials | None:
    """The store's credentials, or None when no source has any; their secrets are recorded for redaction."""
    env = os.environ if environ is None else environ
    if store.access_key_id_env and store.secret_access_key_env:
        creds = _from_named(store, env)
    else:
        creds = _from_aws_env(env) or _from_shared_files(env, home)
        if creds is not None and store.session_token_env:
            token = env.get(store.session_token_env) or None
            creds = Credentials(creds.access_key_id, creds.secret_access_key,
                                token or creds.session_token, creds.source)
    if creds is not None:
        add_secret(creds.secret_access_key)
        if creds.session_token:
            add_secret(creds.session_token)
    return creds


def require_credentials(store: VideoStoreConfig, creds: Credentials | None, action: str) -> Credentials:
    if creds is not None:
        return creds
    if store.access_key_id_env:
        how = f"set {store.access_key_id_env} and {store.secret_access_key_env}"
    else:
        how = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, configure a profile in "
               "~/.aws/credentials (select it with AWS_PROFILE), or name your own variables "
               "with access_key_id_env/secret_access_key_env in config.yaml")
    raise StoreError(f"{action} video store {store.name!r} needs credentials and none were "
                     f"found: {how}")


def _from_named(store: VideoStoreConfig, env: Mapping[str, str]) -> Credentials | None:
    assert store.access_key_id_env and store.secret_access_key_env
    key_id = env.get(store.access_key_id_env, "")
    secret = env.get(store.secret_access_key_env, "")
    if not key_id and not secret:
        return None
    missing = [name for name, value in ((store.access_key_id_env, key_id),
                                        (store.secret_access_key_env, secret)) if not value]
    if missing:
        raise StoreError(f"video store {store.name!r}: environment variable {missing[0]} is not set "
                         f"(config.yaml names it in video_stores.{store.name}); set it alongside "
                         f"the other credential variable")
    token = env.get(store.session_token_env, "") if store.session_token_env else ""
    return Credentials(key_id.strip(), secret.strip(), token.strip() or None,
                       source=f"environment variables {store.access_key_id_env}/"
                              f"{store.secret_access_key_env}")


def _from_aws_env(env: Mapping[str, str]) -> Credentials | None:
    key_id = env.get("AWS_ACCESS_KEY_ID", "")
    secret = env.get("AWS_SECRET_ACCESS_KEY", "")
    if not key_id or not secret:
        return None
    token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN") or None
    return Credentials(key_id.strip(), secret.strip(), token.strip() if token else None,
                       source="environment variables AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")


def _read_ini(path: Path) -> configparser.RawConfigParser | None:
    if not path.is_file():
        return None
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read AWS file {path}: {type(exc).__name__}; fix or remove it") from None
    return parser


def _from_shared_files(env: Mapping[str, str], home: Path | None) -> Credentials | None:
    base = home if home is not None else Path.home()
    explicit = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE")
    profile = explicit or "default"
    creds_path = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or base / ".aws" / "credentials").expanduser()
    config_path = Path(env.get("AWS_CONFIG_FILE") or base / ".aws" / "config").expanduser()
    # The credentials file uses [name]; the config file uses [profile name], except [default].
    candidates = [(creds_path, profile), (config_path, profile if profile == "default" else f"profile {profile}")]
    found_profile = False
    for path, section in candidates:
        parser = _read_ini(path)
        if parser is None or not parser.has_section(section):
            continue
        found_profile = True
        values = dict(parser.items(section))
        key_id = values.get("aws_access_key_id", "").strip()
        secret = values.get("aws_secret_access_key", "").strip()
        if key_id and secret:
            token = (values.get("aws_session_token") or values.get("aws_security_token") or "").strip()
            return Credentials(key_id, secret, token or None, source=f"profile {profile!r} in {path}")
        unsupported = [k for k in _UNSUPPORTED_PROFILE_KEYS if k in values]
        if unsupported:
            raise StoreError(f"AWS profile {profile!r} in {path} uses {unsupported[0]}, which glasskit_eval "
                             "does not support; export static or temporary keys (AWS_ACCESS_KEY_ID, "
                             "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) instead")
    if explicit and not found_profile:
        raise StoreError(f"AWS profile {profile!r} (from AWS_PROFILE) was not found in {creds_path} "
                         f"or {config_path}; check the profile name")
    return None
