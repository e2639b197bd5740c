"""Cost-aware best-first diffusion over the prepared graph (:mod:`retrieval.prepared`).

From seeds with an init weight, a heap pops the best-scoring node and follows
its cheapest out-edges; a node reached along a path of cumulative edge cost
``c`` scores ``sim(node, q) · init_weight / (1 + c)`` and keeps its best path,
so every result can be explained by the path that found it. Content nodes are
collected into per-modality buckets as they are reached. Budgets (time,
expansions, frontier size) keep a query's cost bounded on any graph.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from strata.retrieval.prepared import BUCKETS, Prepared

if TYPE_CHECKING:
    from strata.retrieval.modes.diffusion import DiffusionConfig

TIME_CHECK_EVERY = 64  # pops between clock reads
STOP_REASONS = ("time_budget", "max_expansions", "frontier_exhausted", "buckets_full")


@dataclass
class DiffusionRun:
    """The outcome of a diffusion: the best path per reached node, the buckets,
    and what the loop did (counts and the stop reason)."""

    sims: np.ndarray
    best_pot: np.ndarray  # best init_weight / (1 + cost) per node (0: not reached)
    via: np.ndarray  # int32 dense id of the predecessor on the best path (-1: a seed)
    seed_via: dict[int, str]  # seed → the fact id that brought it in (fact seeds)
    pinned: set[int]  # mandatory chunks
    buckets: list[dict[int, float]]
    stop_reason: str = ""
    expansions: int = 0
    pops: int = 0
    enqueued: int = 0
    seeds: int = 0
    frontier_dropped: int = 0
    frontier_peak: int = 0
    evicted: int = 0

    def score(self, i: int) -> float:
        return float(self.sims[i] * self.best_pot[i])

    def path(self, i: int) -> list[int]:
        """Dense ids from the seed to ``i`` along the best path."""
        out = [i]
        seen = {i}
        while self.via[out[-1]] >= 0:
            nxt = int(self.via[out[-1]])
            if nxt in seen:  # cannot happen with strictly improving paths; guard anyway
                break
            seen.add(nxt)
            out.append(nxt)
        return out[::-1]


def diffuse(prep: Prepared, sims: np.ndarray, seeds: dict[int, tuple[float, str | None]],
            pinned: set[int], cfg: DiffusionConfig, t0: float | None = None) -> DiffusionRun:
    """Best-first diffusion from ``seeds`` (dense id → (init_weight, via fact id)).

    A popped node expands at most ``per_node_neighbor_limit`` out-edges, cheapest
    first; a neighbour is enqueued when its score reaches ``min_enqueue_score``
    and the path improves on its best known one (a node whose best path improves
    after its expansion is expanded again). A collected node fills its bucket up
    to ``spread_*_k``, then replaces the bucket's worst non-mandatory node if
    better; ``pinned`` nodes are collected whatever the caps. Stops at the first
    of ``STOP_REASONS``: the time budget (checked before the first pop and every
    ``TIME_CHECK_EVERY`` pops), ``max_expansions``, every bucket full, the
    frontier empty. ``t0``: when the clock started (default: now)."""
    t0 = time.perf_counter() if t0 is None else t0
    n = prep.n
    best_pot = np.zeros(n)
    best_init = np.zeros(n)
    best_cost = np.zeros(n)
    expanded_pot = np.zeros(n)
    via = np.full(n, -1, dtype=np.int32)
    caps = [max(0, min(int(c), int(s))) for c, s in zip(
        (cfg.spread_chunk_k, cfg.spread_code_k, cfg.spread_table_k, cfg.spread_image_k),
        prep.bucket_size)]
    buckets: list[dict[int, float]] = [{} for _ in BUCKETS]
    worst: list[tuple[float, int] | None] = [None] * len(BUCKETS)  # cached worst evictable
    run = DiffusionRun(sims=sims, best_pot=best_pot, via=via, seed_via={}, pinned=set(pinned),
                       buckets=buckets)

    def collect(v: int, b: int, s: float) -> None:
        bk = buckets[b]
        if v in bk:
            bk[v] = max(bk[v], s)
            if worst[b] is not None and worst[b][1] == v:
                worst[b] = None
            return
        if len(bk) < caps[b]:
            bk[v] = s
            if worst[b] is not None and s < worst[b][0]:
                worst[b] = (s, v)
            return
        w = worst[b]
        if w is None:
            cands = [(sc, u) for u, sc in bk.items() if u not in run.pinned]
            if not cands:
                return
            w = worst[b] = min(cands)
        if s > w[0]:
            del bk[w[1]]
            bk[v] = s
            worst[b] = None
            run.evicted += 1

    heap: list[tuple[float, int]] = []
    for v, (init, fact) in seeds.items():
        if v < 0 or init <= 0:
            continue
        best_pot[v] = best_init[v] = init
        if fact:
            run.seed_via[v] = fact
        heap.append((-(sims[v] * init), v))
        b = prep.bucket[v]
        if v in run.pinned and b >= 0:
            buckets[b][v] = sims[v] * init  # mandatory: in, whatever the caps
    heapq.heapify(heap)
    run.seeds = len(heap)

    per_node = max(0, int(cfg.per_node_neighbor_limit))
    min_score = float(cfg.min_enqueue_score)
    budget = float(cfg.time_budget_s)
    max_exp = int(cfg.max_expansions)
    cap = max(1, int(cfg.max_frontier_size))
    slack = max(1, cap // 4)
    indptr, nbr, cost, bucket = prep.indptr, prep.nbr, prep.cost, prep.bucket
    peak = len(heap)
    while True:
        if run.pops % TIME_CHECK_EVERY == 0 and time.perf_counter() - t0 >= budget:
            run.stop_reason = "time_budget"
            break
        if run.expansions >= max_exp:
            run.stop_reason = "max_expansions"
            break
        if all(len(bk) >= c for bk, c in zip(buckets, caps)):
            run.stop_reason = "buckets_full"
            break
        if not heap:
            run.stop_reason = "frontier_exhausted"
            break
        neg, u = heapq.heappop(heap)
        run.pops += 1
        pot_u = best_pot[u]
        if -neg < sims[u] * pot_u or pot_u <= expanded_pot[u]:
            continue  # stale entry, or already expanded with this path
        expanded_pot[u] = pot_u
        run.expansions += 1
        a = indptr[u]
        b = min(indptr[u + 1], a + per_node)
        if b <= a:
            continue
        nb = nbr[a:b]
        pot = best_init[u] / (1.0 + best_cost[u] + cost[a:b])
        sc = sims[nb] * pot
        ok = (sc >= min_score) & (pot > best_pot[nb])
        if not ok.any():
            continue
        sel = np.nonzero(ok)[0]
        if sel.size > 1:  # parallel edges: keep each neighbour's cheapest (first) one
            _, first = np.unique(nb[sel], return_index=True)
            if first.size < sel.size:
                sel = sel[np.sort(first)]
        vs = nb[sel]
        best_pot[vs] = pot[sel]
        best_init[vs] = best_init[u]
        best_cost[vs] = best_cost[u] + cost[a:b][sel]
        via[vs] = u
        for v, s, bk in zip(vs.tolist(), sc[sel].tolist(), bucket[vs].tolist()):
            heapq.heappush(heap, (-s, v))
            if bk >= 0:
                collect(v, bk, s)
        run.enqueued += int(vs.size)
        if len(heap) > peak:
            peak = len(heap)
        # trimmed a quarter past the cap at a time: after every push it would cost more
        # than the expansions themselves
        if len(heap) > cap + slack:
            run.frontier_dropped += len(heap) - cap
            heap = heapq.nsmallest(cap, heap)  # sorted, hence a valid heap
    run.frontier_peak = peak
    return run

