"""NCCL / Accelerate compatibility harness: build one image per software stack, run the canonical
workload in each under NCCL environment variants, and collate the outcomes."""

__version__ = "0.1.0"
