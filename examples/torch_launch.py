#!/usr/bin/env python3
"""Starts N ranks of a torch.distributed script on this machine with torchrun's environment
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; init_method env://),
waits for them, and stops the rest when one fails.

    torch_launch.py --nproc N script.py [args...]

The examples use it instead of torchrun because Debian 13's PyTorch 2.6 is built without libuv
while its torchrun asks TCPStore for libuv unconditionally, so torchrun cannot start there
(env:// itself honours USE_LIBUV=0, which this sets). On other installations torchrun
--nproc_per_node N script.py is equivalent.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600, help="seconds before every rank is stopped")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    port = free_port()
    procs = []
    for r in range(a.nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc),
                   LOCAL_WORLD_SIZE=str(a.nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("USE_LIBUV", "0")
        procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env, start_new_session=True))
    deadline = time.monotonic() + a.timeout
    rc = 0
    while procs and time.monotonic() < deadline:
        for pr in list(procs):
            code = pr.poll()
            if code is None:
                continue
            procs.remove(pr)
            if code != 0 and rc == 0:
                rc = code if code > 0 else 1
                print(f"torch_launch: a rank exited with {code}; stopping the others", file=sys.stderr)
                for other in procs:
                    os.killpg(other.pid, signal.SIGTERM)
        time.sleep(0.05)
    if procs:
        print(f"torch_launch: ranks still running after {a.timeout:.0f} s; stopping them", file=sys.stderr)
        for pr in procs:
            os.killpg(pr.pid, signal.SIGKILL)
        rc = rc or 124
    return rc


if __name__ == "__main__":
    sys.exit(main())
