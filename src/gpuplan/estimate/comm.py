"""Collective communication time with latency and bandwidth terms (alpha-beta model).

Ring algorithms (Patarasuk & Yuan 2009; NCCL): for n GPUs and S bytes
  all-reduce:              2(n-1) steps, 2(n-1)/n x S over the slowest link
  all-gather, reduce-scatter, all-to-all: (n-1) steps, (n-1)/n x S   (S = the full buffer)
  broadcast (pipelined ring): S, n-1 steps;   send/recv: S, 1 step.
Across nodes, tree all-reduce (NCCL double binary tree: 2 log2(n) latency steps, the same
bandwidth term) is used when faster. A group spanning nodes runs hierarchically:
reduce-scatter inside each node, the inter-node collective on 1/g of the data (each GPU using
its own NIC), all-gather inside the node. Reported as nccl-tests defines them: algbw = S / t,
busbw = algbw x (2(n-1)/n for all-reduce, (n-1)/n for gather/scatter/all-to-all, 1 otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuplan.errors import InputError
from gpuplan.specs.cluster import Cluster, Link

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                     "send_recv"]
COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                "broadcast", "send_recv")


def bus_factor(op: str, n: int) -> float:
    """busbw / algbw (nccl-tests doc/PERFORMANCE.md)."""
    if n <= 1:
        return 1.0
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class CommTime:
    op: str
    bytes: float
    group: int
    time_s: float
    link: str

    @property
    def algbw_bytes_per_s(self) -> float:
        return self.bytes / self.time_s if self.time_s else float("inf")

    @property
    def busbw_bytes_per_s(self) -> float:
        return self.algbw_bytes_per_s * bus_factor(self.op, self.group)


def flat_time(op: str, nbytes: float, n: int, link: Link, tree: bool = False) -> float:
    """One flat ring over `link`; across nodes all-reduce may use NCCL's tree if faster (the
    intra-node latency per step is calibrated on ring measurements)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    bw, a = link.achievable_bytes_per_s, link.latency_s
    if op == "all_reduce":
        ring = 2 * (n - 1) * a + 2 * (n - 1) / n * nbytes / bw
        if not tree:
            return ring
        return min(ring, 2 * math.ceil(math.log2(n)) * a + 2 * (n - 1) / n * nbytes / bw)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) * a + (n - 1) / n * nbytes / bw
    if op == "broadcast":
        return (n - 1) * a + nbytes / bw
    if op == "send_recv":
        return a + nbytes / bw
    raise InputError("collective", op, f"one of {', '.join(COLLECTIVES)}")


def intra_node_link(cluster: Cluster, g: int) -> Link:
    """The link a group of `g` GPUs inside one node runs on: the scale-up link when they share
    a scale-up domain (a mesh gives g - 1 of its per-peer links, up to the aggregate), else the
    host link between domains (bridged pairs: PCIe)."""
    up = cluster.scale_up
    if g > cluster.domain and cluster.host_link is not None:
        return cluster.host_link
    if up.per_peer_bytes_per_s is not None and g > 1:
        bw = min(up.bw_bytes_per_s, up.per_peer_bytes_per_s * (g - 1))
        return up.model_copy(update={"bw_bytes_per_s": bw,
                                     "name": f"{up.name} ({g - 1} of its per-peer links)"})
    return up


def collective_time(op: str, nbytes: float, group: int, cluster: Cluster,
                    local: int | None = None) -> CommTime:
    """Time of `op` on `nbytes` over `group` GPUs; `local` = how many of them share a node
    (default: as many as fit in one node)."""
    if group < 1:
        raise InputError("group", group, "a whole number >= 1")
    g = local if local is not None else min(group, cluster.gpus_per_node)
    g = max(1, min(g, group))
    nodes = math.ceil(group / g)
    up, out = intra_node_link(cluster, g), cluster.scale_out
    if nodes == 1:
        return CommTime(op, nbytes, group, flat_time(op, nbytes, group, up), up.name)
    if g == 1:
        return CommTime(op, nbytes, group, flat_time(op, nbytes, group, out, tree=True), out.name)
    # hierarchical: intra-node stage on the fast link, inter-node stage on 1/g of the data
    if op == "all_reduce":
        t = (flat_time("reduce_scatter", nbytes, g, up)
             + flat_time("all_reduce", nbytes / g, nodes, out, tree=True)
             + flat_time("all_gather", nbytes, g, up))
    elif op in ("all_gather", "reduce_scatter"):
        t = flat_time(op, nbytes, g, up) + flat_time(op, nbytes / g, nodes, out)
    elif op == "all_to_all":  # each GPU's off-node share leaves through its own NIC
        t = max((g - 1) * up.latency_s + nbytes * (g - 1) / group / up.achievable_bytes_per_s,
                (nodes - 1) * out.latency_s
                + nbytes * (group - g) / group / out.achievable_bytes_per_s)
    else:
        t = flat_time(op, nbytes, nodes, out) + flat_time(op, nbytes, g, up)
    return CommTime(op, nbytes, group, t, f"{up.name} + {out.name}")
