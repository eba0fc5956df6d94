"""Many devices in one process: tensors sharded over devices, and the all-reduce that joins them.

lazy.py holds MultiLazyBuffer (one value as a LazyBuffer per device), allreduce.py the naive and
ring all-reduce built from copies and kernels, data_parallel.py data-parallel training with a
replica of the model per device. Tensor's side is tinyedu/tensor_api/sharding.py.
"""

from tinyedu.multi.allreduce import naive_all_reduce, ring_all_reduce
from tinyedu.multi.lazy import MultiLazyBuffer

__all__ = ["MultiLazyBuffer", "naive_all_reduce", "ring_all_reduce"]
