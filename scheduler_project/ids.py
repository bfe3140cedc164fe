"""Opaque, prefixed, roughly time-ordered identifiers (``sch_01J...``).

Clients never parse them; the time-ordered prefix only keeps index inserts local.
"""

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """48 bits of milliseconds and 80 random bits, like a ULID."""
    millis = time.time_ns() // 1_000_000
    randomness = int.from_bytes(os.urandom(10), "big")
    return f"{prefix}_{_encode(millis, 10)}{_encode(randomness, 16)}"

