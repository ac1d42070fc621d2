"""report.py: the per-size comparison table (text), the ratios and target misses, and the PNG plot.

Ratio strata/peer = busbw(strata) / busbw(peer) at one size, computed from the out-of-place times as
time(peer) / time(strata): the same number by definition (same size, same bus factor), but exact at
small sizes where the printed busbw rounds to 0.00. > 1 means strata is faster.

With device memory the tools also report a device-to-device copy reference (cudaMemcpyAsync of the
largest size, rank 0 alone): each implementation's busbw at the largest size is given as a fraction
of it, and the plot draws it as a dashed line.
"""

import math

from .runner import LABELS


def human_size(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}K"


def _oop(table):
    """size -> (busbw, time) of the out-of-place columns."""
    out = {}
    for r in table.rows:
        g = r.get("oop") or {}
        if isinstance(g.get("time"), (int, float)):
            out[r["size"]] = (g.get("busbw"), g["time"])
    return out


def ratios(tables, base="strata"):
    """{peer: {size: ratio}} of `base` against every other implementation present."""
    if base not in tables:
        return {}
    mine = _oop(tables[base])
    res = {}
    for impl, t in tables.items():
        if impl == base:
            continue
        theirs = _oop(t)
        res[impl] = {s: theirs[s][1] / mine[s][1] for s in sorted(mine) if s in theirs and mine[s][1] > 0}
    return res


def comparison(coll, tables, nranks, target=None, vs=None):
    """(text, summary dict) of one collective: per size each implementation's busbw and time, the
    ratios strata/peer, '!' where a ratio misses the target."""
    impls = list(tables)
    rat = ratios(tables)
    peers = [p for p in impls if p != "strata" and p in rat]
    checked = [p for p in peers if target is not None and (not vs or p in vs)]
    data = {i: _oop(tables[i]) for i in impls}
    sizes = sorted({s for d in data.values() for s in d})

    lines = [f"== {coll}, {nranks} ranks: out-of-place busbw (GB/s) and time (us); "
             f"x peer = busbw strata/peer (> 1: strata faster)"]
    head = (f"{'size':>6} " + "".join(f"| {i[:17]:>17} " for i in impls)
            + "".join(f"| {'x ' + p[:9]:>11} " for p in peers))
    sub = (f"{'':>6} " + "".join(f"| {'busbw':>7} {'time':>9} " for _ in impls)
           + "".join(f"| {'':>11} " for _ in peers))
    lines += [head, sub, "-" * len(head)]
    misses = {p: [] for p in checked}
    for s in sizes:
        row = f"{human_size(s):>6} "
        for i in impls:
            bw, tm = data[i].get(s, (None, None))
            row += f"| {_f(bw, 7, 2)} {_f(tm, 9, 1 if tm is not None and tm >= 1000 else 2)} "
        for p in peers:
            r = rat[p].get(s)
            mark = " "
            if p in misses and r is not None and r < target:
                misses[p].append(s)
                mark = "!"
            row += f"| {_f(r, 10, 2)}{mark} "
        lines.append(row)

    summary = {"coll": coll, "peers": {}}
    for p in peers:
        vals = [v for v in rat[p].values() if v > 0]
        if not vals:
            continue
        big = max(rat[p])
        info = {"geomean": math.exp(sum(map(math.log, vals)) / len(vals)), "at_largest": rat[p][big],
                "largest": big, "sizes": len(vals)}
        text = (f"strata vs {LABELS.get(p, p)}: geometric mean x{info['geomean']:.2f} over {len(vals)} sizes, "
                f"x{info['at_largest']:.2f} at {human_size(big)}")
        if p in misses:
            info["target"] = target
            info["missed"] = misses[p]
            text += (f"; target x{target:g}: met at every size" if not misses[p] else
                     f"; target x{target:g}: MISSED at {len(misses[p])} of {len(vals)} sizes "
                     f"({', '.join(human_size(s) for s in misses[p])})")
        summary["peers"][p] = info
        lines.append(text)
    copy = copy_limit(tables)
    if copy:
        bw, nbytes = copy
        biggest = max(sizes) if sizes else None
        parts = []
        summary["copy_limit"] = {"bandwidth": bw, "bytes": nbytes, "fraction": {}}
        for i in impls:
            b = data[i].get(biggest, (None, None))[0]
            if isinstance(b, (int, float)) and bw > 0:
                summary["copy_limit"]["fraction"][i] = b / bw
                parts.append(f"{LABELS.get(i, i)} {b:.2f} GB/s = {100 * b / bw:.0f}%")
        lines.append(f"device-to-device copy (cudaMemcpyAsync"
                     f"{', ' + human_size(nbytes) if nbytes else ''}): {bw:.2f} GB/s"
                     + (f"; busbw at {human_size(biggest)}: " + ", ".join(parts) + " of it" if parts else ""))
    return "\n".join(lines), summary


def copy_limit(tables):
    """(GB/s, bytes) of the device-to-device copy reference the tables report (the best), or None."""
    found = [(t.copy_bw, t.copy_bytes) for t in tables.values() if getattr(t, "copy_bw", None)]
    return max(found, key=lambda c: c[0]) if found else None


def _f(v, width, prec):
    if v is None:
        return f"{'-':>{width}}"
    return f"{v:{width}.{prec}f}"


def plot(path, results, nranks, title_extra):
    """One PNG: per collective, busbw vs size (top) and time vs size (bottom, log-log); log2 x axes."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--plot needs matplotlib: apt-get install python3-matplotlib, and run perf/compare "
                         "itself (it uses /usr/bin/python3), not another python3")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    colls = [c for c in results if results[c]]
    ncol = min(3, max(1, len(colls)))
    nblock = math.ceil(len(colls) / ncol)
    fig, axes = plt.subplots(2 * nblock, ncol, figsize=(6.2 * ncol, 7.6 * nblock), squeeze=False)
    styles = {"strata": dict(color="C3", lw=2.4, marker="o", ms=4),
              "mpi": dict(color="C0", lw=1.5, marker="s", ms=3.5),
              "gloo_ring": dict(color="C2", lw=1.5, marker="^", ms=3.5),
              "gloo_hd": dict(color="C1", lw=1.5, marker="v", ms=3.5),
              "gloo": dict(color="C2", lw=1.5, marker="^", ms=3.5),
              "nccl": dict(color="C2", lw=1.8, marker="s", ms=3.5)}
    fmt = FuncFormatter(lambda x, _: human_size(int(x)) if x >= 1 else "")
    for k, coll in enumerate(colls):
        top, bottom = axes[2 * (k // ncol)][k % ncol], axes[2 * (k // ncol) + 1][k % ncol]
        for impl, t in results[coll].items():
            pts = sorted(_oop(t).items())
            if not pts:
                continue
            xs = [s for s, _ in pts]
            label = LABELS.get(impl, impl)
            top.plot(xs, [bw for _, (bw, _) in pts], label=label, **styles.get(impl, {}))
            bottom.plot(xs, [tm for _, (_, tm) in pts], label=label, **styles.get(impl, {}))
        copy = copy_limit(results[coll])
        if copy:
            top.axhline(copy[0], color="0.35", ls="--", lw=1.2, label=f"device-to-device copy {copy[0]:.0f} GB/s")
        top.set_title(f"{coll}: bus bandwidth (out of place)")
        top.set_ylabel("busbw (GB/s)")
        bottom.set_title(f"{coll}: latency (out of place)")
        bottom.set_ylabel("time (us)")
        bottom.set_yscale("log")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(fmt)
            ax.set_xlabel("message size (bytes)")
            ax.grid(True, which="major", alpha=0.35)
            ax.legend(fontsize=8)
        top.set_ylim(bottom=0)
    for k in range(len(colls), nblock * ncol):
        axes[2 * (k // ncol)][k % ncol].axis("off")
        axes[2 * (k // ncol) + 1][k % ncol].axis("off")
    fig.suptitle(f"strata vs peers: {nranks} ranks, {title_extra}", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
