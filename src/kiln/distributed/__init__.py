"""Kiln's adapters for ``torch.distributed``: what a compiled module needs so that
DistributedDataParallel and FSDP2 (``fully_shard``) keep working around it.

``module_state`` makes a compiled module answer to the same composable-API state
(FSDP2's ``FSDPState``) as the module it wraps; ``ddp`` reads a DDP instance's bucket
layout for the graph splitter in ``kiln.backends.ddp_split``.
"""
