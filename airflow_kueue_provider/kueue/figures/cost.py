"""The price table and a pod's share of a VM (pure): what ``attempt_figures`` prices each Job with.

Each pod is charged the share of one VM it requests (the larger of its CPU and memory share), for the time
the Job ran, at the Spot or on-demand hourly price. With every slot busy for the whole run this is an upper
bound; it is an estimate for comparing runs and Spot against on-demand, not a bill.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from ..quantity import parse_quantity

GIB = Decimal(1024**3)


@dataclass(frozen=True)
class VmPrice:
    """Hourly prices of one VM size, in USD. Defaults: Standard_D16ds_v5 (16 vCPU, 64 GiB), Linux,
    pay-as-you-go and a typical Spot price; prices differ by region and day, so override them."""

    name: str = "Standard_D16ds_v5"
    cpu: int = 16
    memory_gib: int = 64
    on_demand_per_hour: float = 0.904
    spot_per_hour: float = 0.181

    @classmethod
    def from_param(cls, value: VmPrice | Mapping[str, Any] | None) -> VmPrice:
        if value is None:
            return cls()
        return value if isinstance(value, VmPrice) else replace(cls(), **dict(value))


def vm_share(requests: Mapping[str, Any] | None, vm: VmPrice) -> Decimal:
    """The fraction of one VM a pod requests: the larger of its CPU and memory share (at least 1/1000)."""
    requests = requests or {}
    cpu = parse_quantity(requests["cpu"]) / vm.cpu if "cpu" in requests else Decimal(0)
    memory = parse_quantity(requests["memory"]) / GIB / vm.memory_gib if "memory" in requests else Decimal(0)
    return max(cpu, memory, Decimal("0.001"))
