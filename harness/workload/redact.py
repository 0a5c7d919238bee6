"""Which environment values may be written down: the one rule for every place a value is recorded or
shown (the rank's fingerprint, the supervisor's records, event and attempt files, reports, compare,
published pages). Standard library only: it runs inside the container too.

A value is kept only for a variable known to be safe: NCCL's, CUDA's, torch distributed's,
Accelerate's and OpenMP's settings and the launchers' rendezvous variables, unless the name looks like
a credential; every other value is masked, and credentials inside a URL are stripped from kept ones.
Seen leaking before this rule (issue 14): HF_TOKEN in a user's variant, and NCCL_COLLNET_PASSWD,
TORCH_HUB_CREDENTIALS and TORCH_AUTH_HEADER, which a deny-list of TOKEN/KEY/SECRET/PASSWORD let through.
"""
from __future__ import annotations

import re
from typing import Dict, Mapping, Optional

MASK = "***"
SAFE_PREFIXES = ("NCCL_", "CUDA_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCH_GLOO_", "TORCH_FR_", "TORCH_CPP_LOG",
                 "TORCH_SHOW_CPP_STACKTRACES", "TORCHELASTIC_", "ACCELERATE_", "OMP_")
SAFE_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                        "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "NODE_RANK"})
# Substrings of a name that mark a credential, whatever its prefix (NCCL_IB_PKEY is masked too: a
# partition key is harmless, but a rule with exceptions is one a credential slips through).
CREDENTIAL_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL", "AUTH",
                      "COOKIE", "SESSION", "PRIVATE", "CERT", "SIGNATURE", "BEARER")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")


def is_credential(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in CREDENTIAL_MARKERS)


def is_safe(name: str) -> bool:
    """Whether a variable's value may be written down."""
    return (name in SAFE_NAMES or name.startswith(SAFE_PREFIXES)) and not is_credential(name)


def strip_url_credentials(text: str) -> str:
    """`http://user:pw@host/x` -> `http://***@host/x`, anywhere in the text."""
    return _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + MASK + "@", text)


def shown(name: str, value: Optional[str]) -> Optional[str]:
    """The value of `name` as it may be written down: kept (URL credentials stripped) for a safe
    variable, MASK for any other; None (unset) stays None."""
    if value is None:
        return None
    return strip_url_credentials(str(value)) if is_safe(name) else MASK


def shown_env(env: Mapping[str, Optional[str]]) -> Dict[str, Optional[str]]:
    """Every variable of `env` with its value as it may be written down."""
    return {name: shown(name, value) for name, value in env.items()}
