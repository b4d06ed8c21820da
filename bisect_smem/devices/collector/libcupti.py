"""Which libcupti a traced command's collector loads, chosen for the driver's CUDA version, and why.

The collector inside the traced process prefers a libcupti that process already loaded (two copies in one
process collide); the file chosen here is what it loads otherwise. A libcupti of a newer CUDA major than the
driver's cannot start (a CUDA 13 libcupti needs a 13.x driver: under R535-R570 every process would run
untraced), so it is never chosen; among the others, one of the driver's own major release no newer than the
driver comes first, newest first. The driver's CUDA version is asked of the driver (cuDriverGetVersion), else
read from its branch in /proc/driver/nvidia/version.

Looked for: one already loaded in this process; BISECT_SMEM_CUPTI_LIBRARY (the user's choice, taken as given);
the NVIDIA wheels (nvidia-cuda-cupti for CUDA 13 in ``nvidia/cu13/lib``, nvidia-cuda-cupti-cu12 in
``nvidia/cuda_cupti/lib``) in the traced command's own Python environment (the interpreter it runs, or the one
its script's ``#!`` names, and $VIRTUAL_ENV), then in this tool's; then the toolkits ($CUDA_HOME, /usr/local/cuda).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bisect_smem.core.environment import CUPTI_LIBRARY as OVERRIDE
from bisect_smem.core.frozen import frozen
from bisect_smem.devices.toolkit import SYSTEM_CUDA, toolkit_homes

DRIVER_LIBRARY = "libcuda.so.1"
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
# The CUDA version each driver branch supports, as cuDriverGetVersion says it under that branch (12080: 12.8).
BRANCH_CUDA = dict([(520, 11080), (525, 12000), (530, 12010), (535, 12020), (545, 12030), (550, 12040),
                    (555, 12050), (560, 12060), (565, 12070), (570, 12080), (575, 12090), (580, 13000)])


def cuda_version(value: int) -> tuple[int, int]:
    """cuDriverGetVersion's number as (major, minor): 12080 is CUDA 12.8."""
    return value // 1000, value % 1000 // 10
WHEELS = {13: ("nvidia/cu13/lib", "nvidia-cuda-cupti"), 12: ("nvidia/cuda_cupti/lib", "nvidia-cuda-cupti-cu12")}
TOOLKIT_DIRS = ("extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
INSTALL_HINT = ("install libcupti: pip install nvidia-cuda-cupti (CUDA 13) or nvidia-cuda-cupti-cu12 (CUDA 12), "
                f"or name the file with {OVERRIDE}=/path/to/libcupti.so")
_SONAME = re.compile(r"libcupti\.so\.(\d{1,2})")
_BRANCH = re.compile(r"NVRM version:.*?\s(\d{3,4})\.\d+")

Version = tuple[int, int]


@frozen
class Found:
    """A libcupti file, how it was found ("already loaded", the override, "wheel NAME in FOLDER", "toolkit
    HOME"), and its CUDA version: major from its name (libcupti.so.12), minor from its wheel or toolkit."""

    path: str
    how: str
    major: int | None = None
    minor: int | None = None

    def version(self) -> str:
        """" 12.8", " 13" or "" (not known), to follow the word libcupti."""
        return "" if self.major is None else f" {self.major}" + ("" if self.minor is None else f".{self.minor}")


@frozen
class DriverCuda:
    """The CUDA version the driver supports, and where that was read."""

    version: Version
    source: str

    def __str__(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


@frozen
class Choice:
    """The libcupti to use (None where none fits), and the line that says which and why, or what to install."""

    found: Found | None
    says: str


def driver_cuda(library: str | None = None, version_file: Path | None = None) -> DriverCuda | None:
    """The driver's CUDA version: cuDriverGetVersion of ``library`` (DRIVER_LIBRARY), else the branch in
    ``version_file`` (DRIVER_VERSION_FILE); None where there is no driver."""
    library = library or DRIVER_LIBRARY
    version_file = version_file or DRIVER_VERSION_FILE
    try:
        value = ctypes.c_int(0)
        if ctypes.CDLL(library).cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value > 0:
            return DriverCuda(cuda_version(value.value), "cuDriverGetVersion")
    except (OSError, AttributeError):
        pass
    try:
        with open(version_file, encoding="utf-8", errors="replace") as text:
            found = _BRANCH.search(text.read(4096))
    except OSError:
        return None
    branch = int(found[1]) if found else 0
    known = [b for b in BRANCH_CUDA if b <= branch]
    return DriverCuda(cuda_version(BRANCH_CUDA[max(known)]), f"driver R{branch}") if known else None


def _loaded() -> str | None:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "/libcupti.so" in path:
                    return path
    except OSError:
        pass
    return None


def _major(path: str) -> int | None:
    found = _SONAME.search(Path(path).name)
    return int(found[1]) if found else None


def _in_folder(folder: Path) -> str | None:
    """The libcupti.so.N of ``folder`` (the highest N), else its libcupti.so."""
    names = [p for p in glob.glob(str(folder / "libcupti.so.*")) if _SONAME.fullmatch(Path(p).name)]
    names.sort(key=_major)
    plain = folder / "libcupti.so"
    return names[-1] if names else (str(plain) if plain.is_file() else None)


def _wheel_minor(site: Path, wheel: str) -> int | None:
    """The CUDA minor version of ``wheel`` installed in ``site`` (its dist-info folder says 12.8.90)."""
    stem = wheel.replace("-", "_")
    for info in sorted(glob.glob(str(site / f"{stem}-*.dist-info"))):
        found = re.fullmatch(rf"{re.escape(stem)}-(\d+)\.(\d+)[^/]*\.dist-info", Path(info).name)
        if found:
            return int(found[2])
    return None


def _toolkit_minor(home: Path) -> int | None:
    try:
        text = (home / "version.json").read_text(encoding="utf-8")[:65536]
        found = re.match(r"\d+\.(\d+)", str(json.loads(text).get("cuda", {}).get("version", "")))
    except (OSError, ValueError, AttributeError):
        found = re.fullmatch(r"cuda-\d+\.(\d+)", home.resolve().name if home.exists() else home.name)
    return int(found[1]) if found else None


def site_packages(prefix: Path) -> list[str]:
    """The site-packages folders of the Python installation (or virtualenv) at ``prefix``."""
    return sorted(glob.glob(str(prefix / "lib*" / "python3*" / "*-packages")), reverse=True)


def _interpreter(command: Sequence[str], path: str | None) -> Path | None:
    """The Python interpreter ``command`` runs: itself, or the one its script's ``#!`` line names."""
    if not command:
        return None
    found = shutil.which(command[0], path=path) or command[0]
    if re.fullmatch(r"python[0-9.]*", Path(found).name):
        return Path(found)
    try:
        with open(found, "rb") as script:
            line = script.readline(512) if script.read(2) == b"#!" else b""
    except OSError:
        return None
    words = line.decode("utf-8", "replace").split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        words = [shutil.which(words[0], path=path) or words[0]] if words else []
    if words and re.fullmatch(r"python[0-9.]*", Path(words[0]).name):
        return Path(words[0])
    return None


def command_site_packages(command: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The site-packages of the traced command's own Python environment: the interpreter it runs (its path as
    written, not resolved: a virtualenv's python is a link out of it), then $VIRTUAL_ENV's."""
    env = os.environ if environ is None else environ
    interpreter = _interpreter(command, env.get("PATH"))
    folders = site_packages(interpreter.parent.parent) if interpreter else []
    if env.get("VIRTUAL_ENV"):
        folders += site_packages(Path(env["VIRTUAL_ENV"]))
    return list(dict.fromkeys(folders))


def candidates(search_path: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> list[Found]:
    """Every libcupti that could be used, in the order of the module's docstring; wheels are looked for in
    ``search_path`` (default this tool's sys.path; trace puts the command's site-packages before it)."""
    env = os.environ if environ is None else environ
    found = []
    loaded = _loaded()
    if loaded:
        found.append(Found(loaded, "already loaded", _major(loaded)))
    if env.get(OVERRIDE):
        found.append(Found(env[OVERRIDE], OVERRIDE, _major(env[OVERRIDE])))
    for entry in sys.path if search_path is None else search_path:
        site = Path(entry or ".")
        for major, (sub, wheel) in WHEELS.items():
            path = _in_folder(site / sub)
            if path:
                found.append(Found(path, f"wheel {wheel} in {site}", _major(path) or major, _wheel_minor(site, wheel)))
    homes = [*toolkit_homes(env), *map(Path, sorted(glob.glob(f"{SYSTEM_CUDA}-*"), reverse=True))]
    for home in homes:
        for sub in TOOLKIT_DIRS:
            path = _in_folder(Path(home) / sub)
            if path:
                found.append(Found(path, f"toolkit {home}", _major(path), _toolkit_minor(Path(home))))
    real = [f for f in found if os.path.isfile(f.path)]
    return [f for i, f in enumerate(real) if os.path.realpath(f.path) not in
            {os.path.realpath(g.path) for g in real[:i]}]


def install_hint(driver: DriverCuda | None) -> str:
    """What to install for this driver: the wheel of its CUDA major, no newer than it."""
    if driver is None or driver.version[0] not in WHEELS:
        return INSTALL_HINT
    major, minor = driver.version
    return (f'install libcupti for this driver: pip install "{WHEELS[major][1]}<{major}.{minor + 1}", or name '
            f"the file with {OVERRIDE}=/path/to/libcupti.so")


def _rank(found: Found, driver: Version) -> int | None:
    """0: the driver's major, no newer; 1: its major, a newer minor, or a version not known; 2: an older major;
    None: a newer major, which this driver cannot run."""
    if found.major is None:
        return 1
    if found.major > driver[0]:
        return None
    if found.major < driver[0]:
        return 2
    return 0 if found.minor is not None and found.minor <= driver[1] else 1


def choose(search_path: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
           driver: DriverCuda | None = None, ask_driver: bool = True) -> Choice:
    """The libcupti to use for the traced command, and why (see the module's docstring)."""
    if ask_driver and driver is None:
        driver = driver_cuda()
    found = candidates(search_path, environ)
    on = f"driver CUDA {driver}" if driver else "the driver's CUDA version is not known here"
    chosen_first = [f for f in found if f.how in ("already loaded", OVERRIDE)]
    if chosen_first:  # one in this process, or the user's own choice: taken as it is
        best = chosen_first[0]
        fits = driver is None or _rank(best, driver.version) is not None
        return Choice(best, f"libcupti{best.version()} {best.path} ({best.how}; {on})" +
                      ("" if fits else ": it needs a newer driver, so processes will run untraced"))
    if driver is None:
        if not found:
            return Choice(None, f"no libcupti found; {INSTALL_HINT}")
        return Choice(found[0], _line(found[0], on))
    ranked = [(rank, -(f.major or 0), -(f.minor if f.minor is not None else -1), i, f) for i, f in enumerate(found)
              if (rank := _rank(f, driver.version)) is not None]
    if not ranked:
        unusable = "; ".join(f"libcupti{f.version()} ({f.path})" for f in found[:3])
        return Choice(None, f"no libcupti for this driver (CUDA {driver}, from {driver.source})"
                            + (f", only {unusable}, which needs a newer driver" if found else "")
                            + f"; {install_hint(driver)}")
    best = min(ranked)[-1]
    newer = best.major == driver.version[0] and best.minor is not None and best.minor > driver.version[1]
    return Choice(best, _line(best, on) + (": newer than the driver; where it cannot start, the summary names the "
                                           "processes left untraced" if newer else ""))


def _line(found: Found, on: str) -> str:
    return f"libcupti{found.version()} from {found.how} ({on})"


def find(search_path: list[str] | None = None, environ: dict[str, str] | None = None) -> Found | None:
    """The libcupti to use, or None when there is none (then ``choose`` says what to install)."""
    return choose(search_path, environ).found
