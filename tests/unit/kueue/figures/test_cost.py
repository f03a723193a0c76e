"""A pod's share of a VM and the price table."""

from __future__ import annotations

from airflow_kueue_provider.kueue.figures.cost import VmPrice, vm_share


def test_share_is_the_larger_of_cpu_and_memory() -> None:
    vm = VmPrice()
    assert float(vm_share({"cpu": "4", "memory": "4Gi"}, vm)) == 0.25
    assert float(vm_share({"cpu": "1", "memory": "32Gi"}, vm)) == 0.5
    assert float(vm_share({"cpu": "500m"}, vm)) == 0.03125


def test_a_price_table_takes_partial_overrides() -> None:
    vm = VmPrice.from_param({"on_demand_per_hour": 1.0})
    assert vm.on_demand_per_hour == 1.0 and vm.spot_per_hour == VmPrice().spot_per_hour
