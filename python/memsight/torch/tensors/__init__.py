"""Tools that look at tensors themselves: which tensors hold memory
(mem_reporter), lending the GPU by moving them to host memory (courtesy),
and the walk over reachable tensors both use.

The public names are re-exported by ``memsight.torch``; import them from there."""
