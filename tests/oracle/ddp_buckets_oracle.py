"""torch's DDP bucket assignment for tensors of given sizes and dtypes.

Usage: ddp_buckets_oracle.py FIRST_BYTES CAP_BYTES SIZE:DTYPE...
Prints one line per bucket: the tensor indices, space-separated
(torch.distributed._compute_bucket_assignment_by_size, as DDP calls it with
[first_bucket_bytes, bucket_bytes_cap]).
"""
import sys

import torch
import torch.distributed as dist

first, cap = int(sys.argv[1]), int(sys.argv[2])
tensors = []
for spec in sys.argv[3:]:
    size, dtype = spec.split(":")
    tensors.append(torch.empty(int(size), dtype=getattr(torch, dtype)))
buckets, _ = dist._compute_bucket_assignment_by_size(tensors, [first, cap])
for bucket in buckets:
    print(" ".join(str(i) for i in bucket))
