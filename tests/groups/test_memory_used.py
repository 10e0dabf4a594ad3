"""memory_used: host and per-core breakdowns summed into totals, models grouped with their subgraphs."""

from __future__ import annotations

from neuron_monitor.groups.memory_used.collector import MemoryUsed
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.datablock import ModelNode
from tests.neuron.appdata import TRN2, app_with, counters


def test_breakdowns_totals_and_models() -> None:
    nd = counters({6: 1048576, 10: 609656832, 7: 5, 8: 7, 9: 999})  # 9 (host scratchpad) is not in the breakdown
    nc = {c: counters({}) for c in range(8)}
    nc[0] = counters({22: 101125344, 23: 943608, 24: 196608})
    nc[1] = counters({22: 32768})
    nc[5] = counters({26: 100})
    uuid = "2b28572e7dd811edb0250e0372b2eb59"
    models = (
        ModelNode(10002, 1, "m", uuid, 1, 1, (0, 0, 0, 0, 20608), (53632, 0, 98304, 0, 0)),
        ModelNode(10002, 0, "m", uuid, 0, 0, (4096, 0, 0, 0, 0), (1, 2, 3, 0, 4)),
        ModelNode(10001, 0, "n", "00" * 16, 5, 0, (0,) * 5, (0,) * 5),
    )
    app = app_with(nc, t=0.0, topology=TRN2, nd=nd, models=models, locked=(uuid,))
    body = MemoryUsed(RootFS("/")).collect([app], [])[app.pid]
    used = body["neuron_runtime_used_bytes"]
    assert used["usage_breakdown"]["host"] == {"application_memory": 609656832, "constants": 7,
                                               "dma_buffers": 1048576, "tensors": 5}  # fmt: skip
    assert used["host"] == 609656832 + 7 + 1048576 + 5
    per_core = used["usage_breakdown"]["neuroncore_memory_usage"]
    assert list(per_core) == ["0", "2"]  # LNC=2: physical 0,1 -> logical 0; physical 5 -> logical 2
    assert per_core["0"] == {"constants": 196608, "model_code": 101125344 + 32768, "model_shared_scratchpad": 0,
                             "runtime_memory": 0, "tensors": 943608}  # fmt: skip
    assert used["neuron_device"] == 196608 + 101125344 + 32768 + 943608 + 100
    assert [(m["model_id"], m["is_running"], list(m["subgraphs"])) for m in body["loaded_models"]] == [
        (10001, False, ["sg_00"]),
        (10002, True, ["sg_00", "sg_01"]),
    ]
    sg = body["loaded_models"][1]["subgraphs"]["sg_01"]
    assert sg["neuroncore_index"] == 0 and sg["neuron_device_index"] == 0
    assert sg["memory_used_bytes"]["host"] == 20608
    assert sg["memory_used_bytes"]["usage_breakdown"]["neuron_device"] == {
        "constants": 98304, "model_code": 53632, "runtime_memory": 0, "tensors": 0}  # fmt: skip
