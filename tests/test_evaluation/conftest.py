import math

import numpy as np
import pytest


def slow_official_map(ranks, gnd, kappas=(1, 5, 10)):
    """The revisited Oxford / Paris evaluation, one ranked item at a time,
    written from docs/protocols.md ("Revisited Oxford and Paris") as an independent reference.

    Returns (mAP, aps, mpr, prs) like revisited_map.
    """
    n_db, n_q = ranks.shape
    aps, prs = [], []
    for i in range(n_q):
        ok = {int(v) for v in gnd[i]['ok']}
        junk = {int(v) for v in gnd[i].get('junk', [])}
        if not ok:
            aps.append(math.nan)
            prs.append([math.nan] * len(kappas))
            continue
        # Walk the ranking; a positive's position drops by the junk seen before it.
        positions, junk_before = [], 0
        for r in range(n_db):
            item = int(ranks[r, i])
            if item in ok:
                positions.append(r - junk_before)
            if item in junk:
                junk_before += 1
        ap = 0.0
        for j, r in enumerate(positions):
            p0 = 1.0 if r == 0 else j / r
            p1 = (j + 1) / (r + 1)
            ap += (p0 + p1) / (2 * len(ok))
        aps.append(ap)
        row = []
        for k in kappas:
            if not positions:
                row.append(0.0)
                continue
            kq = min(max(positions) + 1, k)
            row.append(sum(1 for r in positions if r + 1 <= kq) / kq)
        prs.append(row)
    aps, prs = np.array(aps), np.array(prs, dtype=float).reshape(n_q, len(kappas))
    valid = [i for i in range(n_q) if not math.isnan(aps[i])]
    if not valid:
        return math.nan, aps, np.full(len(kappas), math.nan), prs
    mean_ap = sum(aps[i] for i in valid) / len(valid)
    mpr = np.array([sum(prs[i, c] for i in valid) / len(valid) for c in range(len(kappas))])
    return mean_ap, aps, mpr, prs


@pytest.fixture
def official_map():
    return slow_official_map
