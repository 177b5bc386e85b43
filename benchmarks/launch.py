"""A small parent for a measured process: fork, exec COMMAND, wait4, print wall and rusage.

Linux carries a parent's resident set into a child's peak RSS across fork and exec, so the
process whose `ru_maxrss` is read must have a small parent. This one is run with `python -S`
(no site packages) and imports only `os`, `sys`, `time` and `_signal`, so it stays a few MB:

    python -S benchmarks/launch.py STDOUT_FILE STDERR_FILE CWD -- COMMAND [ARG ...]

It prints one JSON object: wall seconds (fork to reaped), peak RSS in kB, user and system
CPU seconds of the child (its threads included) and its exit code. A SIGTERM it receives is
passed on to the child, and it goes on waiting: a stopped benchmark leaves no worker behind.
"""

# `_signal`, not `signal`: the interpreter has loaded the C module at start, while `signal`
# would import `enum` and add ~0.8 MB to every measured child's peak RSS.
import _signal
import os
import sys
import time


def main() -> int:
    out, err, cwd, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        sys.stderr.write(__doc__ or "")
        return 2
    # SIGTERM is held from before the fork until its handler knows the child: one that came
    # in between would end this process and leave the child running, unmeasured.
    terminate = {_signal.SIGTERM}
    _signal.pthread_sigmask(_signal.SIG_BLOCK, terminate)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, terminate)  # the mask outlives exec
            os.chdir(cwd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            os.dup2(os.open(out, flags, 0o644), 1)
            os.dup2(os.open(err, flags, 0o644), 2)
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _signal.signal(_signal.SIGTERM, lambda signum, frame: os.kill(pid, signum))
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, terminate)  # one held is passed on now
    _, status, usage = os.wait4(pid, 0)  # resumed after the handler (PEP 475)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    sys.stdout.write(
        f'{{"wall": {wall:.6f}, "maxrss_kb": {usage.ru_maxrss}, "user": {usage.ru_utime:.6f}, '
        f'"system": {usage.ru_stime:.6f}, "exit": {code}}}\n'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
