"""Facts seen inside the rank after the launcher ran: versions, GPUs, NCCL, limits, env.

Each fact is collected on its own and a failure becomes ``{"error": ...}`` in its place: a
missing driver or an odd torch build must not stop the run, whose later phases say what matters.
torch is imported inside the functions, so the pure helpers are usable without it.
"""
from __future__ import annotations

import ctypes
import os
import platform
import re
import resource
import socket
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional

from .redact import shown

ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "ACCELERATE_")
# ACCELERATE_* that a user may export by hand; the launcher sets others (MIXED_PRECISION, ...)
_USER_ACCELERATE_VARS = {"ACCELERATE_LOG_LEVEL", "ACCELERATE_DISABLE_RICH"}
# NCCL_* names that are not NCCL settings (NVIDIA's CUDA images export NCCL_VERSION as metadata)
_NCCL_NOT_SETTINGS = {"NCCL_VERSION"}


def safe(fn: Callable[[], Any]) -> Any:
    """Call ``fn``; on any exception return ``{"error": "Type: message"}`` instead."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a fact we cannot read is data, not a failure
        return {"error": "%s: %s" % (type(exc).__name__, str(exc)[:500])}


# ---------------------------------------------------------------- NCCL version
def decode_nccl_version(code: int) -> str:
    """ncclGetVersion's integer as 'major.minor.patch' (two encodings exist: pre/post 2.9)."""
    code = int(code)
    if code >= 10000:
        major, minor, patch = code // 10000, (code % 10000) // 100, code % 100
    else:
        major, minor, patch = code // 1000, (code % 1000) // 100, code % 100
    return "%d.%d.%d" % (major, minor, patch)


def nccl_compiled() -> Optional[str]:
    """NCCL version torch was built against (None on builds without NCCL)."""
    import torch

    nccl = getattr(torch.cuda, "nccl", None)
    if nccl is None or not hasattr(nccl, "version"):
        return None
    try:
        version = nccl.version()
    except (AttributeError, RuntimeError):
        return None  # CPU builds have no _nccl_version
    if isinstance(version, (tuple, list)):
        return ".".join(str(int(x)) for x in version[:3])
    return decode_nccl_version(int(version))


def mapped_libs(name: str, maps_path: str = "/proc/self/maps") -> List[str]:
    """Paths of mapped shared objects whose file name contains ``name``, in map order."""
    paths: List[str] = []
    try:
        with open(maps_path) as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if name in os.path.basename(path) and path not in paths:
                        paths.append(path)
    except OSError:
        pass
    return paths


def _nccl_get_version(lib: ctypes.CDLL) -> int:
    code = ctypes.c_int(0)
    rc = lib.ncclGetVersion(ctypes.byref(code))
    if rc != 0:
        raise RuntimeError("ncclGetVersion returned %d" % rc)
    return int(code.value)


def _nccl_entry(path: str, code: int, source: str) -> Dict[str, Any]:
    return {"version": decode_nccl_version(code), "code": code, "path": path, "source": source}


def _query(path: str, source: str) -> Dict[str, Any]:
    try:
        return _nccl_entry(path, _nccl_get_version(ctypes.CDLL(path)), source)
    except (OSError, AttributeError, RuntimeError) as exc:
        return {"path": path, "source": source, "error": "%s: %s" % (type(exc).__name__, exc)}


def nccl_loaded() -> Optional[Dict[str, Any]]:
    """The libnccl actually in this process, queried with ncclGetVersion through ctypes.

    Prefer what is already mapped (torch's RPATH copy, or an LD_PRELOAD one); if nothing is
    mapped yet, dlopen the soname, which honours LD_PRELOAD and the loader's search path. When
    several are mapped, the primary one is the one the soname resolves to; all are listed.
    Plugins (libnccl-net.so, ...) are not NCCL itself and are skipped.
    """
    paths = mapped_libs("libnccl.so")
    if not paths:
        try:
            lib = ctypes.CDLL("libnccl.so.2")
        except OSError as exc:
            return {"error": "no libnccl loaded or loadable: %s" % exc, "path": None}
        found = mapped_libs("libnccl.so")
        return _nccl_entry(found[0] if found else "libnccl.so.2", _nccl_get_version(lib),
                           "dlopen")
    entries = [_query(p, "mapped") for p in paths]
    primary = dict(entries[0])
    if len(entries) > 1:
        try:
            code = _nccl_get_version(ctypes.CDLL("libnccl.so.2"))
            primary = dict(next((e for e in entries if e.get("code") == code), entries[0]))
        except (OSError, AttributeError, RuntimeError):
            pass
        primary["all"] = entries
    return primary


# ---------------------------------------------------------------- driver, GPUs
def parse_driver_proc(text: str) -> Optional[str]:
    """Driver version from /proc/driver/nvidia/version's NVRM line."""
    for line in text.splitlines():
        if line.startswith("NVRM"):
            match = re.search(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b", line)
            if match:
                return match.group(1)
    return None


def driver_version() -> Optional[Dict[str, Any]]:
    """Kernel driver version; else the CUDA driver API version from libcuda; else None."""
    try:
        with open("/proc/driver/nvidia/version") as fh:
            version = parse_driver_proc(fh.read())
        if version:
            return {"version": version, "source": "/proc/driver/nvidia/version"}
    except OSError:
        pass
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    code = ctypes.c_int(0)
    if libcuda.cuDriverGetVersion(ctypes.byref(code)) != 0:
        return None
    api = "%d.%d" % (code.value // 1000, (code.value % 1000) // 10)
    return {"version": None, "cuda_driver_api": api, "source": "libcuda"}


def gpus() -> List[Dict[str, Any]]:
    """Name, compute capability and memory of every visible CUDA device."""
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        out.append({"index": i, "name": props.name,
                    "capability": "%d.%d" % (props.major, props.minor),
                    "total_memory": int(props.total_memory)})
    return out


def verify_peer_copy(src: int, dst: int, numel: int = 1 << 20) -> bool:
    """Copy a known tensor from GPU ``src`` to GPU ``dst`` and compare it exactly."""
    import torch

    a = torch.arange(numel, dtype=torch.int32, device="cuda:%d" % src)
    b = a.to("cuda:%d" % dst)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    return bool(torch.equal(a.cpu(), b.cpu()))


def bounded(fn: Callable[[], Any], timeout_s: float) -> Any:
    """Run ``fn`` in a daemon thread; "timeout" if it has not returned in ``timeout_s``.

    A peer copy over a broken P2P link can block forever (the RTX 4090 story); the fingerprint
    must then say so and let the run go on to show where else it hangs.
    """
    box: Dict[str, Any] = {"value": "timeout"}

    def work() -> None:
        box["value"] = safe(fn)

    thread = threading.Thread(target=work, name="harness-peer-copy", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box["value"]


def peer_access(verify: bool, timeout_s: float = 30.0) -> List[Dict[str, Any]]:
    """Per ordered GPU pair: does the driver claim P2P, and (if asked) does a copy really work."""
    import torch

    n = torch.cuda.device_count()
    rows = []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            claimed = safe(lambda: bool(torch.cuda.can_device_access_peer(i, j)))  # noqa: B023 - called now
            row: Dict[str, Any] = {"src": i, "dst": j, "claimed": claimed, "verified": None}
            if verify and claimed is True:
                row["verified"] = bounded(lambda: verify_peer_copy(i, j), timeout_s)  # noqa: B023 - a timeout returns
                if row["verified"] == "timeout":
                    rows.append(row)
                    return rows  # the device is likely wedged: further copies would only wait
            rows.append(row)
    return rows


# ---------------------------------------------------------------- limits
def shm_info(path: str = "/dev/shm") -> Optional[Dict[str, Any]]:
    """Size and free space of /dev/shm in bytes (Docker's default 64 MB breaks NCCL SHM), its mode, and
    whether this rank can create a file in it as NCCL does (a size problem and a permissions problem
    read alike in NCCL's "Error while creating shared memory segment": the facts tell them apart)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    info: Dict[str, Any] = {"bytes": st.f_frsize * st.f_blocks, "free_bytes": st.f_frsize * st.f_bavail}
    try:
        info["mode"] = "%04o" % (os.stat(path).st_mode & 0o7777)
    except OSError:
        pass
    probe = os.path.join(path, "nccl-harness-probe-%d" % os.getpid())
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        info["writable"] = False
        info["write_error"] = ("%s: %s" % (type(exc).__name__, exc))[:300]
    else:
        os.close(fd)
        os.unlink(probe)
        info["writable"] = True
    return info


def libcuda(maps_path: str = "/proc/self/maps") -> Optional[Dict[str, Any]]:
    """The libcuda this rank mapped (after CUDA's init) and whether it is a CUDA forward-compatibility
    copy (cuda-compat: /usr/local/cuda/compat/, /usr/local/cuda-X.Y/compat/) rather than the host
    driver's own: a compat libcuda only runs on data-center GPUs and with a driver it supports (CUDA
    error 804 otherwise)."""
    paths = mapped_libs("libcuda.so", maps_path)
    if not paths:
        return None
    return {"path": paths[0], "compat": any("/compat/" in p for p in paths), "all": paths}


# nvmlDeviceGetComputeMode's values (nvml.h, nvmlComputeMode_t); nvmlInit's
# NVML_ERROR_LIB_RM_VERSION_MISMATCH: the user library and the kernel module are of different versions
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18


def nvml_facts() -> Optional[Dict[str, Any]]:
    """What NVML says of the machine's GPUs: each one's compute mode (EXCLUSIVE_PROCESS lets one
    process per GPU have a context: "all CUDA-capable devices are busy or unavailable"), or the error
    nvmlInit returned (18: the driver's library and kernel module differ, after an upgrade without a
    reboot). None without NVML (a CPU host or container)."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    rc = nvml.nvmlInit_v2()
    if rc != 0:
        return {"error_code": int(rc), "version_mismatch": rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH}
    try:
        count = ctypes.c_uint(0)
        modes: List[str] = []
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0:
            for i in range(count.value):
                handle = ctypes.c_void_p()
                mode = ctypes.c_int(-1)
                if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) == 0 and \
                        nvml.nvmlDeviceGetComputeMode(handle, ctypes.byref(mode)) == 0:
                    modes.append(COMPUTE_MODES.get(mode.value, str(mode.value)))
        return {"compute_modes": modes, "version_mismatch": False}
    finally:
        nvml.nvmlShutdown()


def _limit(value: int) -> Any:
    return "unlimited" if value == resource.RLIM_INFINITY else int(value)


def memlock_limit() -> Dict[str, Any]:
    """RLIMIT_MEMLOCK soft/hard; NCCL wants unlimited in containers."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {"soft": _limit(soft), "hard": _limit(hard)}


# ---------------------------------------------------------------- environment
def relevant_env(environ: Mapping[str, str]) -> Dict[str, str]:
    """NCCL_/TORCH_/CUDA_/ACCELERATE_ variables, each value as redact.shown allows (masked unless safe)."""
    return {k: shown(k, environ[k]) for k in sorted(environ)  # type: ignore[misc]
            if k.startswith(ENV_PREFIXES)}


def nccl_env_changed(expected: Mapping[str, Optional[str]],
                     environ: Mapping[str, str]) -> Dict[str, Dict[str, Optional[str]]]:
    """Expected variables whose value differs in the rank, and NCCL_* the host did not ask for.

    A value of None in ``expected`` means "expected unset". Image metadata such as NCCL_VERSION
    is not a setting and is reported only when the host named it.
    """
    changed: Dict[str, Dict[str, Optional[str]]] = {}
    for name, want in expected.items():
        want_s = None if want is None else str(want)
        have = environ.get(name)
        # the host passes values as redact.shown writes them: compare them so (a masked value present
        # is all it can expect; a URL's credentials were stripped)
        if shown(name, have) != shown(name, want_s):
            changed[name] = {"expected": shown(name, want_s), "actual": shown(name, have)}
    for name in sorted(environ):
        if name.startswith("NCCL_") and name not in expected and name not in _NCCL_NOT_SETTINGS:
            changed[name] = {"expected": None, "actual": shown(name, environ[name])}
    return changed


def detect_launcher(environ: Mapping[str, str]) -> str:
    """accelerate (its launcher exports ACCELERATE_*), torchrun, or none."""
    if any(k.startswith("ACCELERATE_") and k not in _USER_ACCELERATE_VARS for k in environ):
        return "accelerate"
    if "TORCHELASTIC_RUN_ID" in environ:
        return "torchrun"
    return "none"


# ---------------------------------------------------------------- all together
def _versions() -> Dict[str, Any]:
    import torch

    def cudnn() -> Any:
        backend = getattr(torch.backends, "cudnn", None)
        return backend.version() if backend is not None and backend.is_available() else None

    def accelerate_version() -> Any:
        import accelerate

        return getattr(accelerate, "__version__", None)

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None),
        "torch_git": getattr(torch.version, "git_version", None),
        "cudnn": safe(cudnn),
        "accelerate": safe(accelerate_version),
        "nccl_compiled": safe(nccl_compiled),
    }


def cuda_touch(local_rank: int) -> str:
    """A tiny CUDA init on this rank's own device, so that CUDA libraries are really loaded."""
    import torch

    torch.cuda.set_device(local_rank)
    torch.zeros(1, device="cuda:%d" % local_rank)
    torch.cuda.synchronize()
    return "ok"


def collect(device: str, local_rank: int, expected_env: Mapping[str, Optional[str]],
            environ: Mapping[str, str]) -> Dict[str, Any]:
    """The whole fingerprint as one JSON-able dict.

    Only local rank 0 runs the real peer copies: they touch every GPU, and once per host is enough.
    """
    import torch

    fp: Dict[str, Any] = _versions()
    fp["device"] = device
    fp["hostname"] = socket.gethostname()
    fp["cuda_available"] = safe(lambda: bool(torch.cuda.is_available()))
    if device == "cuda":
        fp["cuda_init"] = safe(lambda: cuda_touch(local_rank))
    fp["nccl_loaded"] = safe(nccl_loaded)
    fp["driver"] = safe(driver_version)
    fp["device_count"] = safe(lambda: torch.cuda.device_count()) if device == "cuda" else 0
    if device == "cuda":
        fp["gpus"] = safe(gpus)
        fp["peer_access"] = safe(lambda: peer_access(verify=(local_rank == 0)))
    if device == "cuda":
        fp["libcuda"] = safe(libcuda)
        fp["nvml"] = safe(nvml_facts)
    fp["shm"] = safe(shm_info)
    fp["memlock"] = safe(memlock_limit)
    fp["env"] = relevant_env(environ)
    fp["nccl_env_changed"] = nccl_env_changed(expected_env, environ)
    fp["launcher"] = detect_launcher(environ)
    return fp
