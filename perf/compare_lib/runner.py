"""runner.py: the command line of each implementation's perf tool, and running it.

Implementations (one perf tool each per collective, all nccl-tests-format):
  strata     build/perf/<coll>_perf                         under build/tools/strata-run -n N
                                                            (--launcher unbound: perf/unbound/launch.sh)
  mpi        build/perf/[peers/]mpi_<coll>_perf             under mpirun -n N
  gloo_ring  build/perf/[peers/]gloo_all_reduce_perf --algo ring               under strata-run
  gloo_hd    build/perf/[peers/]gloo_all_reduce_perf --algo halving_doubling   under strata-run
  gloo       build/perf/[peers/]gloo_<coll>_perf (other collectives, when built) under strata-run
  nccl       build/perf/[peers/]nccl_<coll>_perf [--nccl-lib PATH]           under strata-run
             (NVIDIA NCCL on device memory: with --memory device, where strata's tools get
             --memory device too and the MPI and Gloo peers, host memory only, are skipped; on host
             memory with --nccl-lib build/collectives/libnccl.so.2: an NCCL program on malloc'd
             buffers through strata's NCCL ABI)
"""

import os
import subprocess
import time

# strata's ranks started as torchrun or a fork loop would (--launcher unbound).
UNBOUND_LAUNCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unbound", "launch.sh")

IMPLS = ["strata", "mpi", "gloo_ring", "gloo_hd", "gloo"]  # host memory (the default)
DEVICE_IMPLS = ["strata", "nccl"]                           # --memory device
ALL_IMPLS = IMPLS + ["nccl"]
HOST_ONLY = {"mpi", "gloo_ring", "gloo_hd", "gloo"}
LABELS = {"strata": "strata", "mpi": "OpenMPI", "gloo_ring": "Gloo ring",
          "gloo_hd": "Gloo halving-doubling", "gloo": "Gloo", "nccl": "NCCL"}
ALL_COLLS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall",
             "gather", "scatter", "sendrecv"]


class Job:
    """One run of one implementation's tool for one collective."""

    def __init__(self, impl, coll, argv, env, binary):
        self.impl, self.coll, self.argv, self.env, self.binary = impl, coll, argv, env, binary

    def command_line(self):
        envs = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))
        return (envs + " " if envs else "") + " ".join(self.argv)


def _peer(build, name):
    """A peer tool: build/perf/peers/NAME, or build/perf/NAME (where perf/peers puts its binaries)."""
    for d in (os.path.join(build, "perf", "peers"), os.path.join(build, "perf")):
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return os.path.join(build, "perf", "peers", name)


def jobs_for(coll, impls, opts):
    """(jobs, skipped): the runnable jobs of `coll`, and a reason for each implementation skipped."""
    build = opts.build_dir
    run = os.path.join(build, "tools", "strata-run")
    tool_args = ["-b", str(opts.b), "-e", str(opts.e), "-f", str(opts.f),
                 "-n", str(opts.iters), "-w", str(opts.warmup)]
    device = getattr(opts, "memory", "host") == "device"
    if device:
        tool_args += ["--memory", "device"]
    strata_env = {} if opts.transport == "auto" else {"STRATA_TRANSPORT": opts.transport}
    strata_launch = [run, "-n", str(opts.ranks), "--timeout", str(opts.timeout), "--"]
    mpi_launch = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(opts.ranks)]
    if opts.transport == "tcp":
        mpi_launch += ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp"]
    elif opts.transport == "local":
        mpi_launch += ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
    mpi_launch += opts.mpi_args.split() if opts.mpi_args else []

    candidates, skipped = [], {}
    for impl in impls:
        if device and impl in HOST_ONLY:
            skipped[impl] = "host memory only (run it without --memory device)"
            continue
        if impl == "nccl" and not device and not getattr(opts, "nccl_lib", None):
            skipped[impl] = ("device memory, or host memory with --nccl-lib naming an NCCL that takes host buffers "
                             "(strata's build/collectives/libnccl.so.2: an NCCL program on malloc'd memory)")
            continue
        if impl == "strata":
            binary = os.path.join(build, "perf", f"{coll}_perf")
            alloc = [] if device else ["--alloc", getattr(opts, "alloc", "strata")]
            if getattr(opts, "launcher", "strata-run") == "unbound":
                launch = [UNBOUND_LAUNCH, "-n", str(opts.ranks), "--"]
                candidates.append((impl, binary, launch + [binary] + alloc + tool_args, strata_env, UNBOUND_LAUNCH))
            else:
                candidates.append((impl, binary, strata_launch + [binary] + alloc + tool_args, strata_env, run))
        elif impl == "mpi":
            binary = _peer(build, f"mpi_{coll}_perf")
            candidates.append((impl, binary, mpi_launch + [binary] + tool_args, {}, "mpirun"))
        elif impl in ("gloo_ring", "gloo_hd"):
            if coll != "all_reduce":
                continue
            binary = _peer(build, "gloo_all_reduce_perf")
            algo = "ring" if impl == "gloo_ring" else "halving_doubling"
            candidates.append((impl, binary, strata_launch + [binary, "--algo", algo] + tool_args, {}, run))
        elif impl == "gloo":
            if coll == "all_reduce":
                continue  # covered by gloo_ring and gloo_hd
            binary = _peer(build, f"gloo_{coll}_perf")
            candidates.append((impl, binary, strata_launch + [binary] + tool_args, {}, run))
        elif impl == "nccl":
            binary = _peer(build, f"nccl_{coll}_perf")
            lib = ["--nccl-lib", opts.nccl_lib] if getattr(opts, "nccl_lib", None) else []
            memory = [] if device else ["--memory", "host"]
            candidates.append((impl, binary, strata_launch + [binary] + lib + memory + tool_args, {}, run))

    jobs = []
    for impl, binary, argv, env, launcher in candidates:
        if not os.access(binary, os.X_OK):
            skipped[impl] = f"{binary} not built"
        elif launcher == run and not os.access(run, os.X_OK):
            skipped[impl] = f"{run} not built"
        elif launcher == "mpirun" and not _which("mpirun"):
            skipped[impl] = "mpirun not found (apt-get install openmpi-bin)"
        else:
            jobs.append(Job(impl, coll, argv, env, binary))
    return jobs, skipped


def _which(name):
    return any(os.access(os.path.join(d, name), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))


def run_job(job, timeout):
    """Runs a job: (stdout, stderr, returncode, seconds). A timeout gives returncode 124."""
    env = dict(os.environ)
    env.update(job.env)
    t0 = time.monotonic()
    try:
        p = subprocess.run(job.argv, env=env, capture_output=True, text=True, timeout=timeout + 30,
                           errors="replace")
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc = 124
    return out, err, rc, time.monotonic() - t0


def machine_info():
    """A short description of this machine: CPU model, CPUs, memory."""
    model, mem = "unknown CPU", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f", {int(line.split()[1]) / 2**20:.0f} GiB"
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs{mem}"
