"""`neuron-monitor --capture FILE.tar.gz [--redact]`: a bounded archive of what the daemon reads on this host, which
extracted is a ``--root`` that replays it (docs/first-host.md).

What goes in (paths as below the root, so the extracted archive is a root):

- the Neuron sysfs the readers use: ``sys/module/neuron/version``, ``sys/class/neuron_device`` and every device
  directory its entries link to (the whole device subtree, whatever layout the driver uses);
- the EFA adapters: ``sys/class/infiniband/<adapter>`` and the adapter's directory, the PCI functions' ``driver``
  links, ``vendor`` and ``device``, the kernel's ``sys/bus/pci/devices/<address>`` link of each Neuron device;
- ``proc/stat``, ``proc/meminfo``, ``proc/uptime`` and ``proc/<pid>/stat`` of each process with a data block;
  ``sys/class/dmi/id/product_name`` (the instance type, from DMI: instance metadata is never asked);
  ``opt/aws/neuron/logical_nc_config``;
- per device the ioctl answers and data blocks in the simulator's form (`devices.py`);
- ``capture/``: ``info.json`` (neuron-monitor's version, the driver version, the instance type, what was left
  out), ``check.txt`` and ``check.json`` (`--check`'s lines), ``report.json`` (one report of this host, collected
  as ``--once`` does, without instance metadata), ``dev.txt`` (the ``/dev`` listing), ``skipped.txt``.

Nothing from the environment, no token, no instance-metadata answer. Every file is read through the root's
confinement (regular files only, non-blocking, each capped), links are stored only when they stay inside the
root, and the archive stops growing at its caps and its time budget (`walk.py`). The file is written beside the
target and renamed into place, mode 0600.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import stat
import tarfile
import time
from typing import Any

import orjson

import neuron_monitor
from neuron_monitor.capture.devices import capture_devices
from neuron_monitor.capture.redact import Redactor
from neuron_monitor.capture.walk import FILE_CAP, MAX_ENTRIES, MAX_MEMBERS, TOTAL_CAP, Collector
from neuron_monitor.check.command import check
from neuron_monitor.check.lines import as_json, text
from neuron_monitor.daemon.config import Plan
from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.pci import try_pci_address
from neuron_monitor.neuron.sysfs import CLASS_DIR, DriverTree

CAPTURE_SECONDS = 120.0  # the time budget for reading the root (the report's own collection comes first)
MAX_DEV_ENTRIES = 4096
INFINIBAND = "sys/class/infiniband"
PCI_DEVICES = "sys/bus/pci/devices"
HOST_FILES = ("sys/module/neuron/version", "proc/stat", "proc/meminfo", "proc/uptime",
              "sys/class/dmi/id/product_name", "opt/aws/neuron/logical_nc_config")  # fmt: skip


def _pci_function(out: Collector, function_dir: str) -> None:
    """A PCI function's directory as the join needs it: the directory, its ids and its driver link."""
    out.add_dir(function_dir)
    for name in ("vendor", "device"):
        out.add_file(f"{function_dir}/{name}")
    driver = out.link(f"{function_dir}/driver")
    if driver:
        out.add_dir(driver)


def _class_devices(root: RootFS, out: Collector, class_dir: str) -> None:
    """Each device of a sysfs class directory: its own directory, and its PCI function when it links to one."""
    try:
        names = sorted(root.listdir(class_dir))
    except OSError:
        names = []
    for name in names:
        target = out.link(f"{class_dir}/{name}")
        if target and root.is_dir(target):
            out.walk(target)
            function = out.link(f"{target}/device")
            if function:
                _pci_function(out, function)


def _sysfs(root: RootFS, out: Collector, devices: tuple[int, ...]) -> None:
    out.walk(CLASS_DIR)
    _class_devices(root, out, CLASS_DIR)
    for index in devices:
        address, _ = try_pci_address(root, index)
        if address:
            target = out.link(f"{PCI_DEVICES}/{address}")
            if target:
                _pci_function(out, target)
    _class_devices(root, out, INFINIBAND)


def _dev_listing(root: RootFS) -> bytes:
    lines = []
    try:
        fd = root.open_fd("dev", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        return f"dev: {e.strerror or e}\n".encode()
    try:
        with os.scandir(fd) as it:
            for k, entry in enumerate(it):
                if k >= MAX_DEV_ENTRIES:
                    lines.append(f"... more than {MAX_DEV_ENTRIES} entries")
                    break
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = st.st_mode
                kind = ("char" if stat.S_ISCHR(mode) else "block" if stat.S_ISBLK(mode) else "dir"
                        if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "file")  # fmt: skip
                dev = f" {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if kind in ("char", "block") else ""
                lines.append(f"{kind} {stat.filemode(mode)}{dev} {entry.name!r}")
    finally:
        os.close(fd)
    return ("\n".join(sorted(lines)) + "\n").encode()


def _write_tar(path: str, out: Collector) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    now = int(time.time())
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6) as tar:
            for rel, member in out.members.items():
                info = tarfile.TarInfo(rel)
                info.mtime = now
                if member.kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif member.kind == "link":
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, member.target, 0o777
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(member.data), 0o644
                    tar.addfile(info, io.BytesIO(member.data))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def capture(args: argparse.Namespace, plan: Plan, root: RootFS, path: str) -> dict[str, Any]:
    """Write the capture to ``path``; returns what ``capture/info.json`` says."""
    quiet = argparse.Namespace(**{**vars(args), "no_imds": True, "json": False})
    lines, report = check(quiet, plan, root)
    redactor = Redactor(bool(args.redact))
    out = Collector(root, time.monotonic() + CAPTURE_SECONDS)
    devices = DriverTree(root).device_indexes()
    for rel in HOST_FILES:
        out.add_file(rel)
    pids = capture_devices(root, devices, out, redactor)  # before the report's redaction: it learns the names
    for pid in sorted(pids):
        out.add_file(f"proc/{pid}/stat")
    _sysfs(root, out, devices)
    out.add_own("capture/dev.txt", _dev_listing(root))
    out.add_own("capture/check.txt", text(lines).encode())
    header = {"neuron_monitor_version": neuron_monitor.__version__}
    out.add_own("capture/check.json", orjson.dumps(as_json(lines, **header), option=orjson.OPT_INDENT_2))
    out.add_own("capture/report.json", orjson.dumps(redactor.report(report)) + b"\n")
    driver = next((line.detail.split(": ", 1)[-1] for line in lines if line.source == "driver version"), "")
    product = out.members.get("sys/class/dmi/id/product_name")
    info = {
        "neuron_monitor_version": neuron_monitor.__version__,
        "driver_version": driver if any(li.source == "driver version" and li.status == "found" for li in lines) else "",
        "instance_type": product.data.decode("utf-8", "replace").strip()[:64] if product is not None else "",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "redacted": bool(args.redact),
        "devices": len(devices),
        "data_blocks": len(pids),
        "members": len(out.members) + 2,
        "content_bytes": out.content_bytes,
        "left_out": out.skipped_count,
        "caps": {"file_bytes": FILE_CAP, "total_bytes": TOTAL_CAP, "members": MAX_MEMBERS, "entries": MAX_ENTRIES},
    }
    out.add_own("capture/skipped.txt", ("\n".join(out.skipped) + "\n").encode() if out.skipped else b"")
    out.add_own("capture/info.json", orjson.dumps(info, option=orjson.OPT_INDENT_2) + b"\n")
    _write_tar(path, out)
    return info
