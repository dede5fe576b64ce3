"""A video store's settings as the store code needs them (parsed from config.yaml by ``cases.evaldir``)."""

from __future__ import annotations

from ..support.records import Frozen


class VideoStoreConfig(Frozen):
    _fields = ("name", "bucket", "type", "region", "endpoint_url", "public_base_url",
               "access_key_id_env", "secret_access_key_env", "session_token_env")
    name: str
    bucket: str
    type: str
    region: str
    endpoint_url: str | None
    public_base_url: str | None
    access_key_id_env: str | None
    secret_access_key_env: str | None
    session_token_env: str | None

    def __init__(self, name: str, bucket: str, type: str = "s3", region: str = "us-east-1",
                 endpoint_url: str | None = None, public_base_url: str | None = None,
                 access_key_id_env: str | None = None, secret_access_key_env: str | None = None,
                 session_token_env: str | None = None) -> None:
        self.__dict__.update(name=name, bucket=bucket, type=type, region=region, endpoint_url=endpoint_url,
                             public_base_url=public_base_url, access_key_id_env=access_key_id_env,
                             secret_access_key_env=secret_access_key_env, session_token_env=session_token_env)
