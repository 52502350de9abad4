#!/usr/bin/env python3
"""Reference numbers for stats_test.go, computed independently of the Go
code with mpmath (arbitrary precision) and plain enumeration.

Run: python3 evaluate/stats/testdata/refs.py
"""
import itertools
from mpmath import mp, mpf, betainc, sqrt, findroot

mp.dps = 40

def mean(x): return sum(mpf(v) for v in x) / len(x)
def var(x):
    m = mean(x)
    return sum((mpf(v) - m) ** 2 for v in x) / (len(x) - 1)

def p_two_sided(t, df):
    # P(|T| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2)
    return betainc(df / 2, mpf(1) / 2, 0, df / (df + t * t), regularized=True)

def tq(q, df):
    # upper quantile: find x with two-sided tail 2(1-q)
    target = 2 * (1 - mpf(q))
    return findroot(lambda x: p_two_sided(x, df) - target, mpf(2))

def welch(b, o):
    vb, vo = var(b) / len(b), var(o) / len(o)
    t = (mean(o) - mean(b)) / sqrt(vb + vo)
    df = (vb + vo) ** 2 / (vb ** 2 / (len(b) - 1) + vo ** 2 / (len(o) - 1))
    return t, df, p_two_sided(t, df)

def fieller(b, o, conf=0.95):
    mb, mo = mean(b), mean(o)
    vb, vo = var(b) / len(b), var(o) / len(o)
    r = mo / mb
    df = (vo + r * r * vb) ** 2 / (vo ** 2 / (len(o) - 1) + (r * r * vb) ** 2 / (len(b) - 1))
    t = tq(1 - (1 - mpf(conf)) / 2, df)
    a = mb * mb - t * t * vb
    bq = mo * mb
    c = mo * mo - t * t * vo
    d = sqrt(bq * bq - a * c)
    return 100 * ((bq - d) / a - 1), 100 * ((bq + d) / a - 1)

def mwu_exact(b, o):
    # two-sided exact p by enumerating every assignment of the pooled
    # values to the two groups (ties get mid-ranks).
    pooled = sorted(b + o)
    ranks = {}
    i = 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j] == pooled[i]:
            j += 1
        ranks[pooled[i]] = mpf(i + 1 + j) / 2
        i = j
    n1 = len(b)
    allv = b + o
    def u_of(idx):
        r1 = sum(ranks[allv[k]] for k in idx)
        return r1 - mpf(n1 * (n1 + 1)) / 2
    u_obs = u_of(range(n1))
    mu = mpf(n1 * len(o)) / 2
    dev = abs(u_obs - mu)
    total = hits = 0
    for idx in itertools.combinations(range(len(allv)), n1):
        total += 1
        if abs(u_of(idx) - mu) >= dev - mpf(10) ** -20:
            hits += 1
    return u_obs, mpf(hits) / total

sets = {
    "kill": ([955.1, 954.6, 955.9], [1192.4, 1191.8, 1193.1]),
    "rcu": ([10.088, 10.064, 10.051, 10.125, 8.695, 10.157, 10.102, 8.050, 10.059, 10.077],
            [6.027, 6.032, 6.010, 6.076, 6.084, 6.034, 6.051, 6.057, 6.016, 6.036]),
    "noise": ([100.2, 98.7, 101.5, 99.9, 100.8], [101.1, 99.5, 102.3, 100.4, 98.9]),
    "ties": ([1, 2, 2, 3], [2, 3, 3, 4]),
}
for name, (b, o) in sets.items():
    t, df, p = welch(b, o)
    lo, hi = fieller(b, o)
    u, up = mwu_exact(b, o)
    print(f"{name}: t={mp.nstr(t, 15)} df={mp.nstr(df, 15)} p={mp.nstr(p, 15)} "
          f"ci=[{mp.nstr(lo, 12)}, {mp.nstr(hi, 12)}] U={mp.nstr(u, 6)} Up={mp.nstr(up, 12)}")
# 99.375% (NeedMore interim look, 0.05/8): kill -> [24.490551, 25.182596]
print("kill 99.375%:", [mp.nstr(v, 8) for v in fieller(*sets["kill"], conf=0.99375)])
for q, df in [(0.975, 10), (0.975, 2), (0.975, 4.5), (0.995, 3), (0.9, 1)]:
    print(f"tq({q},{df})={mp.nstr(tq(q, mpf(df)), 15)}")
