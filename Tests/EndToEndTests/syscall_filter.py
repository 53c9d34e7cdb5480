#!/usr/bin/env python3
"""Runs a program under a seccomp system-call filter of the kind systemd builds from a unit's
SystemCallFilter= and SystemCallErrorNumber=, for Herald's end-to-end tests where no systemd
runs services (a container, CI).

    syscall_filter.py allow|deny NAMES ACTION -- PROGRAM [ARGUMENT ...]

NAMES are system call names separated by commas (groups already expanded, as by
`systemd-analyze syscall-filter`). With `allow`, every call not named gets ACTION; with `deny`,
every call named gets it. ACTION is `kill` (the whole process, as systemd does by default) or
an errno number returned instead. Names this architecture does not have are skipped. The
filter is loaded through libseccomp (the library systemd itself uses), then PROGRAM replaces
this process with the filter in force, as a service's ExecStart= does.
"""
import ctypes
import os
import sys

SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_ACT_ALLOW = 0x7FFF0000


def errno_action(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)


def fail(message: str) -> None:
    print(f"syscall_filter.py: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv: list) -> None:
    if len(argv) < 6 or argv[1] not in ("allow", "deny") or argv[4] != "--":
        fail("usage: syscall_filter.py allow|deny NAMES kill|ERRNO -- PROGRAM [ARGUMENT ...]")
    mode, names, action_text, program = argv[1], argv[2], argv[3], argv[5:]
    if action_text == "kill":
        action = SCMP_ACT_KILL_PROCESS
    elif action_text.isdigit() and 0 < int(action_text) < 4096:
        action = errno_action(int(action_text))
    else:
        fail(f"the action is kill or an errno number from 1 to 4095, not {action_text!r}")

    try:
        seccomp = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as error:
        fail(f"libseccomp is not installed: {error}")
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_syscall_resolve_name.restype = ctypes.c_int
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    seccomp.seccomp_rule_add_array.restype = ctypes.c_int
    seccomp.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    seccomp.seccomp_load.restype = ctypes.c_int
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]

    default, listed = (action, SCMP_ACT_ALLOW) if mode == "allow" else (SCMP_ACT_ALLOW, action)
    context = seccomp.seccomp_init(default)
    if not context:
        fail("seccomp_init failed")
    for name in filter(None, names.split(",")):
        number = seccomp.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            continue  # unknown here, or another architecture's (arm_fadvise64_64 on x86-64)
        result = seccomp.seccomp_rule_add_array(context, listed, number, 0, None)
        if result != 0:
            fail(f"seccomp_rule_add_array for {name} failed: {os.strerror(-result)}")
    result = seccomp.seccomp_load(context)
    if result != 0:
        fail(f"seccomp_load failed: {os.strerror(-result)}")
    os.execv(program[0], program)


if __name__ == "__main__":
    main(sys.argv)
