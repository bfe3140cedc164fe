"""Opaque, prefixed, roughly time-ordered identifiers (``sch_01J...``).

Clients never parse them; the time-ordered prefix only keeps index inserts local.
"""

import base64
import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
_FROM_RFC4648 = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _ALPHABET.encode())


def new_id(prefix: str) -> str:
    """48 bits of milliseconds and 80 random bits, like a ULID: 26 base32 digits."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    # 20 bytes are 32 digits with no padding; the first 6 only encode leading zero bits.
    return f"{prefix}_{base64.b32encode(value.to_bytes(20, 'big'))[6:].translate(_FROM_RFC4648).decode()}"
