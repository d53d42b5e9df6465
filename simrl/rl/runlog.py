"""What a run prints, and the copy it keeps: `train.log` (play.py: `play.log`) in the run
directory holds every line the run wrote to stdout and stderr (progress lines, notes, warnings,
and the error that ended it), written as it goes.

Hydra's own `<job>.log` records Python's `logging`, which simrl's scripts do not use (their
progress lines are printed), so that file stayed empty; the scripts turn Hydra's job logging off
(`hydra/job_logging: none`, tasks.config.register) and keep this copy instead.
"""

import contextlib
import math
import sys
import traceback
from pathlib import Path


class _Tee:
    """A text stream that writes to `stream` and to `log`; everything else (fileno, isatty,
    encoding, ...) is the stream's. Once the log is closed it writes to the stream alone (a
    logging handler made during the run may hold on to this object after it)."""

    def __init__(self, stream, log):
        self._stream = stream
        self._log = log

    def write(self, text: str) -> int:
        self._stream.write(text)
        if not self._log.closed:
            self._log.write(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()
        if not self._log.closed:
            self._log.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def tee_output(path):
    """Within the block, sys.stdout and sys.stderr also go to the file `path` (appended, line by
    line); an exception that leaves the block is recorded there too (a SystemExit by its
    message, anything else by its traceback) before it propagates."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out, err = sys.stdout, sys.stderr
    with open(path, "a", buffering=1, encoding="utf-8") as log:
        sys.stdout, sys.stderr = _Tee(out, log), _Tee(err, log)
        try:
            yield
        except SystemExit as e:
            if isinstance(e.code, str):  # the message Python prints on the way out
                log.write(e.code.rstrip("\n") + "\n")
            raise
        except BaseException:
            log.write(traceback.format_exc())
            raise
        finally:
            sys.stdout, sys.stderr = out, err


def mean_text(value: float, width: int, precision: int) -> str:
    """A mean of the progress line: the number, or "-" while there is nothing to average yet
    (no episode has ended), right-aligned in `width` characters."""
    return f"{'-' if math.isnan(value) else f'{value:.{precision}f}':>{width}s}"
