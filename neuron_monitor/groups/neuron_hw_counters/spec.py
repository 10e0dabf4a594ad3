"""``neuron_hw_counters`` (system): ECC events of each Neuron device over the period (per-period counts).

Its ``error`` may be partial: it names the counters an older driver (or Inf1) does not expose, and the others
are still reported beside it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuron_monitor.groups.neuron_hw_counters import body as B
from neuron_monitor.schema import names as N
from neuron_monitor.schema import spec as S
from neuron_monitor.schema.display import count as whole
from neuron_monitor.schema.values import Problems, index, mapping, number, sequence, text


@dataclass(slots=True)
class DeviceCounters:
    label: str  # the device index as a label value ("" when missing)
    index: int | None  # the device index when it is a non-negative integer
    events: dict[str, float]  # event (mem_ecc_corrected, ...) -> count over the period


@dataclass(slots=True)
class NeuronHwCounters:
    devices: list[DeviceCounters]


def read(body: dict[str, Any], where: str, problems: Problems) -> NeuronHwCounters:
    devices: list[DeviceCounters] = []
    listed = sequence(body.get(B.NEURON_DEVICES), problems, where, B.NEURON_DEVICES, counted=True) or ()
    for i, device in enumerate(listed):
        if device.__class__ is not dict:
            device = mapping(device, problems, f"{where}.{B.NEURON_DEVICES}", f"[{i}]", counted=True) or {}
        raw_index = device.get(B.NEURON_DEVICE_INDEX)
        events: dict[str, float] = {}
        for event, value in device.items():
            cls = value.__class__
            if cls is int or cls is float:
                events[event] = value
            elif value is not None and event != B.NEURON_DEVICE_INDEX:
                count = number(value, problems, f"{where}.{B.NEURON_DEVICES}[{i}]", event, True)
                if count is not None:
                    events[event] = count
        if raw_index.__class__ is int:
            events.pop(B.NEURON_DEVICE_INDEX, None)
            devices.append(DeviceCounters(str(raw_index), raw_index if raw_index >= 0 else None, events))
            continue
        events.pop(B.NEURON_DEVICE_INDEX, None)
        dwhere = f"{where}.{B.NEURON_DEVICES}[{i}]"
        label = text(raw_index, problems, dwhere, B.NEURON_DEVICE_INDEX, counted=True)
        devices.append(DeviceCounters(label, index(raw_index), events))
    return NeuronHwCounters(devices)


FAM_ECC = S.PromFamily(
    "hardware_ecc_events",
    S.COUNTER,
    "Hardware ecc events total",
    S.INSTANCE_SCOPE,
    ("neuron_device_index", "event_type"),
    drops_unlisted=True,
    created=True,
    # OpenTelemetry's hardware conventions: hw.errors (Counter, {error}) with error.type (docs/otlp.md)
    otel=S.OtelName("hw.errors", "{error}", labels=(("event_type", "error.type"),)),
)


def counts(value: NeuronHwCounters, period: float) -> Iterator[S.PromCount]:
    for device in value.devices:
        yield S.PromCount(
            FAM_ECC, (device.label,), device.events, 1.0
        )  # a listed device without events is listed still


CW_EVENT = S.CwMetric("NeuronDevice", S.COUNT, S.DEVICE_DIMS, keyed=True)
CW_TOTAL = S.CwMetric("NeuronDeviceHwEccEventsTotal", S.COUNT, S.DEVICE_DIMS)


def datums(value: NeuronHwCounters, period: float, per_vcpu: bool) -> Iterator[S.CwDatum]:
    for device in value.devices:
        if device.index is None:
            continue
        key = (str(device.index),)
        for event, count in device.events.items():
            yield CW_EVENT, key, event, count
        if device.events:  # a device whose counters could not be read has no total either (not a 0)
            yield CW_TOTAL, key, "", sum(device.events.values())


DET_ECC = S.DetRule(
    "ecc_uncorrected",
    S.DEVICE_TRACK,
    S.ERROR,
    "uncorrected ECC errors in a Neuron device's memory or SRAM",
)


def findings(value: NeuronHwCounters) -> Iterator[S.DetFinding]:
    """Per device: the uncorrected memory and SRAM ECC events of the period."""
    for device in value.devices:
        if device.index is not None:
            mem = whole(device.events.get(B.MEM_ECC_UNCORRECTED))
            sram = whole(device.events.get(B.SRAM_ECC_UNCORRECTED))
            if not (0 <= mem <= S.MAX_COUNT_PER_PERIOD and 0 <= sram <= S.MAX_COUNT_PER_PERIOD):
                continue  # no device counts that in a period: a damaged producer's value, not a finding
            details = {B.MEM_ECC_UNCORRECTED: mem, B.SRAM_ECC_UNCORRECTED: sram}
            yield DET_ECC, (str(device.index),), mem + sram, details


COL_ECC = S.TopColumn(S.TOP_DEVICES, "ecc", 8, order=10, always=True)


UNCORRECTED = (B.MEM_ECC_UNCORRECTED, B.SRAM_ECC_UNCORRECTED)  # a device with ECC files exposes both


def top(value: NeuronHwCounters, period: float | None) -> Iterator[S.TopCell]:
    """ECC events of the period per device: red when one is uncorrected. ``-`` when nothing was read, and when an
    uncorrected counter was not read and the others counted nothing (never a 0 that stands for an unread count)."""
    for device in value.devices:
        if device.index is None:
            continue
        events = {k: int(v) for k, v in device.events.items()}
        total = sum(events.values())
        uncorrected = sum(v for k, v in events.items() if "uncorrected" in k)
        style = "bold red" if uncorrected else "yellow" if total else "dim"
        blind = not events or (total == 0 and any(k not in events for k in UNCORRECTED))
        yield COL_ECC, (str(device.index),), "-" if blind else str(total), style


SPEC = S.GroupSpec(
    name=N.NEURON_HW_COUNTERS,
    placement=S.SYSTEM,
    read=read,
    doc=__doc__ or "",
    partial_errors=True,
    prometheus=(FAM_ECC,),
    counts=counts,
    cloudwatch=(CW_EVENT, CW_TOTAL),
    datums=datums,
    tracks=(S.Track("ECC", "ecc_uncorrected", "events", S.DEVICE_TRACK, S.SLICE_TRACK),),
    det_rules=(DET_ECC,),
    findings=findings,
    top_columns=(COL_ECC,),
    top=top,
)
