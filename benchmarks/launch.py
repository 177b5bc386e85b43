"""A small parent for a measured process: fork, exec COMMAND, wait4, print wall and rusage.

Linux carries a parent's resident set into a child's peak RSS across fork and exec, so the
process whose `ru_maxrss` is read must have a small parent. This one is run with `python -S`
(no site packages) and imports only `os`, `sys` and `time`, so it stays a few MB:

    python -S benchmarks/launch.py STDOUT_FILE STDERR_FILE CWD -- COMMAND [ARG ...]

It prints one JSON object: wall seconds (fork to reaped), peak RSS in kB, user and system
CPU seconds of the child (its threads included) and its exit code.
"""

import os
import sys
import time


def main() -> int:
    out, err, cwd, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        sys.stderr.write(__doc__ or "")
        return 2
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            os.dup2(os.open(out, flags, 0o644), 1)
            os.dup2(os.open(err, flags, 0o644), 2)
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    sys.stdout.write(
        f'{{"wall": {wall:.6f}, "maxrss_kb": {usage.ru_maxrss}, "user": {usage.ru_utime:.6f}, '
        f'"system": {usage.ru_stime:.6f}, "exit": {code}}}\n'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
