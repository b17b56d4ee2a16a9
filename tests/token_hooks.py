"""Token providers the integration tests name with the option ``tokenProvider`` (``tests.token_hooks:...``).

Imported by the driver's processes and by Spark's Python workers on the executors (local
mode: they run from the checkout, where ``tests`` is importable).
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import time
from typing import Dict, Tuple


def _settings(config: str) -> Dict[str, str]:
    return dict(item.partition("=")[::2] for item in config.split())


def unsecured_jws(principal: str, lifetime_s: int = 3600) -> str:
    """Kafka's unsecured JWS token (``alg: none``, no signature) for ``principal``, as the broker's
    ``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts it."""
    def part(document: Dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")

    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': principal, 'iat': now, 'exp': now + lifetime_s})}."


def recording_token(config: str) -> Tuple[str, float, str]:
    """An unsecured token for ``principal=`` of ``kafka.sasl.oauthbearer.config``; appends this process's id
    to the file ``calls=`` names (one line per call), so a test sees which processes asked."""
    settings = _settings(config)
    calls = settings.get("calls")
    if calls:
        with pathlib.Path(calls).open("a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
    principal = settings.get("principal", "alice")
    return unsecured_jws(principal), time.time() + 3600, principal
