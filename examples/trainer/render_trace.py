#!/usr/bin/env python3
"""render_trace.py: draws strata-train --trace files as a PNG timeline, one step, every rank.

    examples/trainer/render_trace.py out.png 1f1b.json zb.json [--step N] [--labels "1F1B" "ZB-H1"]

Each trace (Chrome trace-event JSON written by strata-train --trace) becomes a panel: per rank a
row for the training thread (passes F blue, B green, W amber, drawn per layer; the optimizer
purple; pipeline send/recv and waiting grey; strata collectives on the training thread as a red
strip along the bottom) and a thin row for the gradient communication thread (its collectives dark
red). The window is step N as rank 0 recorded it (default: the last step); panels share one time
scale so they compare directly. Pure Python (zlib + a 5x7 bitmap font): no matplotlib needed.
"""
import argparse
import json
import struct
import zlib

FONT = {  # 5x7 glyphs, one 5-bit row per entry, top to bottom
    '0': [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], '1': [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
    '2': [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], '3': [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
    '4': [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], '5': [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
    '6': [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], '7': [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
    '8': [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], '9': [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
    'A': [0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11], 'B': [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
    'C': [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E], 'D': [0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C],
    'E': [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F], 'F': [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
    'G': [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F], 'H': [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
    'I': [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E], 'J': [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
    'K': [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11], 'L': [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
    'M': [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11], 'N': [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
    'O': [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], 'P': [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
    'Q': [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D], 'R': [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
    'S': [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E], 'T': [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
    'U': [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], 'V': [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
    'W': [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A], 'X': [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
    'Y': [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04], 'Z': [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
    ' ': [0] * 7, '.': [0, 0, 0, 0, 0, 0x0C, 0x0C], ':': [0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0],
    '-': [0, 0, 0, 0x1F, 0, 0, 0], '/': [0, 0x01, 0x02, 0x04, 0x08, 0x10, 0],
    '(': [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02], ')': [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08],
    '%': [0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03], '=': [0, 0, 0x1F, 0, 0x1F, 0, 0],
    ',': [0, 0, 0, 0, 0x0C, 0x04, 0x08], '+': [0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0], '_': [0, 0, 0, 0, 0, 0, 0x1F],
}

COLORS = {
    'F': (66, 133, 244), 'B': (52, 168, 83), 'W': (245, 180, 0), 'optimizer': (142, 68, 173),
    'pipe': (200, 200, 200), 'wait': (120, 120, 120), 'coll': (219, 68, 55), 'comm': (150, 20, 20),
}
WHITE, BLACK, GRID = (255, 255, 255), (0, 0, 0), (235, 235, 235)


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(WHITE * (w * h))

    def rect(self, x0, y0, x1, y1, color):
        x0, x1 = max(0, int(x0)), min(self.w, int(x1))
        y0, y1 = max(0, int(y0)), min(self.h, int(y1))
        if x1 <= x0:  # keep very short spans visible
            if x0 >= self.w:
                return
            x1 = x0 + 1
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            i = 3 * (y * self.w + x0)
            self.px[i:i + len(row)] = row

    def text(self, x, y, s, color=BLACK, scale=2):
        for ch in s.upper():
            glyph = FONT.get(ch, FONT[' '])
            for r, bits in enumerate(glyph):
                for c in range(5):
                    if bits & (0x10 >> c):
                        self.rect(x + c * scale, y + r * scale, x + (c + 1) * scale, y + (r + 1) * scale, color)
            x += 6 * scale
        return x

    def png(self, path):
        raw = b''.join(b'\x00' + bytes(self.px[3 * y * self.w:3 * (y + 1) * self.w]) for y in range(self.h))

        def chunk(kind, data):
            c = kind + data
            return struct.pack('>I', len(data)) + c + struct.pack('>I', zlib.crc32(c) & 0xFFFFFFFF)

        with open(path, 'wb') as f:
            f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', self.w, self.h, 8, 2, 0, 0, 0)) +
                    chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))


def load(path, step):
    with open(path) as f:
        events = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
    steps = sorted((e for e in events if e['cat'] == 'step' and e['pid'] == 0), key=lambda e: e['ts'])
    if not steps:
        raise SystemExit(f'{path}: no step spans')
    pick = steps[-1] if step is None else next((e for e in steps if e['name'] == f'step {step}'), None)
    if pick is None:
        raise SystemExit(f'{path}: no step {step}')
    names = {}
    with open(path) as f:
        for e in json.load(f)['traceEvents']:
            if e.get('ph') == 'M' and e['name'] == 'process_name':
                names[e['pid']] = e['args']['name']
    return events, pick, names


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out')
    ap.add_argument('traces', nargs='+')
    ap.add_argument('--step', type=int, help='step to draw (default: the last)')
    ap.add_argument('--labels', nargs='*', help='panel titles (default: file names)')
    ap.add_argument('--width', type=int, default=1600)
    a = ap.parse_args()
    panels = [load(p, a.step) for p in a.traces]
    labels = a.labels or a.traces
    left, right, lane, clane, gap, head = 280, 20, 26, 10, 6, 40
    span_us = max(p[1]['dur'] for p in panels)
    scale = (a.width - left - right) / span_us  # pixels per microsecond, shared by the panels
    heights = [head + len({e['pid'] for e in ev}) * (lane + clane + gap) + 30 for ev, _, _ in panels]
    cv = Canvas(a.width, sum(heights) + 60)
    y = 0
    tick_ms = next(t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000) if span_us / 1e3 / t <= 12)
    for (events, step, names), label, h in zip(panels, labels, heights):
        t0, t1 = step['ts'], step['ts'] + step['dur']
        x_of = lambda t: left + (t - t0) * scale
        cv.text(10, y + 10, f"{label}: {step['name']}, {step['dur'] / 1e3:.1f} MS", scale=2)
        ranks = sorted({e['pid'] for e in events})
        top = y + head
        bottom = top + len(ranks) * (lane + clane + gap)
        for k in range(0, int((t1 - t0) / 1e3 / tick_ms) + 1):
            x = x_of(t0 + k * tick_ms * 1e3)
            cv.rect(x, top - 4, x + 1, bottom, GRID)
            cv.text(x - 6, bottom + 4, f'{k * tick_ms}', scale=1)
        cv.text(x_of(t1) - 40, bottom + 14, 'MS', scale=1)
        for i, r in enumerate(ranks):
            ry = top + i * (lane + clane + gap)
            cv.text(10, ry + 6, names.get(r, f'rank {r}')[:22], scale=2)
            cv.rect(left, ry + lane + clane, x_of(t1), ry + lane + clane + 1, GRID)
            mine = [e for e in events if e['pid'] == r and e['ts'] < t1 and e['ts'] + e['dur'] > t0]
            for kind in ('phase', 'pipe', 'grad_wait', 'pass', 'layer', 'collective'):
                for e in (e for e in mine if e['cat'] == kind):
                    x0, x1 = x_of(max(e['ts'], t0)), x_of(min(e['ts'] + e['dur'], t1))
                    if e['tid'] == 1:
                        if kind == 'collective':
                            cv.rect(x0, ry + lane + 1, x1, ry + lane + clane, COLORS['comm'])
                        continue
                    if kind == 'phase':
                        if e['name'] == 'optimizer':
                            cv.rect(x0, ry, x1, ry + lane, COLORS['optimizer'])
                    elif kind == 'pipe':
                        cv.rect(x0, ry, x1, ry + lane, COLORS['pipe'])
                    elif kind == 'grad_wait':
                        cv.rect(x0, ry, x1, ry + lane, COLORS['wait'])
                    elif kind in ('pass', 'layer'):
                        cv.rect(x0, ry, x1, ry + lane, COLORS.get(e['name'][0], BLACK))
                    else:  # a collective on the training thread, nested in a pass or the optimizer
                        cv.rect(x0, ry + lane - 7, x1, ry + lane, COLORS['coll'])
        y += h
    x = 10
    for name, key in (('forward', 'F'), ('input grad (B)', 'B'), ('weight grad (W)', 'W'), ('optimizer', 'optimizer'),
                      ('pipeline send/recv, waiting', 'pipe'), ('waiting for grads', 'wait'),
                      ('collective (training thread)', 'coll'), ('grad reduction (comm thread)', 'comm')):
        cv.rect(x, y + 12, x + 14, y + 26, COLORS[key])
        x = cv.text(x + 20, y + 15, name, scale=1) + 16
    cv.png(a.out)
    print(f'{a.out}: {len(panels)} panel(s), {cv.w}x{cv.h}')


if __name__ == '__main__':
    main()
