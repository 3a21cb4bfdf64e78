"""Training callbacks and what they stand on: the callback protocol and the
training state it sees, the OOM observer, memory snapshots and the memory
monitor, file names from templates, and uploads to remote destinations.
Lightning adapters of these are in ``memsight.torch.lightning``.

The public names are re-exported by ``memsight.torch``; import them from there."""
