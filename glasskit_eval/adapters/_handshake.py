"""The command protocol's handshake: the ``initialize`` result and the capabilities it reports (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..errors import ProtocolError

PROTOCOL_VERSION: Final = 1


@dataclass(frozen=True)
class Capabilities:
    """The evaluation methods an adapter reported in its ``initialize`` result."""

    evaluate: bool
    evaluate_many: bool
    #: ``startStream`` / ``frame`` / ``endStream``: the adapter can be fed stream targets.
    frame: bool = False



def parse_initialize_result(result: object) -> Capabilities:
    """Check an ``initialize`` result and return the capabilities it reports."""
    if not isinstance(result, dict):
        raise ProtocolError(
            "the adapter's initialize result must be an object "
            '{"protocolVersion": 1, "capabilities": {...}}'
        )
    version = result.get("protocolVersion")
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise ProtocolError(
            f"the adapter speaks protocol version {version!r}, but glasskit_eval speaks "
            f"version {PROTOCOL_VERSION}; use a protocol helper for version "
            f"{PROTOCOL_VERSION} (the JavaScript helper in the adapter reference, or "
            "python -m glasskit_eval.protocol_server)"
        )
    caps = result.get("capabilities")
    if not isinstance(caps, dict):
        raise ProtocolError("the adapter's initialize result lacks a capabilities object")
    flags: dict[str, bool] = {}
    for name in ("evaluate", "evaluateMany", "frame"):
        value = caps.get(name, False)
        if not isinstance(value, bool):
            raise ProtocolError(
                f"capabilities.{name} in the adapter's initialize result must be true or "
                f"false, got {value!r}"
            )
        flags[name] = value
    if not any(flags.values()):
        raise ProtocolError(
            "the adapter reports none of the evaluate, evaluateMany and frame capabilities; "
            "the object its factory returns must implement evaluate, evaluateMany or onFrame"
        )
    return Capabilities(flags["evaluate"], flags["evaluateMany"], flags["frame"])
