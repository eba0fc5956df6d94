"""Test setup shared by tests/ and notebooks/ (pytest loads this file for both).

MNIST: the tests that use the real digits and notebooks 08, 10, 11 and 14 read the IDX files from the
folder named by the environment variable MNIST_PATH (CI sets it in .ci/run). A learner's own run may
instead have downloaded them once with `python -c "from tinyedu.datasets import mnist; mnist()"`,
which fills the cache folder mnist() reads from. With neither, those tests and notebooks are skipped
with a message that says so.

NEON and LLVM: notebook 07 and the chapter-07 exercises run kernels on both devices, and notebook 11
builds and runs an exported program for the NEON target. On a machine without their tools (the
aarch64 cross compiler and qemu-user on x86-64, or llvmlite) they are skipped with the device's own
message, which says what to install.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinyedu.datasets import MNIST_FILES, MNIST_MD5, mnist_cache_dir

# the notebooks that read the digits
MNIST_NOTEBOOKS = ("08_training_mnist", "10_lstm_and_resnet", "11_export_to_c", "14_many_devices")
MNIST_HELP = ("MNIST is not available: set MNIST_PATH to a folder with the MNIST IDX files "
              f"({', '.join(MNIST_FILES['test'])}), or download them once with "
              "`python -c \"from tinyedu.datasets import mnist; mnist()\"`")


def mnist_available() -> bool:
    """True when mnist() will find the test split without a network: in $MNIST_PATH or in the cache."""
    folder = os.environ.get("MNIST_PATH")
    names = MNIST_FILES["test"]
    if folder:
        return all((Path(folder) / n).is_file() or (Path(folder) / n.removesuffix(".gz")).is_file()
                   for n in names)
    cache = mnist_cache_dir()
    return all((cache / n).is_file() for n in names if n in MNIST_MD5)


def backends_missing(devices: tuple[str, ...] = ("NEON", "LLVM")) -> str | None:
    """Why one of these devices cannot run here (None when all can)."""
    from tinyedu import Device
    from tinyedu.runtime.device import DeviceUnavailable

    for device in devices:
        try:
            Device[device]
        except DeviceUnavailable as missing:
            return str(missing)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chapter07 = [item for item in items if "07_backends" in str(item.fspath) or "[07." in item.nodeid]
    missing = backends_missing() if chapter07 else None
    if missing:
        for item in chapter07:
            item.add_marker(pytest.mark.skip(reason=missing))
    chapter11 = [item for item in items if "11_export_to_c" in str(item.fspath)]
    missing = backends_missing(("NEON",)) if chapter11 else None
    if missing:
        for item in chapter11:
            item.add_marker(pytest.mark.skip(reason=missing))
    if mnist_available():
        return
    skip = pytest.mark.skip(reason=MNIST_HELP)
    for item in items:
        if any(name in str(item.fspath) for name in MNIST_NOTEBOOKS) or item.get_closest_marker("mnist"):
            item.add_marker(skip)
