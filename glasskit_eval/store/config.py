"""A video store's settings as the store code needs them (parsed from config.yaml by ``cases.evaldir``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VideoStoreConfig:
    """One ``video_stores`` entry of config.yaml: the bucket, where it is and where its credentials come from."""

    name: str
    bucket: str
    type: str = "s3"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    public_base_url: str | None = None
    access_key_id_env: str | None = None
    secret_access_key_env: str | None = None
    session_token_env: str | None = None
