"""Wire encodings a message payload may use; the `default_encoding` config key holds one."""

from __future__ import annotations

import enum

__all__ = ["Encoding"]


class Encoding(enum.Enum):
    """Serialization format for message payloads. Accepted and round-tripped; Multipart is used."""

    Multipart = "multipart"
    Bincode = "bincode"
    Json = "json"

    def __repr__(self) -> str:
        return f"Encoding.{self.name}"
