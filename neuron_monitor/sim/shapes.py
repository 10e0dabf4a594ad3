"""Instance shapes the simulator can build (facts and public sources: docs/neuron-data.md).

A `Shape` says what a real instance of that type exposes: device count, physical NeuronCores per device, the
driver's architecture strings (sysfs ``arch_type``, ``instance_type``, ``device_name``), device memory, vCPUs,
host memory, and the default logical NeuronCore config (LNC). `get_shape(name)` raises KeyError with the list of
known names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GIB = 1024**3
SERIAL_BASE = 0x9FF5434815C8BD80  # info/serial_number of simulated device 0 (device N: + N)


@dataclass(frozen=True)
class Shape:
    name: str
    devices: int
    phys_cores: int  # physical NeuronCores per device (sysfs core_count)
    nd_arch: str  # sysfs info/architecture/arch_type of the device, e.g. "NDv2"
    nc_arch: str  # sysfs neuron_coreK/info/architecture/arch_type, e.g. "NCv2"
    instance_family: str  # sysfs info/architecture/instance_type, e.g. "Trn1"
    device_name: str  # sysfs info/architecture/device_name, e.g. "Trainium1"
    device_memory: int  # bytes per device
    vcpus: int
    host_memory: int  # bytes
    lnc: int = 1  # logical NeuronCore config (physical cores per logical core)
    has_ecc_files: bool = True  # stats/hardware exists (not on v1/Inf1)
    has_serial: bool = True
    ultraserver: bool = False  # a member of a Trn2 UltraServer: the driver's class attributes name the pod
    efa_adapters: int = 0  # EFA adapters (network cards with an EFA interface) of the instance type
    efa_rate_gbps: int = 100  # link rate of each adapter

    @property
    def ultraserver_files(self) -> dict[str, str]:
        """The driver's class attributes under sys/class/neuron_device/ (see neuron/ultraserver.py for the
        formats). An UltraServer member reports node 0 of a 4-node pod whose id is the first device's serial
        number (the driver uses node 0's serial); the supported modes (X4, X2H, X1) are an assumption."""
        if not self.ultraserver:
            return {"node_id_4": "-1\n", "server_id_4": f"{0:016x}\n", "node_id_2": "-1\n",
                    "server_id_2": f"{0:016x}\n", "ultraserver_mode": "\n"}  # fmt: skip
        pod = f"{SERIAL_BASE:016x}\n"
        return {"node_id_4": "0\n", "server_id_4": pod, "node_id_2": "0\n", "server_id_2": pod,
                "ultraserver_mode": "1,2,4\n"}  # fmt: skip

    @property
    def logical_cores(self) -> int:
        return self.phys_cores // self.lnc


def _inf1(name: str, devices: int, vcpus: int, mem_gib: int) -> Shape:
    return Shape(name, devices, 4, "NDv1", "NCv1", "Inf1", "Inferentia", 8 * GIB, vcpus, mem_gib * GIB,
                 has_ecc_files=False, has_serial=False)  # fmt: skip


def _inf2(name: str, devices: int, vcpus: int, mem_gib: int) -> Shape:
    return Shape(name, devices, 2, "NDv3", "NCv2", "Inf2", "Inferentia2", 32 * GIB, vcpus, mem_gib * GIB)


def _trn1(name: str, devices: int, vcpus: int, mem_gib: int, efa: int) -> Shape:
    return Shape(name, devices, 2, "NDv2", "NCv2", "Trn1", "Trainium1", 32 * GIB, vcpus, mem_gib * GIB,
                 efa_adapters=efa)  # fmt: skip


def _trn2(name: str, ultraserver: bool = False) -> Shape:
    return Shape(name, 16, 8, "NDv3", "NCv3", "Trn2", "Trainium2", 96 * GIB, 192, 2048 * GIB, lnc=2,
                 ultraserver=ultraserver, efa_adapters=16, efa_rate_gbps=200)  # fmt: skip


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        _inf1("inf1.xlarge", 1, 4, 8),
        _inf1("inf1.2xlarge", 1, 8, 16),
        _inf1("inf1.6xlarge", 4, 24, 48),
        _inf1("inf1.24xlarge", 16, 96, 192),
        _inf2("inf2.xlarge", 1, 4, 16),
        _inf2("inf2.8xlarge", 1, 32, 128),
        _inf2("inf2.24xlarge", 6, 96, 384),
        _inf2("inf2.48xlarge", 12, 192, 768),
        # EFA: none on trn1.2xlarge, 8 on trn1.32xlarge (800 Gbps), 16 on trn1n.32xlarge (1600 Gbps)
        _trn1("trn1.2xlarge", 1, 8, 32, 0),
        _trn1("trn1.32xlarge", 16, 128, 512, 8),
        _trn1("trn1n.32xlarge", 16, 128, 512, 16),
        _trn2("trn2.48xlarge"),
        _trn2("trn2u.48xlarge", ultraserver=True),  # a Trn2 UltraServer is 4 of these
        # Trn3 Gen1 UltraServer member: 16 devices per server, 192 vCPUs, 2 TiB (per-server share of the
        # UltraServer figures; the instance name is one the 2.30.2 driver recognises, launchability unconfirmed).
        # Its EFA adapters (16 x 200 Gbps, as trn2) are an assumption: no public specification gives them.
        Shape(
            "trn3.48xlarge",
            16,
            8,
            "NDv4",
            "NCv4",
            "Trn3",
            "Trainium3",
            144 * GIB,
            192,
            2048 * GIB,
            lnc=2,
            efa_adapters=16,
            efa_rate_gbps=200,
        ),
    )
}


def get_shape(name: str, lnc: int | None = None) -> Shape:
    """The shape called ``name``; ``lnc`` overrides its logical NeuronCore config (Trn2/Trn3 accept 1 or 2)."""
    try:
        shape = SHAPES[name]
    except KeyError:
        raise KeyError(f"unknown shape {name!r} (known: {', '.join(SHAPES)})") from None
    if lnc is None:
        return shape
    if lnc not in (1, 2) or shape.phys_cores % lnc or (lnc == 2 and shape.lnc == 1):
        raise ValueError(f"shape {name} does not support logical NeuronCore config {lnc}")
    return replace(shape, lnc=lnc)
