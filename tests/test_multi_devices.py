"""Devices with a number: C:0 (= C), C:1, PYTHON:1 ... are distinct devices of one kind."""

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.engine.schedule import create_schedule
from tinyedu.errors import DeviceError
from tinyedu.runtime.device import Device


def test_numbered_devices_share_a_backend_but_not_buffers() -> None:
    assert Device["C:1"] is Device["C"] and Device.canonicalize("c:2") == "C:2"
    a = Tensor([1.0, 2.0, 3.0], device="C:1")
    out = (a * 2 + 1).realize()
    assert out.device == "C:1" and out.lazydata.base.realized.device == "C:1"
    np.testing.assert_array_equal(out.numpy(), [3.0, 5.0, 7.0])


def test_a_copy_between_numbered_devices_is_its_own_item_and_mixing_them_is_refused() -> None:
    a = Tensor([1.0, 2.0], device="C:1").realize()
    with pytest.raises(DeviceError, match=r"different devices \(C:1 and C\)"):
        a + Tensor([1.0, 2.0])
    moved = a.to("PYTHON:1")
    names = [item.name for item in create_schedule([moved.lazydata])]
    assert names == ["copy_2_C:1->PYTHON:1"], names


def test_gradients_go_back_through_copies_between_numbered_devices() -> None:
    a = Tensor([1.0, 2.0, 3.0], device="C:1", requires_grad=True)
    (a.to("C") * a.to("PYTHON:2").to("C")).sum().backward()
    assert a.grad.device == "C:1"
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 4.0, 6.0])
