"""Twins of the dropout randomness: uniform_bits (the counter-based ARS
generator, AES rounds written out in NumPy) and dropout_mask."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from posembed.reference._common import _check_size, _count, _rate, _seed_value

_GAMMA = 0x9E3779B97F4A7C15
_M64 = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays (arithmetic wraps mod 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = z ^ (z >> np.uint64(31))
    return mixed


def _gf_mul(a: int, b: int) -> int:
    p = 0
    for _ in range(8):
        if b & 1:
            p ^= a
        a = ((a << 1) ^ (0x1B if a & 0x80 else 0)) & 0xFF
        b >>= 1
    return p


@functools.cache
def _sbox() -> np.ndarray:
    """The AES S-box from its definition: inverse in GF(2^8), then the affine map
    (built on first use, not at import)."""
    box = np.zeros(256, dtype=np.uint8)
    for x in range(256):
        inv = 0
        if x:
            inv, base, e = 1, x, 254
            while e:
                if e & 1:
                    inv = _gf_mul(inv, base)
                base = _gf_mul(base, base)
                e >>= 1
        value = inv
        for s in range(1, 5):
            value ^= ((inv << s) | (inv >> (8 - s))) & 0xFF
        box[x] = value ^ 0x63
    return box


_SHIFT_ROWS = np.array([0, 5, 10, 15, 4, 9, 14, 3, 8, 13, 2, 7, 12, 1, 6, 11])


def _xtime(a: np.ndarray) -> np.ndarray:
    doubled: np.ndarray = (a << np.uint8(1)) ^ np.where(a & 0x80, np.uint8(0x1B), np.uint8(0))
    return doubled


def _aes_round(state: np.ndarray, key: np.ndarray, last: bool) -> np.ndarray:
    """x86 AESENC (AESENCLAST when last) on (N, 16) uint8 states, byte 0 lowest."""
    t = _sbox()[state[:, _SHIFT_ROWS]]  # ShiftRows, then SubBytes
    if not last:  # MixColumns, column by column
        a = t.reshape(-1, 4, 4)
        a0, a1, a2, a3 = a[:, :, 0], a[:, :, 1], a[:, :, 2], a[:, :, 3]
        x = a0 ^ a1 ^ a2 ^ a3
        t = np.stack(
            [
                a0 ^ x ^ _xtime(a0 ^ a1),
                a1 ^ x ^ _xtime(a1 ^ a2),
                a2 ^ x ^ _xtime(a2 ^ a3),
                a3 ^ x ^ _xtime(a3 ^ a0),
            ],
            axis=2,
        ).reshape(-1, 16)
    out: np.ndarray = t ^ key
    return out


def _le_bytes(lo: int, hi: int) -> np.ndarray:
    return np.frombuffer(lo.to_bytes(8, "little") + hi.to_bytes(8, "little"), dtype=np.uint8)


def uniform_bits(seed: int, n: int) -> np.ndarray:
    """The 32 random bits of elements 0..n-1 for ``seed`` (the ARS construction).

    k0 = (mix(seed), mix(seed + G)), round keys k_i = k0 + i * W per 64-bit half,
    block j = AESENCLAST(AESENC^4(j ^ k0, k1..k4), k5) for the 128-bit
    little-endian counter j, element e = little-endian word e % 4 of block e // 4
    (mix: SplitMix64's finaliser; G = W_lo = 0x9E3779B97F4A7C15,
    W_hi = 0xBB67AE8584CAA73B).

    Parameters
    ----------
    seed : int
        The dropout seed, 0..2**64-1.
    n : int
        Number of elements, >= 0.

    Returns
    -------
    ndarray of uint32, shape (n,)
        The bits of each element; :func:`dropout_mask` keeps those at least
        floor(p * 2^32).

    Raises
    ------
    TypeError
        A ``seed`` that is not an integer.
    ValueError
        A ``seed`` outside 0..2**64-1.
    """
    return _bits(_seed_value(seed), 0, n)


def _bits(seed: int, first: int, n: int) -> np.ndarray:
    """``uniform_bits(seed, first + n)[first:]``, without the first elements'
    blocks (embed's ``first_row`` starts its mask far into the counter)."""
    lo = int(_mix(np.array([seed], dtype=np.uint64))[0])
    hi = int(_mix(np.array([(seed + _GAMMA) & _M64], dtype=np.uint64))[0])
    keys = [
        _le_bytes((lo + i * _GAMMA) & _M64, (hi + i * 0xBB67AE8584CAA73B) & _M64) for i in range(6)
    ]
    block0, blocks = first // 4, (first + n + 3) // 4 - first // 4
    state = np.zeros((blocks, 16), dtype=np.uint8)
    counters = np.arange(block0, block0 + blocks, dtype=np.uint64).astype("<u8")
    state[:, :8] = counters.view(np.uint8).reshape(blocks, 8)
    state ^= keys[0]
    for r in range(1, 6):
        state = _aes_round(state, keys[r], last=r == 5)
    words: np.ndarray = np.ascontiguousarray(state).view("<u4").reshape(-1)
    skip = first - 4 * block0
    return words[skip : skip + n].astype(np.uint32)


def dropout_mask(shape: Any, p: float, seed: int) -> np.ndarray:
    """True where an element of an output of ``shape`` is kept.

    The twin of :func:`posembed.dropout_mask`: an element is kept when its
    :func:`uniform_bits` are at least floor(p * 2^32).

    Parameters
    ----------
    shape : int or sequence of int
        The output's shape, each size >= 0.
    p : float
        Dropout rate in [0, 1).
    seed : int
        The mask's seed, 0..2**64-1.

    Returns
    -------
    ndarray of bool, shape ``shape``
        True where the element is kept.

    Raises
    ------
    TypeError
        A ``shape`` that is not an integer or a sequence of integers, a ``p``
        that is not a number, or a ``seed`` that is None or not an integer.
    ValueError
        A negative size in ``shape``, ``p`` outside [0, 1), or ``seed`` outside
        0..2**64-1.
    """
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    sizes = [_count(k, "shape", 0) for k in dims]
    _check_size("shape", *sizes)
    rate = _rate(p, "p")
    if seed is None:
        raise TypeError("dropout_mask needs a seed")
    n = math.prod(sizes)
    keep: np.ndarray = (uniform_bits(seed, n) >= int(rate * 2**32)).reshape(dims)
    return keep
