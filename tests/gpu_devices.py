"""The GPU devices that can run kernels here, for the GPU test files (not a test module itself)."""

from __future__ import annotations

from tinyedu.runtime.device import Device, DeviceUnavailable


def available(device: str) -> bool:
    try:
        Device[device].check_runnable()
        return True
    except DeviceUnavailable:
        return False


GPUS = [d for d in ("GPU", "CUDA", "WEBGPU") if available(d)]
