"""What every credentials-and-endpoint test asserts about the real CLI's answer: it failed, in one line that
names the profile, endpoint or variable, without a traceback or a secret, and (for a refused connection or an
unresolvable host, which are not worth retrying) within 10 s.

The one `error:` line is looked for on both streams: refused before a job exists it is `error: ...` on stderr
(cli/common.py domain_errors), refused inside the job (stepValidate) it is the job summary's `error: ...` line.
Either way there is exactly one, and it names the thing to fix.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

# The loose bound issue 23 asks for as behaviour ("fails within 10 s instead of 115 s"), not a benchmark:
# bench/ measures speed.
FAST = 10.0


def timed(run: Callable[[], subprocess.CompletedProcess[str]]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = run()
    return proc, time.monotonic() - start


def one_error_line(proc: subprocess.CompletedProcess[str], *names: str, secrets: tuple[str, ...] = ()) -> str:
    said = proc.stdout + proc.stderr
    assert proc.returncode in (1, 2), f"exit {proc.returncode}\n{said}"
    assert "Traceback" not in said, said
    errors = [line.strip() for line in said.splitlines() if line.lstrip().startswith("error:")]
    assert len(errors) == 1, said
    for name in names:
        assert name in errors[0], errors[0]
    for secret in secrets:
        assert secret not in said, said
    return errors[0]
