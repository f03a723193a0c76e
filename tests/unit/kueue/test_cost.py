"""Cost estimates from requests, run time and the price table."""

from __future__ import annotations

from airflow_kueue_provider.kueue.cost import VmPrice, estimate_cost, vm_share


def test_share_is_the_larger_of_cpu_and_memory() -> None:
    vm = VmPrice()
    assert float(vm_share({"cpu": "4", "memory": "4Gi"}, vm)) == 0.25
    assert float(vm_share({"cpu": "1", "memory": "32Gi"}, vm)) == 0.5
    assert float(vm_share({"cpu": "500m"}, vm)) == 0.03125


def test_spot_run_of_50_pods_for_an_hour() -> None:
    cost = estimate_cost(
        {"cpu": "4", "memory": "16Gi"}, pods=50, running_seconds=3600, spot=True, vm=VmPrice()
    )
    assert cost["estimated_cost_usd"] == round(0.25 * 50 * 0.181, 4)
    assert "Spot" in cost["cost_basis"] and "Standard_D16ds_v5" in cost["cost_basis"]
    on_demand = estimate_cost(
        {"cpu": "4"}, 50, 3600, spot=False, vm=VmPrice.from_param({"on_demand_per_hour": 1.0})
    )
    assert on_demand["estimated_cost_usd"] == 12.5
