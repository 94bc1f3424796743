"""Unit parsers and formatters: message sizes, bandwidths, durations, FLOPs. One place for all of
them.

Sizes follow nccl-tests: bare K/M/G and KiB/MiB/GiB are powers of two, kB/MB/GB powers of ten.
Bandwidths must say bits or bytes unambiguously: Gbit, Gbit/s, Gbps (bits), GB/s, GiB/s (bytes).
"""

from __future__ import annotations

import math
import re

from scalebench.spec.errors import UserError

# Size suffixes. Bare K/M/G and KiB/MiB/GiB are powers of two (nccl-tests' convention);
# kB/MB/GB are SI powers of ten. Case-insensitive; a plain number is bytes.
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "m": 2**20, "g": 2**30,
    "kib": 2**10, "mib": 2**20, "gib": 2**30,
    "kb": 10**3, "mb": 10**6, "gb": 10**9,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, name: str = "sizes") -> int:
    """'1M' -> 1048576, '64K' -> 65536, '100MB' -> 100000000, '4096' -> 4096 (bytes)."""
    match = _SIZE_RE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise UserError(f"{name}: cannot read {text!r} as a size; use bytes or K/M/G (powers of "
                        "two, as nccl-tests), e.g. 64K,1M,16M")
    value = float(match.group(1)) * _SIZE_UNITS[unit]
    if not value.is_integer() or value <= 0:
        raise UserError(f"{name}: {text!r} is not a whole number of bytes above 0")
    return int(value)


def format_size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:g} {unit}" if value >= 10 or value.is_integer() else f"{value:.2f} {unit}"
    return f"{nbytes} B"


_DECIMAL = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BINARY = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)(?:[eE]([-+]?\d+))?"
_BANDWIDTH_RE = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z/]*)\s*$")
BANDWIDTH_HELP = "e.g. 25Gbit, 25Gbps, 3.1GB/s, 100MB/s"


def parse_bandwidth(text: str, name: str = "bandwidth") -> float:
    """A bandwidth with its unit -> bytes per second.

    Bits: bit, bits, b, bps, b/s; bytes: B, Bps, B/s. Prefixes k, M, G, T are powers of ten
    (network and nccl-tests convention); Ki, Mi, Gi, Ti powers of two. 25Gbit -> 3.125e9.
    A lowercase prefix with a lowercase b ("gb", "mb/s", "gbps") is refused as ambiguous.
    """
    raw = str(text)
    match = _BANDWIDTH_RE.match(raw)
    if not match:
        raise UserError(f"{name}: cannot read {raw!r} as a bandwidth; use a number and a unit, "
                        f"{BANDWIDTH_HELP}")
    mantissa, exponent, unit = match.groups()
    value = float(mantissa) * (10.0 ** int(exponent) if exponent else 1.0)
    if not unit:
        raise UserError(f"{name}: {raw!r} has no unit; use {BANDWIDTH_HELP}")
    body = unit
    for suffix in ("/s", "ps"):
        if body.endswith(suffix) and len(body) > len(suffix):
            body = body[: -len(suffix)]
            break
    if body.endswith("b") and body[:-1].islower() and (body[:-1] in _DECIMAL or
                                                       body[:-1] in _BINARY):
        # "gb", "mb/s", "gbps": a lowercase prefix with a lowercase b is written for bits and
        # for bytes alike; refuse to guess.
        prefix = body[:-1]
        proper = prefix if prefix == "k" else prefix[0].upper() + prefix[1:]
        raise UserError(f"{name}: {unit!r} is ambiguous; write {proper}bit/s for bits or "
                        f"{proper}B/s for bytes")
    if body.lower().endswith(("bits", "bit")):
        bits, prefix = True, body[: -4 if body.lower().endswith("bits") else -3]
    elif body.endswith("b"):
        bits, prefix = True, body[:-1]
    elif body.endswith("B"):
        bits, prefix = False, body[:-1]
    else:
        raise UserError(f"{name}: unknown unit {unit!r} in {raw!r}; use {BANDWIDTH_HELP}")
    scale = _DECIMAL.get(prefix.lower(), _BINARY.get(prefix.lower()))
    if scale is None:
        raise UserError(f"{name}: unknown unit {unit!r} in {raw!r}; use {BANDWIDTH_HELP}")
    result = value * scale / (8.0 if bits else 1.0)
    if not math.isfinite(result) or result <= 0:
        raise UserError(f"{name}: must be above 0, got {raw!r}")
    return result


_DURATION_RE = re.compile(rf"^\s*{_NUMBER}\s*([a-zµμ]*)\s*$")
_DURATION_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "μs": 1e6, "ns": 1e9}  # per second


def parse_duration(text: str, name: str = "latency") -> float:
    """'5us' -> 5e-06; units s, ms, us (or µs), ns; a bare 0 is allowed."""
    raw = str(text)
    match = _DURATION_RE.match(raw)
    if match:
        mantissa, exponent, unit = match.groups()
        value = float(mantissa) * (10.0 ** int(exponent) if exponent else 1.0)
        if unit in _DURATION_UNITS or (not unit and value == 0):
            value /= _DURATION_UNITS.get(unit, 1.0)
            if math.isfinite(value):
                return value
    raise UserError(f"{name}: cannot read {raw!r} as a time; use e.g. 5us, 0.01ms, 0")


def format_bandwidth(bytes_per_sec: float) -> str:
    return f"{bytes_per_sec / 1e9:.3g} GB/s ({bytes_per_sec * 8 / 1e9:.3g} Gbit/s)"




_FLOPS_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
_FLOPS_RE = re.compile(rf"^\s*{_NUMBER}\s*([kKMGTP]?)\s*(?:FLOP/?S|FLOPS)?\s*$", re.IGNORECASE)
FLOPS_HELP = "e.g. 989T, 312e12, 19.5TFLOPS (k/M/G/T/P are powers of ten)"


def format_flops(value: float, unit: str = "FLOP") -> str:
    """1.53e11 -> "153 GFLOP"; unit "FLOP/s" for rates."""
    for prefix, scale in _FLOPS_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def parse_flops(text: str, name: str = "peak_flops") -> float:
    """'989T' -> 9.89e14, '312e12' -> 3.12e14, '19.5 TFLOPS' -> 1.95e13 (FLOP/s)."""
    raw = str(text)
    match = _FLOPS_RE.match(raw)
    if match:
        mantissa, exponent, prefix = match.groups()
        value = float(mantissa) * (10.0 ** int(exponent) if exponent else 1.0)
        value *= {p.lower(): scale for p, scale in _FLOPS_PREFIXES}.get(prefix.lower(), 1.0)
        if math.isfinite(value) and value > 0:
            return value
    raise UserError(f"{name}: cannot read {raw!r} as FLOP/s above 0; use {FLOPS_HELP}")


_WALL_RE = re.compile(rf"^\s*{_NUMBER}\s*(s|m|min|h)?\s*$")
_WALL_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_wall_time(text: str, name: str = "budget") -> float:
    """'10m' -> 600.0; units s, m (or min), h; a bare number is seconds; must be > 0."""
    raw = str(text)
    match = _WALL_RE.match(raw)
    if match:
        mantissa, exponent, unit = match.groups()
        value = float(mantissa) * (10.0 ** int(exponent) if exponent else 1.0) * _WALL_UNITS[unit]
        if math.isfinite(value) and value > 0:
            return value
    raise UserError(f"{name}: cannot read {raw!r} as a wall time > 0; use e.g. 90s, 10m, 1h")
