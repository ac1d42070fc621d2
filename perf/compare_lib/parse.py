"""parse.py: reads the result tables of nccl-tests-format perf tools (strata's, the MPI and Gloo peers').

The format (nccl-tests' README): comment lines start with '#'; one header comment names the columns

  #  size  count  type  redop  root  time algbw busbw #wrong  time algbw busbw #wrong
                                     |---- out-of-place ----|  |------ in-place ----|

and each data row starts with the size in bytes. Times are in microseconds, bandwidths in GB/s, #wrong
is an integer or N/A. Lines relayed by strata-run carry a "[rank] " prefix: only rank 0's are read.
A missing header means the 13 columns above. With --memory device the tools also print the GPU of
each rank ("#  Rank  0 ... device  0 [0000:19:00.0] NVIDIA H100 ...") and, in the footer, the
device-to-device copy reference ("# device-to-device copy bandwidth: X GB/s (cudaMemcpyAsync, N bytes)").
"""

import re

DEFAULT_HEADER = ["size", "count", "type", "redop", "root",
                  "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]
TYPE_SIZES = {"int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8, "uint64": 8,
              "half": 2, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "float": 4, "float32": 4,
              "fp32": 4, "double": 8, "float64": 8, "fp64": 8, "f8e4m3": 1, "f8e5m2": 1,
              "fp8e4m3": 1, "fp8e5m2": 1}
_RANK_PREFIX = re.compile(r"^\[(\d+)\]\s?")
_COLL_LINE = re.compile(r"Collective test starting:\s*(\S+?)(?:_perf)?\s*$")
_AVG_LINE = re.compile(r"Avg bus bandwidth\s*:\s*([-+0-9.eE]+)")
_COPY_LINE = re.compile(r"device-to-device copy bandwidth:\s*([-+0-9.eE]+)\s*GB/s(?:.*?(\d+) bytes)?")
_WORLD_LINE = re.compile(r"^World:.*,\s*(\w+) memory")
_GPU_RANK = re.compile(r"\bdevice\s+\d+\s+\[(?!cpu\])[^\]]*\]\s+(.+?)(?:\s+\[thread \d+\])?$")
_RANK_LINE = re.compile(r"^Rank\s+\d+\b")


def _number(tok):
    if tok in ("N/A", "-", "n/a"):
        return None
    try:
        return int(tok)
    except ValueError:
        return float(tok)


class Table:
    """The rows of one run of one tool: rows are dicts (size, count, type, redop, root, oop, ip) where
    oop/ip are dicts (time, algbw, busbw, wrong) or None; problems lists what did not parse."""

    def __init__(self):
        self.rows = []
        self.problems = []
        self.coll = None
        self.avg_busbw = None
        self.nranks = None  # from the "#  Rank  r ..." lines, when the tool prints them
        self.runs = 1
        self.memory = None  # "host" / "device", from the "# World: ..." line
        self.gpu = None  # rank 0's GPU name (device memory)
        self.copy_bw = None  # device-to-device copy reference, GB/s (device memory)
        self.copy_bytes = None

    def to_json(self):
        d = {"coll": self.coll, "nranks": self.nranks, "runs": self.runs, "avg_busbw": self.avg_busbw,
             "rows": self.rows, "problems": self.problems}
        if self.memory == "device":
            d.update(memory=self.memory, gpu=self.gpu, copy_bw=self.copy_bw, copy_bytes=self.copy_bytes)
        return d


def _split_header(cols):
    """(leading column names, [(start index, group names)] for each time/algbw/busbw/#wrong group)."""
    starts = [i for i, c in enumerate(cols) if c == "time"]
    if not starts:
        return None
    groups = []
    for j, s in enumerate(starts):
        end = starts[j + 1] if j + 1 < len(starts) else len(cols)
        groups.append((s, cols[s:end]))
    return cols[:starts[0]], groups


def parse_text(text):
    """Parses one tool's output (stdout) into a Table."""
    t = Table()
    header = DEFAULT_HEADER
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        m = _RANK_PREFIX.match(line)
        if m:
            if m.group(1) != "0":
                continue
            line = line[m.end():]
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            body = s.lstrip("#").strip()
            toks = body.split()
            if "size" in toks and "count" in toks and "time" in toks:
                header = toks  # "#wrong" stays one token (older nccl-tests: "error")
            mc = _COLL_LINE.search(body)
            if mc:  # "all_reduce_perf", "mpi_all_reduce_perf", "gloo_all_reduce_perf" -> "all_reduce"
                t.coll = re.sub(r"^(mpi|gloo|nccl)_", "", mc.group(1))
            if _RANK_LINE.match(body):
                t.nranks = (t.nranks or 0) + 1
                mg = _GPU_RANK.search(body)
                if mg and t.gpu is None:
                    t.gpu = mg.group(1)
            mw = _WORLD_LINE.match(body)
            if mw:
                t.memory = mw.group(1)
            mcp = _COPY_LINE.search(body)
            if mcp:
                t.copy_bw = float(mcp.group(1))
                t.copy_bytes = int(mcp.group(2)) if mcp.group(2) else None
            ma = _AVG_LINE.search(body)
            if ma:
                t.avg_busbw = float(ma.group(1))
            continue
        toks = s.split()
        if not toks[0].isdigit():
            continue  # a log line of the tool or the launcher
        if len(toks) != len(header):
            t.problems.append(f"line {lineno}: {len(toks)} columns, header has {len(header)}: {s!r}")
            continue
        split = _split_header(header)
        if split is None:
            t.problems.append(f"line {lineno}: header has no time column")
            continue
        lead, groups = split
        row = {}
        try:
            for name, tok in zip(lead, toks):
                row[name] = _number(tok) if name in ("size", "count", "root") else tok
            for k, (start, names) in enumerate(groups[:2]):
                g = {}
                for name, tok in zip(names, toks[start:start + len(names)]):
                    g["wrong" if name in ("#wrong", "error") else name] = _number(tok)
                row["oop" if k == 0 else "ip"] = g
        except ValueError as e:
            t.problems.append(f"line {lineno}: not a number ({e}): {s!r}")
            continue
        row.setdefault("ip", None)
        t.rows.append(row)
    return t


def check(table, name="output"):
    """Consistency problems of a parsed table (list of strings; empty when it looks right)."""
    probs = [f"{name}: {p}" for p in table.problems]
    if not table.rows:
        probs.append(f"{name}: no data rows")
        return probs
    prev = -1
    factors = []
    for r in table.rows:
        size = r.get("size")
        if not isinstance(size, int):
            probs.append(f"{name}: size {size!r} is not an integer")
            continue
        if size < prev:
            probs.append(f"{name}: size {size} after {prev}: sizes not ascending")
        prev = size
        tsize = TYPE_SIZES.get(str(r.get("type", "")).lower())
        count = r.get("count")
        if tsize and isinstance(count, int) and count * tsize != size and size % tsize == 0:
            # nccl-tests prints the per-rank count for some collectives (size/nranks): allow multiples
            if count == 0 or size % (count * tsize) != 0:
                probs.append(f"{name}: size {size}: count {count} x {tsize} B matches no split of the size")
        for part in ("oop", "ip"):
            g = r.get(part)
            if not g:
                continue
            tm, alg, bus = g.get("time"), g.get("algbw"), g.get("busbw")
            if not all(isinstance(v, (int, float)) for v in (tm, alg, bus)):
                probs.append(f"{name}: size {size} {part}: missing time/algbw/busbw")
                continue
            if tm <= 0:
                probs.append(f"{name}: size {size} {part}: time {tm} <= 0")
                continue
            expect = size / tm / 1e3  # B/us -> GB/s
            if abs(expect - alg) > 0.011 + 0.03 * expect:
                probs.append(f"{name}: size {size} {part}: algbw {alg} but size/time = {expect:.3f} GB/s")
            if alg >= 0.5:
                factors.append(bus / alg)
            if isinstance(g.get("wrong"), int) and g["wrong"] > 0:
                probs.append(f"{name}: size {size} {part}: {g['wrong']} wrong elements")
    if factors and max(factors) - min(factors) > 0.03 * max(factors) + 0.02:
        probs.append(f"{name}: busbw/algbw varies from {min(factors):.3f} to {max(factors):.3f} across rows")
    return probs


def best_of(tables):
    """Merges repeated runs: per size (and type/redop/root), the least time and the highest bandwidth of
    each column across the runs, the most #wrong."""
    return merge_runs(tables, "best")


def _median(vals):
    v = sorted(vals)
    k = len(v)
    return v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2


# Per column, how "best", "worst" and "median" pick among the runs' values (#wrong: always the most).
_PICKS = {
    "best": {"time": min, "algbw": max, "busbw": max},
    "worst": {"time": max, "algbw": min, "busbw": min},
    "median": {"time": _median, "algbw": _median, "busbw": _median},
}


def merge_runs(tables, how="best"):
    """Merges repeated runs per size (and type/redop/root): `how` is "best" (least time, highest
    bandwidth), "worst" (the opposite: a launcher's worst case) or "median", per column; #wrong is
    the most of any run. The copy reference and the average busbw follow the same choice."""
    picks = _PICKS[how]
    merged = Table()
    merged.coll = next((t.coll for t in tables if t.coll), None)
    merged.nranks = next((t.nranks for t in tables if t.nranks), None)
    merged.memory = next((t.memory for t in tables if t.memory), None)
    merged.gpu = next((t.gpu for t in tables if t.gpu), None)
    copies = [(t.copy_bw, t.copy_bytes) for t in tables if t.copy_bw is not None]
    if copies:  # the best of the runs: a reference, not a measurement of the implementation
        merged.copy_bw, merged.copy_bytes = max(copies, key=lambda c: c[0])
    values, order = {}, []  # key -> row with lists of every run's values
    for t in tables:
        merged.problems.extend(t.problems)
        for r in t.rows:
            key = (r.get("size"), r.get("type"), r.get("redop"), r.get("root"))
            if key not in values:
                values[key] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in r.items()}
                for part in ("oop", "ip"):
                    g = values[key].get(part)
                    if g:
                        for col in ("time", "algbw", "busbw", "wrong"):
                            g[col] = [g[col]] if g.get(col) is not None else []
                order.append(key)
                continue
            for part in ("oop", "ip"):
                a, b = values[key].get(part), r.get(part)
                if not a or not b:
                    continue
                for col in ("time", "algbw", "busbw", "wrong"):
                    if b.get(col) is not None:
                        a[col].append(b[col])
    for key in order:
        row = values[key]
        for part in ("oop", "ip"):
            g = row.get(part)
            if not g:
                continue
            for col in ("time", "algbw", "busbw"):
                g[col] = picks[col](g[col]) if g[col] else None
            g["wrong"] = max(g["wrong"]) if g["wrong"] else None
        merged.rows.append(row)
    merged.rows.sort(key=lambda r: r.get("size", 0))
    avgs = [t.avg_busbw for t in tables if t.avg_busbw is not None]
    merged.avg_busbw = picks["busbw"](avgs) if avgs else None
    merged.runs = len(tables)
    return merged
