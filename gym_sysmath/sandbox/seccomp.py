"""The seccomp profile every sandbox container runs under: an allow-list of what a rollout needs.

Docker's default profile is an allow-list too, but it leaves a container calls whose effect
reaches past it: ``sync``/``syncfs`` flush the *host's* dirty pages, and ``ptrace``,
``process_vm_readv``/``writev``, ``kcmp`` and ``pidfd_getfd`` reach into other processes. A rollout
needs none of them, nor asynchronous I/O (``io_uring``, ``io_submit``: writes that land after the
sandbox measured the disk), ``userfaultfd``, ``perf_event_open``, key rings, namespaces, mounts,
``bpf``, SysV IPC, POSIX queues, or any socket but a unix one. Nor ``memfd_create``: memfd
pages count against the container's memory but against no process, so a rollout holding
gigabytes in them would have the OOM killer of a memory-starved host take a neighbour's
process instead of its own; with memfds refused, what a rollout can hold outside its
processes is bounded by its tmpfs sizes (scratch and ``/dev/shm``). What is listed below is
what Python 3, g++, rustc and the programs they build use; anything else fails with ``EPERM``,
like Docker's own default.

The profile is built for the host's architecture only, so the 32-bit syscall table of an
x86_64 host is refused as a whole.
"""

from __future__ import annotations

import errno
import json
import platform

#: Grouped by what they are for; all allowed unconditionally.
ALLOWED = {
    "files": """
        access faccessat faccessat2 open openat openat2 creat close close_range read readv pread64 preadv
        preadv2 write writev pwrite64 pwritev pwritev2 lseek stat fstat lstat newfstatat statx statfs fstatfs
        getdents getdents64 readlink readlinkat mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2
        link linkat symlink symlinkat chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat truncate
        ftruncate fallocate fadvise64 readahead fsync fdatasync umask utime utimes utimensat futimesat chdir
        fchdir getcwd dup dup2 dup3 fcntl flock ioctl pipe pipe2 mknod mknodat sendfile splice tee vmsplice
        copy_file_range getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr setxattr lsetxattr
        fsetxattr removexattr lremovexattr fremovexattr inotify_init inotify_init1 inotify_add_watch
        inotify_rm_watch""",
    "memory": """
        brk mmap munmap mremap mprotect madvise mincore msync mlock mlock2 munlock mlockall munlockall
        membarrier remap_file_pages""",
    "processes": """
        fork vfork execve execveat exit exit_group wait4 waitid kill tkill tgkill getpid getppid gettid
        getpgid setpgid getpgrp getsid setsid getuid geteuid getgid getegid getresuid getresgid getgroups
        setuid setgid setreuid setregid setresuid setresgid setgroups setfsuid setfsgid capget capset prctl
        arch_prctl set_tid_address set_robust_list get_robust_list rseq getrlimit setrlimit prlimit64
        getrusage getpriority setpriority sched_yield sched_getaffinity sched_setaffinity sched_getparam
        sched_setparam sched_getscheduler sched_setscheduler sched_getattr sched_setattr
        sched_get_priority_max sched_get_priority_min sched_rr_get_interval ioprio_get ioprio_set
        pidfd_open pidfd_send_signal seccomp uname sysinfo times getcpu getrandom restart_syscall""",
    "signals and waiting": """
        rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait rt_sigqueueinfo
        rt_tgsigqueueinfo sigaltstack signalfd signalfd4 pause nanosleep clock_nanosleep alarm getitimer
        setitimer timer_create timer_delete timer_gettime timer_settime timer_getoverrun timerfd_create
        timerfd_gettime timerfd_settime clock_gettime clock_getres gettimeofday time futex futex_waitv poll
        ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 eventfd
        eventfd2""",
    # Sockets are unix ones only (``socket``/``socketpair`` are checked below).
    "sockets": """
        bind listen accept accept4 connect shutdown getsockname getpeername getsockopt setsockopt sendto
        recvfrom sendmsg recvmsg sendmmsg recvmmsg""",
}

#: The one socket family a rollout may make. The container has no network, but loopback TCP
#: connections linger in TIME_WAIT for a minute after every process is gone (their addresses and
#: ports carry data from one job to the next, and past the purge), AF_VSOCK is not namespaced at
#: all (it reaches the hypervisor of a VM host), and netlink talks to the kernel.
AF_UNIX = 1

#: Refused on purpose, although Docker's default profile allows them (see the module docstring).
_REFUSED_NAMES = """
    sync syncfs ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd io_uring_setup io_uring_enter
    io_uring_register io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents userfaultfd
    perf_event_open personality mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr
    msgget msgsnd msgrcv msgctl semget semop semtimedop semctl shmget shmat shmdt shmctl
    sync_file_range memfd_secret memfd_create"""
REFUSED = frozenset(_REFUSED_NAMES.split())

#: Namespace flags of clone(2): a rollout may not make namespaces (a user namespace would give
#: it a root of its own). CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET.
CLONE_NAMESPACE_FLAGS = 0x7E020000

_ARCHITECTURES = {"x86_64": "SCMP_ARCH_X86_64", "amd64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64",
                  "arm64": "SCMP_ARCH_AARCH64"}


def allowed_syscalls() -> list[str]:
    return sorted({name for group in ALLOWED.values() for name in group.split()})


def profile(machine: str | None = None) -> dict | None:
    """The profile as Docker takes it, or None on an architecture this module does not know
    (the container then runs under Docker's default profile)."""
    arch = _ARCHITECTURES.get((machine or platform.machine()).lower())
    if arch is None:
        return None
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "architectures": [arch],
        "syscalls": [
            {"names": allowed_syscalls(), "action": "SCMP_ACT_ALLOW"},
            {"names": ["socket", "socketpair"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": AF_UNIX, "op": "SCMP_CMP_EQ"}]},
            {"names": ["socket", "socketpair"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EAFNOSUPPORT,
             "args": [{"index": 0, "value": AF_UNIX, "op": "SCMP_CMP_NE"}]},
            {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": CLONE_NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
            # clone3's flags sit in a struct seccomp cannot read: refuse it as unknown, so that
            # libc falls back to clone, whose flags are checked above.
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
        ],
    }


def security_option(machine: str | None = None) -> str | None:
    """``seccomp=<json>`` for a container's ``security_opt`` (None: keep Docker's default)."""
    spec = profile(machine)
    return None if spec is None else "seccomp=" + json.dumps(spec, separators=(",", ":"))
