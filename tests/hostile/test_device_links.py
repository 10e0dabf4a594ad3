"""Links under ``--root`` to the host's device nodes are never opened unless they are what they claim to be.

A root may link ``proc``, ``sys`` and ``dev`` entries to the host's own trees (the simulator's ``proc/<pid>``, a
root made of links). Before: such a link was opened first and checked after, so ``<root>/dev/x -> /dev/<any>`` was
opened (opening a device can act: a watchdog opened is armed), and ``<root>/dev/neuron0 -> /dev/<any char device>``
was opened O_RDWR and sent the Neuron driver's ioctls. After: the target is looked at unopened (O_PATH); a device,
FIFO or socket is refused as "not a regular file", and a device node is opened only when it is named ``neuronN``.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_monitor.host.rootfs import RootFS
from neuron_monitor.neuron.devio import open_device
from tests.conftest import REPO

READ_IN_A_NEW_SESSION = """
import sys
from neuron_monitor.host.rootfs import RootFS
try:
    RootFS(sys.argv[1]).read_bytes("dev/probe")
    print("read")
except OSError as e:
    print(e.errno, e.strerror)
"""


def test_a_link_to_a_host_device_is_refused_unopened(tmp_path: Path) -> None:
    """/dev/tty, opened by a process without a controlling terminal, fails with ENXIO: refused as a device (EINVAL,
    "not a regular file") it was never opened; before, the failed open fell back to the root's own "no such file"."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "probe").symlink_to("/dev/tty")
    done = subprocess.run(
        [sys.executable, "-c", READ_IN_A_NEW_SESSION, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        start_new_session=True,  # no controlling terminal
        check=False,
    )
    assert done.stdout.strip() == f"{errno.EINVAL} not a regular file (a FIFO, device or socket is never read)", (
        done.stdout + done.stderr
    )


def test_a_regular_file_the_root_links_to_in_proc_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "self-stat").symlink_to("/proc/self/stat")
    assert RootFS(tmp_path).read_bytes("proc/self-stat").split(b" ", 1)[0].isdigit()


def test_a_neuron_device_link_to_another_device_is_never_opened(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "neuron0").symlink_to("/dev/null")
    with pytest.raises(OSError) as caught:
        open_device(RootFS(tmp_path), 0).close()  # before: /dev/null opened O_RDWR, its ioctls to come
    assert caught.value.errno == errno.ENODEV and "not a Neuron device node" in str(caught.value)


def test_a_simulated_device_reads_its_ioctl_file_inside_the_root(tmp_path: Path) -> None:
    """The simulator's ioctl stand-in is read inside the root as every file under it: a link to a file outside
    (here an absolute one, which resolves inside the root, where there is none) is no device (before: the outside
    file was opened and parsed as the device's process list)."""
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 65536)
    root = tmp_path / "root"
    (root / "dev" / "neuron-sim").mkdir(parents=True)
    (root / "dev" / "neuron0").write_bytes(b"\0" * 4096)
    (root / "dev" / "neuron-sim" / "neuron0.ioctl").symlink_to(outside)
    with pytest.raises(OSError) as caught:
        open_device(RootFS(root), 0).close()
    assert caught.value.errno == errno.ENODEV, caught.value


PROC_DEVICES = "Character devices:\n  1 mem\n  4 /dev/vc/0\n4000 neuron\n\nBlock devices:\n  7 loop\n"


def _node(root: Path, name: str, major: int, minor: int) -> None:
    import os
    import stat

    (root / "dev").mkdir(exist_ok=True)
    try:
        os.mknod(root / "dev" / name, stat.S_IFCHR | 0o600, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")


def test_a_node_named_neuron_with_another_drivers_numbers_is_never_opened(tmp_path: Path) -> None:
    """A character device named neuron0 made with mknod under another driver's numbers (here /dev/null's, 1:3)
    while proc/devices names the Neuron driver's major: refused unopened (before: opened O_RDWR and sent the
    driver's ioctls, which /dev/null refused with ENOTTY)."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "devices").write_text(PROC_DEVICES)
    _node(tmp_path, "neuron0", 1, 3)
    with pytest.raises(OSError) as caught:
        open_device(RootFS(tmp_path), 0).close()
    assert caught.value.errno == errno.ENODEV, caught.value
    assert "character device 1:3, not the Neuron driver's 4000:0" in str(caught.value)


def test_the_drivers_own_numbers_are_opened(tmp_path: Path) -> None:
    """The driver's major and the device's index as minor pass the check; no driver can hold major 4000 (the
    kernel's majors end at 511), so the open fails in the kernel (ENXIO; EPERM under a device cgroup), which shows
    the node got past the check. A wrong minor (another device's node renamed) is refused like a wrong major."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "devices").write_text(PROC_DEVICES)
    _node(tmp_path, "neuron0", 4000, 0)
    _node(tmp_path, "neuron1", 4000, 5)
    with pytest.raises(OSError) as caught:
        open_device(RootFS(tmp_path), 0).close()
    assert "not the Neuron driver's" not in str(caught.value)
    with pytest.raises(OSError) as caught:
        open_device(RootFS(tmp_path), 1).close()
    assert "character device 4000:5, not the Neuron driver's 4000:1" in str(caught.value)
