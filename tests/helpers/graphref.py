#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reference model for the graph integration tests (no numpy needed).

  graphref.py gen OUT NV NE SEED [--hubs H --hubdeg D] [--format text|mtx|sg|wsg]
              [--directed] [--weighted]      random input with hubs, loops,
                                             duplicates, isolated top ids
  graphref.py canon IN FORMAT DIRECTED WEIGHTED [UPDATES...]
                                             the canonical edge list gstore's
                                             `graph edges` prints
  graphref.py updates CANON DIRECTED WEIGHTED N SEED OUT
                                             N valid update lines for CANON
  graphref.py bfs CANON DIRECTED SRC NV      "v depth" lines
  graphref.py cc CANON NV                    "v label" lines (min id)
                                             NV "ids": the vertices are the
                                             ids in CANON (sparse ids)
  graphref.py remap IN OUT                   IN's ids spread over 2^33..2^63
                                             (a bijection, order scrambled)
  graphref.py updates ... OUT sparse         u, v among the existing ids
"""
import random
import struct
import sys


def f32(x):
    return struct.unpack('f', struct.pack('f', float(x)))[0]


def fmt_w(w):
    return '%.9g' % f32(w)


class Graph:
    def __init__(self, directed, weighted):
        self.directed, self.weighted = directed, weighted
        self.adj = {}           # u -> {v: w}
        self.removed = set()
        self.nv = 0

    def put(self, u, v, w, keep_min):
        w = f32(w) if self.weighted else 1.0
        for a, b in ((u, v),) if self.directed else ((u, v), (v, u)):
            d = self.adj.setdefault(a, {})
            if b in d and keep_min:
                d[b] = min(d[b], w)
            else:
                d[b] = w
        self.nv = max(self.nv, u + 1, v + 1)

    def has(self, u, v):
        return v in self.adj.get(u, {})

    def delete(self, u, v):
        for a, b in ((u, v),) if self.directed else ((u, v), (v, u)):
            self.adj.get(a, {}).pop(b, None)

    def del_vertex(self, x):
        for v in list(self.adj.get(x, {})):
            self.delete(x, v)
        if self.directed:
            for u in list(self.adj):
                if x in self.adj[u]:
                    self.delete(u, x)
        self.removed.add(x)

    def update(self, line):
        t = line.split()
        if not t or t[0].startswith('#'):
            return
        if t[0] == '+v':
            x = int(t[1])
            self.nv = max(self.nv, x + 1)
            self.removed.discard(x)
        elif t[0] == '-v':
            self.del_vertex(int(t[1]))
        elif t[0] == '+':
            self.put(int(t[1]), int(t[2]), float(t[3]) if len(t) > 3 else 1.0, False)
        elif t[0] == '-':
            self.delete(int(t[1]), int(t[2]))
        elif t[0] == '=':
            self.put(int(t[1]), int(t[2]), float(t[3]), False)

    def lines(self):
        for u in sorted(self.adj):
            for v in sorted(self.adj[u]):
                if not self.directed and v < u:
                    continue
                if self.weighted:
                    yield '%d %d %s\n' % (u, v, fmt_w(self.adj[u][v]))
                else:
                    yield '%d %d\n' % (u, v)


def read_input(path, fmt, g):
    if fmt in ('sg', 'wsg'):
        data = open(path, 'rb').read()
        directed, m, n = struct.unpack_from('<?qq', data, 0)
        off = struct.unpack_from('<%dq' % (n + 1), data, 17)
        es = 8 if fmt == 'wsg' else 4
        base = 17 + 8 * (n + 1)
        for u in range(n):
            for k in range(off[u], off[u + 1]):
                if es == 8:
                    v, w = struct.unpack_from('<ii', data, base + 8 * k)
                else:
                    (v,), w = struct.unpack_from('<i', data, base + 4 * k), 1
                g.put(u, v, w, True)
        g.nv = max(g.nv, n)
        return
    one = 1 if fmt == 'mtx' else 0
    sized = fmt != 'mtx'
    for line in open(path):
        t = line.split()
        if not t or t[0][0] in '#%':
            continue
        if not sized:
            g.nv = max(int(t[0]), int(t[1]))
            sized = True
            continue
        w = float(t[2]) if len(t) > 2 else 1.0
        g.put(int(t[0]) - one, int(t[1]) - one, w, True)


def gen(args):
    out, nv, ne, seed = args[0], int(args[1]), int(args[2]), int(args[3])
    opt = dict(hubs=2, hubdeg=1500, format='text')
    flags = set()
    i = 4
    while i < len(args):
        if args[i] in ('--directed', '--weighted'):
            flags.add(args[i])
            i += 1
        else:
            opt[args[i][2:]] = args[i + 1]
            i += 2
    rnd = random.Random(seed)
    live = nv - nv // 10
    edges = []
    for _ in range(int(opt['hubs'])):
        h = rnd.randrange(live)
        edges += [(h, rnd.randrange(live), rnd.randrange(100)) for _ in range(int(opt['hubdeg']))]
    for i in range(ne):
        u = rnd.randrange(live)
        v = u if i % 50 == 0 else rnd.randrange(live)
        edges.append((u, v, rnd.randrange(1000) / 8))
        if i % 97 == 0:
            edges.append((u, v, rnd.randrange(1000) / 8 + 1))
    fmt = opt['format']
    weighted = '--weighted' in flags
    if fmt == 'text':
        with open(out, 'w') as f:
            f.write('# generated\n')
            for u, v, w in edges:
                f.write('%d\t%d\t%s\n' % (u, v, w) if weighted else '%d %d\n' % (u, v))
    elif fmt == 'mtx':
        with open(out, 'w') as f:
            f.write('%%%%MatrixMarket matrix coordinate %s %s\n' %
                    ('real' if weighted else 'pattern',
                     'general' if '--directed' in flags else 'symmetric'))
            f.write('%d %d %d\n' % (nv, nv, len(edges)))
            for u, v, w in edges:
                f.write('%d %d %s\n' % (u + 1, v + 1, w) if weighted else
                        '%d %d\n' % (u + 1, v + 1))
    else:
        g = Graph('--directed' in flags, weighted)
        for u, v, w in edges:
            g.put(u, v, int(w), True)
        adj = [sorted(g.adj.get(u, {}).items()) for u in range(nv)]
        m = sum(len(a) for a in adj)
        with open(out, 'wb') as f:
            f.write(struct.pack('<?qq', g.directed, m, nv))
            lists = [adj]
            if g.directed:
                inv = [[] for _ in range(nv)]
                for u in range(nv):
                    for v, w in adj[u]:
                        inv[v].append((u, w))
                lists.append(inv)
            for a in lists:
                off = 0
                f.write(struct.pack('<q', 0))
                for u in range(nv):
                    off += len(a[u])
                    f.write(struct.pack('<q', off))
                for u in range(nv):
                    for v, w in a[u]:
                        f.write(struct.pack('<ii', v, int(w)) if fmt == 'wsg' else
                                struct.pack('<i', v))


def canon(args):
    g = Graph(args[2] == '1', args[3] == '1')
    read_input(args[0], args[1], g)
    for u in args[4:]:
        for line in open(u):
            g.update(line)
    sys.stdout.writelines(g.lines())


def load_canon(path, directed, weighted):
    g = Graph(directed, weighted)
    for line in open(path):
        t = line.split()
        g.put(int(t[0]), int(t[1]), float(t[2]) if len(t) > 2 else 1.0, False)
    return g


def vertex_ids(g):
    ids = set(g.adj)
    for u in g.adj:
        ids.update(g.adj[u])
    return sorted(ids)


def updates(args):
    g = load_canon(args[0], args[1] == '1', args[2] == '1')
    n, rnd = int(args[3]), random.Random(int(args[4]))
    nv = max(g.nv, 1)
    ids = vertex_ids(g) if len(args) > 6 and args[6] == 'sparse' else None
    out = []
    while len(out) < n:
        r = rnd.randrange(100)
        if ids:
            u, v = rnd.choice(ids), rnd.choice(ids)
        else:
            u, v = rnd.randrange(nv), rnd.randrange(nv)
        if r < 55 and not g.has(u, v):
            w = rnd.randrange(1000) / 8
            line = '+ %d %d %s\n' % (u, v, w) if g.weighted else '+ %d %d\n' % (u, v)
        elif r < 85 and g.adj.get(u):
            v = rnd.choice(sorted(g.adj[u]))
            line = '- %d %d\n' % (u, v)
        elif r < 100 and g.weighted and g.adj.get(u):
            v = rnd.choice(sorted(g.adj[u]))
            line = '= %d %d %s\n' % (u, v, rnd.randrange(1000) / 8)
        else:
            continue
        g.update(line)
        out.append(line)
    open(args[5], 'w').writelines(out)


def bfs(args):
    g = load_canon(args[0], args[1] == '1', False)
    src, nv = int(args[2]), args[3]
    depth = {src: 0}
    front = [src]
    while front:
        nxt = []
        for u in front:
            for v in g.adj.get(u, {}):
                if v not in depth:
                    depth[v] = depth[u] + 1
                    nxt.append(v)
        front = nxt
    for v in vertex_ids(g) if nv == 'ids' else range(int(nv)):
        print(v, depth.get(v, -1))


def cc(args):
    g = load_canon(args[0], False, False)     # weak components: both ways
    vs = vertex_ids(g) if args[1] == 'ids' else range(int(args[1]))
    p = {v: v for v in vs}

    def find(x):
        while p[x] != x:
            p[x] = p[p[x]]
            x = p[x]
        return x
    for u in g.adj:
        for v in g.adj[u]:
            a, b = find(u), find(v)
            if a != b:
                p[max(a, b)] = min(a, b)
    for v in vs:
        print(v, find(v))


def remap(args):
    def f(x):
        return (x * 0x9E3779B97F4A7C15) % (1 << 63) + (1 << 33)
    with open(args[1], 'w') as out:
        for line in open(args[0]):
            t = line.split()
            if not t or t[0][0] in '#%':
                out.write(line)
                continue
            out.write(' '.join([str(f(int(t[0]))), str(f(int(t[1])))] + t[2:]) + '\n')


if __name__ == '__main__':
    {'gen': gen, 'canon': canon, 'updates': updates, 'bfs': bfs, 'cc': cc,
     'remap': remap}[sys.argv[1]](sys.argv[2:])
