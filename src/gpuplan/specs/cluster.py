"""Cluster: a device, GPUs per node, nodes, and the link classes between GPUs.

A "node" here is the group of GPUs that share the scale-up fabric: an HGX/DGX server (8 GPUs on
NVSwitch or an xGMI mesh), a GB200 NVL72 rack (72 GPUs on NVLink switches), a TPU slice (ICI
torus across all its chips). Defaults come from the device file's `[topology]` (scale-up
domain, devices per host, kind); without one, 8 GPUs per node. Inside a node, bridged pairs
(H100 NVL) reach their partner over the bridge and the other GPUs over `host_link` (PCIe); a
mesh (MI300X) has one link per peer, so a group of g GPUs gets (g - 1) links. Bandwidths are per
GPU per direction (one-way); `efficiency` scales the rating to what ring collectives reach.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.errors import InputError
from gpuplan.specs.device import Device, Topology

NVLINK_RING_EFFICIENCY = 0.80
"""Ring collectives reach ~80% of the one-way NVLink rating: H200 node 363-367 of 450 GB/s,
A100 node 235 of 300 GB/s busbw (nccl-tests README performance notes)."""
NETWORK_EFFICIENCY = 0.73
"""Inter-node busbw per GPU on a network the catalog does not name as InfiniBand (EFA, RoCE,
Ethernet, or a rate given with --scale-out-gbps): 36.5 of 50 GB/s on AWS p6 EFA (ml-engineering
network/README.md, 4-node all-reduce of 4 GiB, 2026)."""
INFINIBAND_EFFICIENCY = 0.94
"""Inter-node busbw per GPU on InfiniBand: NVIDIA's NCCL team gives 46-48 of 50 GB/s per NDR
400 Gb/s NIC (github.com/NVIDIA/nccl-tests issue 290, 2025-03-03) and measures 192 GB/s
all-reduce busbw on a DGX A100 with 8 x HDR 200 Gb/s = 0.96 of 200 (github.com/NVIDIA/nccl
issue 812, 2023-03-30); 0.94 is the middle of 0.92-0.96."""
PCIE_EFFICIENCY = 0.80
"""PCIe copy engines reach ~26 of 32 GB/s one-way on Gen4 x16 (nvbandwidth, kernel_cases.csv)."""
SCALE_UP_LATENCY_S = 3e-6
"""Per ring step within a node: 8-GPU H200 all-reduce of 32 KiB takes ~40 µs = 14 steps x 3 µs
(nccl-tests, kernel_cases.csv)."""
SCALE_OUT_LATENCY_S = 10e-6
"""Per step across nodes (InfiniBand/RoCE ~5-10 µs; EFA higher): an assumption."""
DEFAULT_NETWORK_BYTES_PER_S = 12.5e9
"""When the catalog has no network for a device: 100 Gb/s Ethernet per GPU (assumption)."""


class Link(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    bw_bytes_per_s: float = Field(gt=0, description="rated, per GPU per direction")
    efficiency: float = Field(gt=0, le=1.1, description="achievable busbw / rating")
    latency_s: float = Field(ge=0, description="per collective step")
    per_peer_bytes_per_s: float | None = Field(
        default=None, gt=0, description="mesh: one link per peer; a group of g GPUs uses g - 1")
    efficiency_basis: str | None = Field(
        default=None, description="where the efficiency comes from (printed with estimates)")

    @property
    def achievable_bytes_per_s(self) -> float:
        return self.bw_bytes_per_s * self.efficiency


class Cluster(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    device: Device
    gpus_per_node: int = Field(default=8, ge=1)
    nodes: int = Field(default=1, ge=1)
    scale_up: Link
    scale_out: Link
    scale_up_domain: int | None = Field(
        default=None, ge=1, description="GPUs reachable over scale_up (None: the whole node); "
        "smaller than the node for bridged pairs")
    host_link: Link | None = Field(
        default=None, description="between scale-up domains inside a node (PCIe for pairs)")
    devices_per_host: int | None = Field(default=None, ge=1, description="GPUs per server")

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def domain(self) -> int:
        return min(self.scale_up_domain or self.gpus_per_node, self.gpus_per_node)


def network_efficiency(fabric: str | None) -> float:
    """Achievable share of a network's rating for ring collectives: InfiniBand's measured
    share when the catalog names the fabric InfiniBand, else the (lower) EFA measurement."""
    return INFINIBAND_EFFICIENCY if fabric == "infiniband" else NETWORK_EFFICIENCY


def network_basis(fabric: str | None) -> str:
    """One line on where network_efficiency(fabric) comes from."""
    if fabric == "infiniband":
        return ("InfiniBand: NCCL reaches 46-48 of 50 GB/s per NDR NIC (NVIDIA/nccl-tests issue "
                "290) and 192 of 200 GB/s all-reduce busbw on a DGX A100 (NVIDIA/nccl issue 812)")
    return ("fabric not known to be InfiniBand: 36.5 of 50 GB/s busbw per GPU measured on AWS "
            "EFA (ml-engineering network/README.md)")


def spans_hosts(topo: Topology) -> bool:
    """A scale-up fabric that reaches beyond one server: GB200 NVL72 (18 trays of 4 GPUs on
    NVLink switches), TPU slices (ICI across hosts of 4 chips)."""
    return topo.kind in ("switch", "torus") and topo.scale_up_domain > topo.devices_per_node


def scale_up_group(gpus: int, domain: int, host: int) -> int:
    """GPUs of a `gpus`-GPU job that share one scale-up domain of up to `domain` devices built
    from hosts of `host`: the whole job when it fits in one domain, else the largest whole
    number of hosts that fits in a domain and divides the job evenly, one host if none does.
    128 GB200 GPUs: two NVLink domains of 64 (sixteen 4-GPU trays each), as NVIDIA's
    Megatron-Bridge GB200 recipes place 64-GPU jobs "within one NVLink domain"
    (docs.nvidia.com/nemo/megatron-bridge, bridge.recipes.llama.gb200.llama3, read
    2026-12-04)."""
    if gpus <= domain:
        return gpus
    for size in range(domain - domain % host, host - 1, -host):
        if gpus % size == 0:
            return size
    return host


def default_cluster(device: Device, gpus: int, gpus_per_node: int | None = None,
                    scale_up_bytes_per_s: float | None = None,
                    scale_out_bytes_per_s: float | None = None) -> Cluster:
    """DGX/HGX-style nodes of `device` holding `gpus` GPUs in total."""
    if gpus < 1:
        raise InputError("gpus", gpus, "a whole number >= 1")
    topo = device.topology
    node_default = 8 if device.kind != "cpu" else 1
    if topo is not None:
        node_default = topo.devices_per_node if topo.kind == "pairs" else topo.scale_up_domain
    per_node = gpus_per_node or node_default
    if topo is not None and spans_hosts(topo) and gpus_per_node in (None, topo.devices_per_node):
        per_node = scale_up_group(gpus, topo.scale_up_domain, topo.devices_per_node)
    # a job smaller than a node uses `gpus` of that node's GPUs (one node, all on its links)
    per_node = min(per_node, gpus)
    if gpus % per_node and gpus > per_node:
        raise InputError("gpus", gpus, f"a multiple of gpus-per-node ({per_node})")
    if device.scale_up is not None:
        up = Link(name=device.scale_up.name, bw_bytes_per_s=device.scale_up.bw_bytes_per_s,
                  efficiency=NVLINK_RING_EFFICIENCY, latency_s=SCALE_UP_LATENCY_S,
                  per_peer_bytes_per_s=topo.per_peer_bw_bytes_per_s if topo else None)
    elif device.pcie is not None:
        up = Link(name=f"{device.pcie.name} (no NVLink)", bw_bytes_per_s=device.pcie.bw_bytes_per_s,
                  efficiency=PCIE_EFFICIENCY, latency_s=SCALE_UP_LATENCY_S * 2)
    else:
        up = Link(name="host memory", bw_bytes_per_s=device.mem_bw_bytes_per_s / 4,
                  efficiency=0.5, latency_s=SCALE_UP_LATENCY_S)
    if scale_up_bytes_per_s:
        up = up.model_copy(update={"bw_bytes_per_s": scale_up_bytes_per_s})
    net = device.scale_out
    out = Link(name=net.name if net else "100 Gb/s Ethernet per GPU (assumed)",
               bw_bytes_per_s=net.bw_bytes_per_s if net else DEFAULT_NETWORK_BYTES_PER_S,
               efficiency=network_efficiency(net.fabric if net else None),
               efficiency_basis=network_basis(net.fabric if net else None),
               latency_s=SCALE_OUT_LATENCY_S)
    if scale_out_bytes_per_s:  # a network of the user's: its fabric is not known
        out = out.model_copy(update={
            "name": f"network of {scale_out_bytes_per_s / 1e9:g} GB/s per GPU (given)",
            "bw_bytes_per_s": scale_out_bytes_per_s, "efficiency": network_efficiency(None),
            "efficiency_basis": network_basis(None)})
    host = None
    if topo is not None and topo.kind == "pairs" and device.pcie is not None:
        host = Link(name=f"{device.pcie.name} (between bridged pairs)",
                    bw_bytes_per_s=device.pcie.bw_bytes_per_s, efficiency=PCIE_EFFICIENCY,
                    latency_s=SCALE_UP_LATENCY_S * 2)
    return Cluster(device=device, gpus_per_node=per_node, nodes=max(1, gpus // per_node),
                   scale_up=up, scale_out=out,
                   scale_up_domain=topo.scale_up_domain if topo else None, host_link=host,
                   devices_per_host=topo.devices_per_node if topo else None)
