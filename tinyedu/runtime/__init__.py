"""Stage 4/5: devices. Each is an allocator, a compiler (maybe none) and a program runner."""

from tinyedu.runtime.device import Buffer, Device

__all__ = ["Buffer", "Device"]
