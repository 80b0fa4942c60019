"""Download the wheels a `uv export` requirements file names, from uv.lock, for this interpreter.

usage: python wheelhouse.py REQUIREMENTS UV_LOCK OUT

For the offline pip-install test (tests/test_verifiers_offline.py): pip then installs from OUT with
--no-index --require-hashes. Each wheel is the one uv.lock lists for the package's locked version
whose tags this interpreter takes first, fetched by its locked URL and checked against its locked
sha256; eight at once, since pip downloads one by one. Needs the network (CI only).
"""

from __future__ import annotations

import hashlib
import sys
import tomllib
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename


def wanted(requirements: str) -> list[tuple[str, str]]:
    """(name, version) of every pinned requirement whose marker holds here."""
    pins = []
    for line in requirements.splitlines():
        if not line.strip() or line[0] in " #-":
            continue
        req = Requirement(line.rstrip(" \\"))
        if req.marker is not None and not req.marker.evaluate():
            continue
        (spec,) = req.specifier
        pins.append((canonicalize_name(req.name), spec.version))
    return pins


def pick(lock: dict[str, object], pins: list[tuple[str, str]]) -> list[dict[str, str]]:
    """Per pin, the locked wheel whose tags come first in this interpreter's order."""
    rank = {tag: i for i, tag in enumerate(sys_tags())}
    by_pin = {
        (canonicalize_name(str(p["name"])), str(p["version"])): p
        for p in lock["package"]  # type: ignore[attr-defined]
    }
    chosen = []
    for pin in pins:
        package = by_pin.get(pin)
        if package is None:
            raise SystemExit(f"error: {pin[0]}=={pin[1]} is not in uv.lock")
        fits = []
        for wheel in package.get("wheels", []):
            _, _, _, tags = parse_wheel_filename(wheel["url"].rsplit("/", 1)[1])
            best = min((rank[t] for t in tags if t in rank), default=None)
            if best is not None:
                fits.append((best, wheel))
        if not fits:
            raise SystemExit(f"error: uv.lock has no wheel of {pin[0]}=={pin[1]} for this Python")
        chosen.append(min(fits, key=lambda f: f[0])[1])
    return chosen


def fetch(wheel: dict[str, str], out: Path) -> str:
    name = wheel["url"].rsplit("/", 1)[1]
    target = out / name
    algorithm, digest = wheel["hash"].split(":", 1)
    if not (target.exists() and hashlib.new(algorithm, target.read_bytes()).hexdigest() == digest):
        with urllib.request.urlopen(wheel["url"], timeout=120) as response:
            data = response.read()
        if hashlib.new(algorithm, data).hexdigest() != digest:
            raise SystemExit(f"error: {name}: sha256 differs from uv.lock's")
        target.write_bytes(data)
    return name


def main(argv: list[str]) -> int:
    requirements, lock_path, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    lock = tomllib.loads(lock_path.read_text(encoding="utf-8"))
    wheels = pick(lock, wanted(requirements.read_text(encoding="utf-8")))
    with ThreadPoolExecutor(8) as pool:
        names = list(pool.map(lambda w: fetch(w, out), wheels))
    print(f"wheelhouse: {len(names)} wheels from uv.lock in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
